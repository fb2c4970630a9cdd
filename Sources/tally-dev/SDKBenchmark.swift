import ArgumentParser
import Dispatch
import Foundation
import Synchronization
import TallyAPI
import TallyClient

/// `tally-dev bench-sdk`: micro-benchmarks of the client SDK's hot paths, in-process, with a canned
/// transport so the figures are the SDK's own cost (the network is measured by `scripts/bench`).
struct SDKBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-sdk",
        abstract: "Measure the client SDK: cache hits, LRU eviction, coalesced fan-out, optimistic apply, synced collections.")

    @Option(help: "Repetitions of the whole set; medians are reported.") var runs = 5

    func run() async throws {
        var rows: [String: [Double]] = [:]
        for _ in 0..<runs {
            for (name, value) in try await measureOnce() { rows[name, default: []].append(value) }
        }
        try await SDKSyncBenchmark.withServer { bench in
            var measured: [String: [Double]] = [:]
            for _ in 0..<runs {
                for (name, value) in try await bench.measureOnce() { measured[name, default: []].append(value) }
            }
            return measured
        }.forEach { rows[$0.key] = $0.value }
        print("| measurement | median of \(runs) runs | target |")
        print("|---|---:|---:|")
        for (name, unit, target) in Self.rows + SDKSyncBenchmark.rows {
            let values = rows[name, default: []].sorted()
            print("| \(name) | \(String(format: "%.3f", values[values.count / 2])) \(unit) | \(target) |")
        }
    }

    static let rows: [(String, String, String)] = [
        ("cache-hit read p50, timed singly", "µs", "≤ 1 µs"), ("cache-hit read p99, timed singly", "µs", ""),
        ("cache-hit read p50, batches of 100", "µs", "≤ 1 µs"), ("cache-hit read p99, batches of 100", "µs", ""),
        ("LRU insert with eviction p50", "µs", "≤ 2 µs"), ("LRU insert with eviction p99", "µs", ""),
        ("coalesced fan-out: requests for 1,000 reads", "", "1"), ("coalesced fan-out: last waiter resumed after response", "ms", "≤ 5 ms"),
        ("optimistic apply → observer p50", "ms", ""), ("optimistic apply → observer p99", "ms", "≤ 1 ms"),
    ]

    private func measureOnce() async throws -> [String: Double] {
        var out: [String: Double] = [:]
        let transport = CannedTransport()
        let client = Client(configuration: {
            var configuration = ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:1")!, secureStore: MemorySecureStore())
            configuration.transport = transport
            configuration.metrics = ClientMetrics(exportLabel: nil)
            return configuration
        }())
        try await client.signInAsGuest()
        let wallet = client.walletQuery
        _ = try await client.fetch(wallet)
        _ = try await client.fetch(client.quotasQuery)
        _ = try await client.fetch(.actions())

        // 1. A cache-hit read: the synchronous value for first paint. Timed one by one (two clock reads
        //    included) and in batches of 100 (the clock's cost spread out).
        var samples = [Double]()
        samples.reserveCapacity(100_000)
        var sink: Int64 = 0
        for _ in 0..<100_000 {
            let start = ContinuousClock.now
            sink &+= client.value(wallet)?.balance ?? 0
            samples.append(Self.micros(ContinuousClock.now - start))
        }
        (out["cache-hit read p50, timed singly"], out["cache-hit read p99, timed singly"]) = Self.percentiles(&samples)
        samples.removeAll(keepingCapacity: true)
        for _ in 0..<2_000 {
            let start = ContinuousClock.now
            for _ in 0..<100 { sink &+= client.value(wallet)?.balance ?? 0 }
            samples.append(Self.micros(ContinuousClock.now - start) / 100)
        }
        (out["cache-hit read p50, batches of 100"], out["cache-hit read p99, batches of 100"]) = Self.percentiles(&samples)
        if sink == 42 { print("") }

        // 2. LRU insert that evicts: a full cache of 500 entries, every insert pushes the oldest out.
        var lru = CostLRU<String, Data>(countLimit: 500, costLimit: 100 * 1024 * 1024)
        let keys = (0..<100_500).map { "image-\($0)" }
        let payload = Data(count: 1024)
        for key in keys.prefix(500) { lru.insert(payload, forKey: key, cost: payload.count) }
        samples.removeAll(keepingCapacity: true)
        for key in keys.dropFirst(500) {
            let start = ContinuousClock.now
            let evicted = lru.insert(payload, forKey: key, cost: payload.count)
            samples.append(Self.micros(ContinuousClock.now - start))
            precondition(evicted.count == 1)
        }
        (out["LRU insert with eviction p50"], out["LRU insert with eviction p99"]) = Self.percentiles(&samples)

        // 3. 1,000 identical reads while the response is held back; then release it. The group is drained
        //    only once every caller has its value: collecting children one by one meanwhile (perf: the
        //    runtime's TaskGroup::removeChildTask, walking the child list) would compete with the callers.
        transport.hold(path: "/v1/wallet")
        let before = transport.count(path: "/v1/wallet")
        let probe = FanOutProbe(expected: 1000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 {
                group.addTask {
                    defer { probe.arrive() }
                    _ = try await client.fetch(wallet, forceRefresh: true)
                }
            }
            while transport.waiting(path: "/v1/wallet") == 0 { await Task.yield() }
            for _ in 0..<2000 { await Task.yield() }  // let every caller join
            let released = transport.release(path: "/v1/wallet")
            await probe.allArrived()
            out["coalesced fan-out: last waiter resumed after response"] = Double(probe.last - released.uptimeNanoseconds) / 1e6
            try await group.waitForAll()
        }
        out["coalesced fan-out: requests for 1,000 reads"] = Double(transport.count(path: "/v1/wallet") - before)

        // 4. Optimistic apply → observer notified: perform an action and time until the observer sees it pending.
        let (notices, noticeContinuation) = AsyncStream.makeStream(of: ContinuousClock.Instant.self)
        let observer = Task {
            for await state in client.observe(wallet) where state.pendingMutations > 0 { noticeContinuation.yield(.now) }
        }
        var noticeIterator = notices.makeAsyncIterator()
        samples.removeAll(keepingCapacity: true)
        for _ in 0..<1000 {
            transport.hold(path: "/v1/actions/ai.query")
            let start = ContinuousClock.now
            let action = Task { try await client.perform("ai.query") }
            guard let noticed = await noticeIterator.next() else { break }
            samples.append(Self.micros(noticed - start) / 1000)
            while transport.waiting(path: "/v1/actions/ai.query") == 0 { await Task.yield() }
            _ = transport.release(path: "/v1/actions/ai.query")
            _ = try await action.value
        }
        observer.cancel()
        (out["optimistic apply → observer p50"], out["optimistic apply → observer p99"]) = Self.percentiles(&samples)
        return out
    }

    static func micros(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    }

    /// The median and the 99th percentile of `samples` (sorted in place).
    static func percentiles(_ samples: inout [Double]) -> (Double, Double) {
        samples.sort()
        return (samples[samples.count / 2], samples[Int(Double(samples.count) * 0.99)])
    }
}

