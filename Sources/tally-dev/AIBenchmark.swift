import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TallyAPI
import TallyDevLLM
import TallyLoad

/// `tally-dev bench-ai`: the AI gateway's cost, measured against calling the same local model directly.
struct AIBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-ai",
        abstract: "Time streams through the AI gateway against the same streams sent to the upstream directly, or hold many open.",
        discussion: """
            overhead: --concurrency workers each alternate a stream straight to the upstream and one through the gateway, \
            so both see the same load; time to first byte and total time, per path. hold: --streams gateway streams open at \
            once for --seconds (the upstream must stream that long), sampling the gateway process's resident memory. \
            scripts/bench-ai starts the servers and prints the report; this prints one JSON line (milliseconds, bytes).
            """)

    @Argument(help: "overhead or hold") var mode: String
    @Option(help: "The gateway's root URL, e.g. http://127.0.0.1:8080.") var gateway: String
    @Option(help: "The upstream's root URL (the gateway's ai.upstream.baseURL without /v1).") var upstream: String
    @Option(help: "Environment variable holding the upstream's key.") var upstreamKeyEnv = "DEV_LLM_KEY"
    @Option(help: "File of access tokens, one per line.") var tokensFile: String
    @Option(help: "The gateway's model name.") var model = "chat"
    @Option(help: "The upstream's model name.") var upstreamModel = "dev"
    @Option(help: "Completion tokens per stream.") var maxTokens = 20
    @Option(help: "overhead: concurrent workers.") var concurrency = 64
    @Option(help: "overhead: seconds of measurement (after 2 s of warm-up).") var duration = 20
    @Option(help: "hold: streams open at once.") var streams = 1_000
    @Option(help: "hold: the gateway's process id, whose memory is sampled.") var serverPid: Int32 = 0

    func run() async throws {
        let tokens = try String(contentsOfFile: tokensFile, encoding: .utf8).split(separator: "\n").map(String.init)
        guard !tokens.isEmpty else { throw ValidationError("no tokens in \(tokensFile)") }
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(10), read: .seconds(120)))
        configuration.connectionPool = .init(idleTimeout: .seconds(120), concurrentHTTP1ConnectionsPerHostSoftLimit: 4_096)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let key = ProcessInfo.processInfo.environment[upstreamKeyEnv] ?? ""
        let direct = Target(url: upstream + "/v1/chat/completions", model: upstreamModel, bearers: [key])
        let viaGateway = Target(url: gateway + "/v1/ai/chat/completions", model: model, bearers: tokens)
        let result: [String: Double]
        switch mode {
        case "overhead": result = try await overhead(client, direct: direct, gateway: viaGateway)
        case "hold": result = try await hold(client, gateway: viaGateway)
        default: throw ValidationError("mode must be overhead or hold")
        }
        try BenchmarkRuns.printJSON(result)
    }

    /// Where streams go.
    struct Target: Sendable {
        let url: String
        let model: String
        let bearers: [String]
    }

    /// One stream's times, in milliseconds, and whether it ended with `[DONE]`.
    struct Timing: Sendable {
        var firstByte: Double
        var total: Double
        var complete: Bool
    }

    /// Streams one answer from `target` as `bearer`.
    func stream(_ client: HTTPClient, _ target: Target, bearer: String, maxTokens: Int) async throws -> Timing {
        var request = HTTPClientRequest(url: target.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Authorization", value: "Bearer " + bearer)
        let body = #"{"model":"\#(target.model)","stream":true,"max_tokens":\#(maxTokens),"messages":[{"role":"user","content":"What do the stars say about today?"}]}"#
        request.body = .bytes(ByteBuffer(string: body))
        let start = ContinuousClock.now
        let response = try await client.execute(request, timeout: .seconds(120))
        guard response.status.code == 200 else { throw ValidationError("\(target.url) answered \(response.status.code)") }
        // The first byte of the first data line: Tally opens every stream with a 2 KiB comment, sent before the model's
        // first token (for URLSession's content sniffing), which would otherwise time the head.
        var firstByte: Duration?
        var tail: [UInt8] = []
        var opening: [UInt8] = []
        for try await piece in response.body {
            if firstByte == nil {
                opening += piece.readableBytesView
                if opening.firstRange(of: Array("data:".utf8)) != nil {
                    firstByte = ContinuousClock.now - start
                    opening = []
                }
            }
            tail = Array((tail + piece.readableBytesView).suffix(256))
        }
        let total = ContinuousClock.now - start
        let complete = String(decoding: tail, as: UTF8.self).contains("[DONE]")
        return Timing(firstByte: Self.millis(firstByte ?? total), total: Self.millis(total), complete: complete)
    }

    func overhead(_ client: HTTPClient, direct: Target, gateway: Target) async throws -> [String: Double] {
        let warmUp = ContinuousClock.now + .seconds(2)
        let end = warmUp + .seconds(duration)
        let timings = try await withThrowingTaskGroup(of: [(Bool, Timing)].self) { group in
            for worker in 0..<concurrency {
                // Each worker on one event loop, with its connections: no thread hand-off for each chunk read, so
                // the measuring client takes less of the CPU it shares with what it measures.
                let loop = EventLoopExecutor(MultiThreadedEventLoopGroup.singleton.next())
                group.addTask(executorPreference: loop) {
                    var mine: [(Bool, Timing)] = []
                    var throughGateway = worker % 2 == 0
                    var request = 0
                    while ContinuousClock.now < end {
                        let target = throughGateway ? gateway : direct
                        let bearer = target.bearers[(worker + request * concurrency) % target.bearers.count]
                        let timing = try await stream(client, target, bearer: bearer, maxTokens: maxTokens)
                        if ContinuousClock.now > warmUp { mine.append((throughGateway, timing)) }
                        throughGateway.toggle()
                        request += 1
                    }
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let viaGateway = timings.filter { $0.0 }.map(\.1)
        let straight = timings.filter { !$0.0 }.map(\.1)
        var result: [String: Double] = [
            "concurrency": Double(concurrency), "gateway_streams": Double(viaGateway.count), "direct_streams": Double(straight.count),
            "incomplete": Double(timings.filter { !$0.1.complete }.count),
        ]
        for (name, list) in [("gateway", viaGateway), ("direct", straight)] where !list.isEmpty {
            var firstBytes = list.map(\.firstByte)
            var totals = list.map(\.total)
            (result["\(name)_first_byte_p50"], result["\(name)_first_byte_p99"]) = SDKBenchmark.percentiles(&firstBytes)
            (result["\(name)_total_p50"], result["\(name)_total_p99"]) = SDKBenchmark.percentiles(&totals)
        }
        return result
    }

    func hold(_ client: HTTPClient, gateway: Target) async throws -> [String: Double] {
        let before = residentBytes()
        let samples = SampleBox()
        let sampler = Task {
            while !Task.isCancelled {
                samples.add(residentBytes())
                try? await Task.sleep(for: .seconds(1))
            }
        }
        let started = ContinuousClock.now
        let timings = try await withThrowingTaskGroup(of: Timing.self) { group in
            for index in 0..<streams {
                group.addTask {
                    try await stream(client, gateway, bearer: gateway.bearers[index % gateway.bearers.count], maxTokens: maxTokens)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        sampler.cancel()
        let after = residentBytes()
        let peak = Swift.max(samples.largestValue, after)
        return [
            "streams": Double(streams), "complete": Double(timings.filter(\.complete).count),
            "seconds": Self.millis(ContinuousClock.now - started) / 1_000, "shortest_stream_ms": timings.map(\.total).min() ?? 0,
            "rss_before": Double(before), "rss_peak": Double(peak), "rss_after": Double(after),
            "rss_per_stream": Double(peak - before) / Double(max(streams, 1)),
        ]
    }

    /// The gateway process's resident memory (0 without --server-pid).
    func residentBytes() -> Int {
        guard serverPid > 0, let statm = try? String(contentsOfFile: "/proc/\(serverPid)/statm", encoding: .utf8) else { return 0 }
        return ProcFS.residentBytes(statm: statm) ?? 0
    }

    static func millis(_ duration: Duration) -> Double { SDKBenchmark.micros(duration) / 1_000 }
}

/// The largest memory sample taken.
final class SampleBox: Sendable {
    private let largest = Mutex(0)
    func add(_ value: Int) { largest.withLock { $0 = Swift.max($0, value) } }
    var largestValue: Int { largest.withLock { $0 } }
}
