import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// Intents against the real server: any string is one, and it is scoped to the whole request.
@Suite("Client intents", .timeLimit(.minutes(1)))
struct ClientIntentTests {
    @Test("One intent on two actions at once is two writes, each answered with its own action")
    func oneIntentTwoActionsAtOnce() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            let query = Task { try await client.perform("ai.query", intent: "message-42") }
            try await clock.waitForSleepers(1)  // the AI query is in flight
            let reading = Task { try await client.perform("reading", intent: "message-42") }
            clock.advance(by: 1)
            // Before the fix the reading either joined the AI query (and got its answer) or, sent after it, was
            // refused as a reuse of its key (422 idempotency_mismatch).
            let (answered, read) = try await (query.value, reading.value)
            #expect(answered.action == "ai.query" && answered.paidWith == .tokens)
            #expect(read.action == "reading" && read.paidWith == .quota)
            #expect(transport.count(path: "/v1/actions/ai.query") == 1 && transport.count(path: "/v1/actions/reading") == 1)
        }
    }

    @Test("One intent on two actions one after the other is two writes; on the same action it is one charge")
    func oneIntentTwoActionsInTurn() async throws {
        try await TallyTestServer.with { server in
            let (client, _) = try await server.readyClient(tokens: 10)
            #expect(try await client.perform("ai.query", intent: "message-7").wallet.balance == 7)
            let reading = try await client.perform("reading", intent: "message-7")
            #expect(reading.action == "reading" && reading.quotas.first?.used == 1)
            // The first request again with its intent: the server replays its answer, charging nothing.
            #expect(try await client.perform("ai.query", intent: "message-7").wallet.balance == 7)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 7)
        }
    }

    @Test("Any string is an intent: spaces, punctuation, emoji, control characters, 10,000 characters")
    func anyStringIsAnIntent() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = try await server.readyClient(tokens: 100)
            let intents = ["what is my horoscope?", "🔮 Löwe, Aszendent Jungfrau", "tab\tnewline\n", String(repeating: "x", count: 10_000), ""]
            var balance: Int64 = 100
            for intent in intents {
                balance -= 3
                #expect(try await client.perform("ai.query", intent: intent).wallet.balance == balance)
            }
            let keys = transport.requests.filter { $0.path == "/v1/actions/ai.query" }.compactMap { $0.headers[TallyHeader.idempotencyKey] }
            #expect(keys.count == intents.count && Set(keys).count == intents.count)
            #expect(keys.allSatisfy { (1...255).contains($0.utf8.count) && $0.utf8.allSatisfy { (0x21...0x7E).contains($0) } })
            // Each is still one intent: asked again, nothing more is charged.
            for intent in intents { #expect(try await client.perform("ai.query", intent: intent).wallet.balance <= 97) }
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == balance)
        }
    }
}