/// When the last of many callers had its value, kept without a lock (1,000 callers taking one lock would
/// add their own contention to what is measured), and a signal once all of them have.
final class FanOutProbe: Sendable {
    /// The latest arrival, in `DispatchTime` nanoseconds (a plain integer: cheap to read and compare).
    private let latest = Atomic<UInt64>(0)
    private let arrived = Atomic<Int>(0)
    private let expected: Int
    private let finish = Mutex<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    init(expected: Int) { self.expected = expected }

    /// Called by each caller once it has its value (or has failed).
    func arrive() {
        let nanos = DispatchTime.now().uptimeNanoseconds
        var current = latest.load(ordering: .relaxed)
        while nanos > current {
            let (exchanged, original) = latest.compareExchange(expected: current, desired: nanos, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
        guard arrived.add(1, ordering: .acquiringAndReleasing).newValue == expected else { return }
        finish.withLock { state -> CheckedContinuation<Void, Never>? in
            state.done = true
            return state.waiter
        }?.resume()
    }

    /// Returns once every caller has arrived.
    func allArrived() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = finish.withLock { state -> Bool in
                if !state.done { state.waiter = continuation }
                return state.done
            }
            if done { continuation.resume() }
        }
    }

    /// The moment the last caller arrived, in `DispatchTime` nanoseconds.
    var last: UInt64 { latest.load(ordering: .acquiring) }
}

/// Answers the SDK's requests from memory, and can hold one path's answers until released.
final class CannedTransport: HTTPTransport {
    private struct State {
        var counts: [String: Int] = [:]
        var held: Set<String> = []
        var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let state = Mutex(State())
    private let wallet = Wallet(balance: 1_000_000_000, held: 0, version: 1)

    func count(path: String) -> Int { state.withLock { $0.counts[path, default: 0] } }
    func waiting(path: String) -> Int { state.withLock { $0.waiters[path, default: []].count } }
    func hold(path: String) { state.withLock { _ = $0.held.insert(path) } }

    /// Lets the held requests of `path` answer; returns the moment they were released.
    func release(path: String) -> DispatchTime {
        let waiters = state.withLock { state in
            state.held.remove(path)
            return state.waiters.removeValue(forKey: path) ?? []
        }
        let now = DispatchTime.now()
        for waiter in waiters { waiter.resume() }
        return now
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let held = state.withLock { state in
            state.counts[request.path, default: 0] += 1
            return state.held.contains(request.path)
        }
        if held {
            await withCheckedContinuation { continuation in
                let stillHeld = state.withLock { state in
                    guard state.held.contains(request.path) else { return false }
                    state.waiters[request.path, default: []].append(continuation)
                    return true
                }
                if !stillHeld { continuation.resume() }
            }
        }
        let encoder = TallyJSON.encoder()
        let quota = Quota(name: "readings", limit: 3, used: 0, resetsAt: Date(timeIntervalSince1970: 2e9), unlimited: false)
        switch request.path {
        case "/v1/auth/guest":
            return TransportResponse(
                status: 200,
                body: try encoder.encode(SessionTokens(userId: "bench", isGuest: true, accessToken: "a", refreshToken: "r", expiresIn: 86_400)))
        case "/v1/wallet": return TransportResponse(status: 200, body: try encoder.encode(wallet))
        case "/v1/quotas": return TransportResponse(status: 200, body: try encoder.encode(QuotaList(items: [quota])))
        case "/v1/actions":
            return TransportResponse(status: 200, body: try encoder.encode(ActionList(items: [ActionPrice(name: "ai.query", quota: nil, tokens: 3)])))
        default:
            let result = ActionResult(action: "ai.query", paidWith: .tokens, tokensCharged: 3, wallet: wallet, quotas: [quota])
            return TransportResponse(status: 200, body: try encoder.encode(result))
        }
    }
}
