import Foundation
import TallyAPI
import TallyDevLLM
@testable import TallyServer
import Testing

/// What a stream the client leaves mid-way is charged, through the real gateway and `tally-dev dev-llm`, once the model
/// has served English, Japanese and code: the prompt as estimated from the completed calls (``PromptEstimator``),
/// judged against dev-llm's own count of the same prompt.
@Suite("AI gateway: a cancelled stream's charge", .timeLimit(.minutes(5)))
struct AICancelledChargeTests {
    /// A row of the table in docs/ai-gateway.md.
    struct Row: Sendable {
        var kind: String
        var text: String
        var bytes: Int
        var bound: Int
        var estimate: Int
        var real: Int
    }

    @Test(
        "After 21 completed calls of English, Japanese and code, a stream cancelled mid-way is charged within 1.5x of its real usage, never above its hold",
        arguments: StoreKind.allCases)
    func cancelledStreamsAreChargedFairly(_ kind: StoreKind) async throws {
        // Tokens 20 ms apart: the gateway notices the client gone long before the model's 300-token answer ends.
        try await AIGatewayTests.with(kind, tokenInterval: .milliseconds(20)) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100_000)
            // Warm the model: the first seven samples of each kind, interleaved, completed (3-token answers).
            for index in 0..<21 {
                let messages = PromptSamples.kinds[index % 3].prompts[index / 3]
                let response = try await api.send(
                    .post, "/v1/ai/chat/completions", token: user.accessToken,
                    json: ChatCompletionRequest(model: "long", messages: messages, maxTokens: 3))
                #expect(response.status == .ok, "\(response.text)")
            }
            // Cancel a stream of each of the other three samples of each kind, none of them seen.
            var rows: [Row] = []
            for (name, prompts) in PromptSamples.kinds {
                for messages in prompts[7...] {
                    rows.append(try await Self.cancel(messages, kind: name, api: api, user: user, server: server, upstream: upstream))
                }
            }
            print(Self.table(rows))
            try await api.expectBooksBalance(user)
        }
    }

    /// Streams `messages`, leaves after five content chunks, and reads what the ledger charged.
    static func cancel(
        _ messages: [ChatMessage], kind: String, api: APIConnection, user: TestUser, server: LiveServer, upstream: DevLLMClient
    ) async throws -> Row {
        try await upstream.script([DevBehaviour(pauseAfterChunks: 5, answerTokens: 300)])
        let generatedBefore = try await upstream.stats().contentChunks
        let request = ChatCompletionRequest(model: "long", messages: messages, stream: true)
        let (stream, head) = try await EventStreamClient.open(
            port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions", json: Array(try JSONEncoder().encode(request)))
        #expect(head.status == 200)
        var seen = 0
        while seen < 6 { if case .event = try await stream.nextEvent() { seen += 1 } }
        await stream.close()
        #expect(try await upstream.release() == 1)
        let wallet = try await AIGatewayTests.settled(api, user)
        #expect(wallet.held == 0)
        let entries = try await api.allEntries(user)
        let capture = try #require(entries.first { $0.kind == "capture" })
        let hold = try #require(entries.first { $0.kind == "hold" })
        #expect(capture.reason?.split(separator: " ").first == hold.reason?.split(separator: " ").first, "the capture of this stream's hold")
        // "<hold> ai long prompt=P completion=C (estimated)"
        let reason = try #require(capture.reason)
        #expect(reason.hasSuffix("(estimated)"), "\(reason)")
        let counts = Dictionary(uniqueKeysWithValues: reason.split(separator: " ").compactMap { word -> (String, Int)? in
            let parts = word.split(separator: "=")
            guard parts.count == 2, let value = Int(parts[1]) else { return nil }
            return (String(parts[0]), value)
        })
        let estimate = try #require(counts["prompt"])
        let completion = try #require(counts["completion"])
        // dev-llm's own count of the prompt, and of what it generated: independent of the gateway.
        let real = DevAnswer.promptTokens(messages)
        let generated = try await upstream.stats().contentChunks - generatedBefore
        let body = PromptSamples.body(messages, model: "long", stream: true)
        let bound = PromptBound.tokens(request: body)
        let held = try AIGatewayTests.longModel.hold(for: request)
        let charged = -capture.amount
        let text = messages.map(\.content).joined(separator: " / ")
        #expect(Double(estimate) <= 1.5 * Double(real), "\(kind): estimated \(estimate) of a real \(real): \(text)")
        #expect(Double(estimate) >= 0.9 * Double(real), "\(kind): estimated \(estimate) of a real \(real): \(text)")
        #expect(completion <= generated && completion >= 5, "relayed \(completion) of \(generated) generated")
        #expect(charged == min(AIGatewayTests.longModel.cost(promptTokens: estimate, completionTokens: completion), held))
        #expect(charged <= held && charged > 0)
        let realCost = AIGatewayTests.longModel.cost(promptTokens: real, completionTokens: generated)
        #expect(Double(charged) <= 1.5 * Double(realCost), "charged \(charged) for a real usage costing \(realCost)")
        return Row(kind: kind, text: text, bytes: messages.reduce(0) { $0 + $1.content.utf8.count }, bound: bound, estimate: estimate, real: real)
    }

    /// The rows as the Markdown table of docs/ai-gateway.md.
    static func table(_ rows: [Row]) -> String {
        var lines = [
            "| prompt | kind | bytes | byte bound | estimate | real (dev-llm) | estimate / real | bound / real |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows {
            let shown = row.text.count > 40 ? String(row.text.prefix(40)) + "…" : row.text
            let escaped = shown.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "`", with: "\\`")
                .replacingOccurrences(of: "\n", with: " ")
            lines.append(
                "| \(escaped) | \(row.kind) | \(row.bytes) | \(row.bound) | \(row.estimate) | \(row.real) | "
                    + String(format: "%.2f", Double(row.estimate) / Double(row.real)) + " | "
                    + String(format: "%.2f", Double(row.bound) / Double(row.real)) + " |")
        }
        return lines.joined(separator: "\n")
    }
}
