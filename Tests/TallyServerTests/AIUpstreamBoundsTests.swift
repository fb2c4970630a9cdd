import Foundation
import HTTPTypes
import TallyAPI
import TallyDevLLM
@testable import TallyServer
import TallyLoad
import TallyTestSupport
import Testing

/// A provider gone wrong against a real `tally serve` process (`TALLY_BIN`), whose memory is read from `/proc`: the
/// gateway's bounds hold where the test can see what the process really holds.
@Suite("AI gateway: bounds against a misbehaving upstream, in a real server process", .timeLimit(.minutes(5)))
struct AIUpstreamBoundsTests {
    /// A real `tally serve` on SQLite whose gateway calls the local model on `upstreamPort`.
    static func withServer<T: Sendable>(upstreamPort: Int, _ body: @Sendable (ServerProcess, APIConnection) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ai-bounds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = directory.appendingPathComponent("tally.yaml")
        try """
            ai:
              upstream: {baseURL: "http://127.0.0.1:\(upstreamPort)/v1", apiKeyEnv: AI_BOUNDS_TEST_KEY}
              models: [{name: chat, upstreamModel: dev, promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 40}]
            """.write(to: configuration, atomically: true, encoding: .utf8)
        let adminKey = "ai-bounds-admin-\(UUID().uuidString)"
        let server = try ServerProcess(
            name: "server", directory: directory,
            environment: ["TALLY_CONFIG": configuration.path, "AI_BOUNDS_TEST_KEY": DevLLMTests.key, "TALLY_ADMIN_KEY": adminKey])
        defer { server.stop() }
        let ports = try await server.ports()
        let api = APIConnection(port: ports.api, adminPort: ports.admin, adminKey: adminKey)
        defer { Task { await api.close() } }
        return try await body(server, api)
    }

    /// The process's peak resident memory so far (`VmHWM`), in bytes: a peak, so no spike between two reads escapes it.
    static func peakResidentBytes(_ server: ServerProcess) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8)
        return try #require(ProcFS.peakResidentBytes(status: status), "no VmHWM in /proc/\(server.process.processIdentifier)/status")
    }

    /// Every item of the stream until it ends.
    static func readAll(_ stream: EventStreamClient) async throws -> [EventStreamClient.Item] {
        var items: [EventStreamClient.Item] = []
        while true {
            let item = try await stream.nextEvent(within: .seconds(120))
            items.append(item)
            if item == .end { return items }
        }
    }

    @Test("A 64 MiB line from the upstream ends the stream with the error event and the charge; the server's peak memory grows by less than 16 MiB")
    func hugeLine() async throws {
        try await LocalModel.with(apiKey: DevLLMTests.key) { port in
            let upstream = DevLLMClient(port: port)
            try await Self.withServer(upstreamPort: port) { server, api in
                let user = try await api.newGuest(granted: 1_000)
                let body = Array(try JSONEncoder().encode(AIGatewayTests.chat("Tell me about the stars", stream: true)))
                // A whole stream first: what a first call allocates (pools, caches) is not counted.
                try await upstream.script([DevBehaviour(answerTokens: 5)])
                let (warmUp, _) = try await EventStreamClient.open(port: api.port, token: user.accessToken, path: "/v1/ai/chat/completions", json: body)
                #expect(try await Self.readAll(warmUp).contains(.event(name: "message", id: nil, data: "[DONE]")))
                await warmUp.close()
                let before = try Self.peakResidentBytes(server)

                try await upstream.script([DevBehaviour(answerTokens: 5, hugeTokenBytes: 64 << 20)])
                let (stream, head) = try await EventStreamClient.open(port: api.port, token: user.accessToken, path: "/v1/ai/chat/completions", json: body)
                #expect(head.status == 200)
                let items = try await Self.readAll(stream)
                await stream.close()
                let grown = try Self.peakResidentBytes(server) - before
                #expect(grown < 16 << 20, "the server's peak RSS grew by \(grown >> 20) MiB for one stream")
                print("peak RSS before \(before >> 20) MiB, grown by \(grown >> 10) KiB during the 64 MiB line")
                let data = items.compactMap { if case .event("message", _, let data) = $0 { data } else { nil } }
                // The role chunk and the first word came through; then the error event, and no [DONE].
                #expect(data.count == 3 && !data.contains("[DONE]"), "\(data.map { $0.prefix(200) })")
                let error = try #require(data.last.map { try JSONDecoder().decode(ChatErrorBody.self, from: Data($0.utf8)) })
                #expect(error.error.code == ErrorCode.upstreamFailed.rawValue && error.error.message.contains("longer than the gateway relays (1 MiB)"))
                let charge = try #require(items.compactMap { item -> AICharge? in
                    guard case .event(AIGatewayProtocol.chargeEvent, _, let text) = item else { return nil }
                    return try? JSONDecoder.tallyAPI.decode(AICharge.self, from: Data(text.utf8))
                }.first, "no charge event: \(items.suffix(2))")
                // Settled as any failed stream: no usage came, so the prompt's bound and the one chunk relayed.
                let request = try AIGatewayTests.bound("Tell me about the stars")
                #expect(charge.charged == AIGatewayTests.model.cost(promptTokens: request.promptBound, completionTokens: 1))
                let wallet = try await api.wallet(user)
                #expect(charge.wallet.held == 0 && charge.wallet == wallet)
                let captures = try await api.allEntries(user).filter { $0.kind == "capture" }
                #expect(captures.count == 2 && captures[0].reason?.hasSuffix("completion=1 (estimated)") == true, "\(captures)")
                try await api.expectBooksBalance(user)
            }
        }
    }
}
