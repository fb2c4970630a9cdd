import Foundation
import Synchronization
import TallyAPI
import TallyTestKit
import Testing

@testable import TallyClient

/// `client.ai.chat` against a stand-in for the gateway: the estimate shown and replaced by `Tally-Charge`'s
/// wallet, one Idempotency-Key for every attempt, a double tap as one request, refusals rolled back exactly.
@Suite("AI chat", .timeLimit(.minutes(1)))
struct AIClientChatTests {
    static let charge = AICharge(charged: 4, held: 20, promptTokens: 12, completionTokens: 3, wallet: Wallet(balance: 96, held: 0, version: 3))
    static let path = AIGatewayProtocol.chatCompletionsPath

    /// The gateway's answer: the completion, `Tally-Charge`, and `Idempotent-Replayed` on a replay.
    static func answer(_ text: String, replayed: Bool = false) throws -> TransportResponse {
        var headers = [AIGatewayProtocol.chargeHeader: AIStubs.json(charge)]
        if replayed { headers[TallyHeader.idempotentReplayed] = "true" }
        return try AIStubServer.json(AIStubs.completion(text), headers: headers)
    }

    @Test("The estimate shows held at once; the answer's Tally-Charge wallet replaces it, with no second request")
    func estimateThenCharge() async throws {
        let clock = ManualClock()
        let (client, server, _) = try await AIStubs.client(clock: clock)
        server.onChat { _ in
            try await clock.sleep(for: 1)
            return try Self.answer("Hi!")
        }
        let asked = ChatCompletionRequest(model: "chat", messages: AIStubs.ask("Hi"), stream: true, streamOptions: .init(includeUsage: true))
        let call = Task { try await client.ai.reply(to: asked, estimate: 20) }
        try await clock.waitForSleepers(1)
        let during = client.state(client.walletQuery)
        #expect(during.value?.held == 20 && during.value?.available == 80 && during.pendingMutations == 1)
        clock.advance(by: 1)
        let reply = try await call.value
        #expect(reply.text == "Hi!" && reply.charge == Self.charge && !reply.isReplay)
        let after = client.state(client.walletQuery)
        #expect(after.value == Self.charge.wallet && after.pendingMutations == 0 && !after.isStale)
        #expect(server.requests(to: "/v1/wallet").count == 1)

        let sent = try #require(server.requests(to: Self.path).first)
        #expect(sent.method == "POST" && sent.headers["Idempotency-Key"]?.isEmpty == false)
        let body = try TallyJSON.decoder().decode(ChatCompletionRequest.self, from: try #require(sent.body))
        #expect(body.stream == nil && body.streamOptions == nil && body.messages == AIStubs.ask("Hi"))  // a whole answer, whatever was asked
    }

    @Test("An answer lost on the way is asked for again under the same key (given, or made for the call)")
    func lostAnswerRetriedUnderOneKey() async throws {
        let (client, server, _) = try await AIStubs.client()
        let calls = Mutex(0)
        server.onChat { _ in
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            if call % 2 == 1 { throw TransportError.connectionLost }  // the server answered; the answer was lost
            return try Self.answer("Hi!", replayed: true)
        }
        let reply = try await client.ai.reply(to: ChatCompletionRequest(model: "chat", messages: AIStubs.ask("Hi")), idempotencyKey: "message-1")
        #expect(reply.isReplay && reply.text == "Hi!")
        #expect(server.requests(to: Self.path).map { $0.headers["Idempotency-Key"] } == ["message-1", "message-1"])

        _ = try await client.ai.chat(model: "chat", messages: AIStubs.ask("Hi"))
        let made = server.requests(to: Self.path).dropFirst(2).map { $0.headers["Idempotency-Key"] }
        #expect(made.count == 2 && made[0] == made[1] && made[0] != "message-1" && made[0]?.count == 36)
    }

    @Test("Two calls with one key and request share one request and show one estimate")
    func doubleTap() async throws {
        let clock = ManualClock()
        let (client, server, _) = try await AIStubs.client(clock: clock)
        server.onChat { _ in
            try await clock.sleep(for: 1)
            return try Self.answer("Hi!")
        }
        let request = ChatCompletionRequest(model: "chat", messages: AIStubs.ask("Hi"))
        let first = Task { try await client.ai.reply(to: request, idempotencyKey: "message-1", estimate: 20) }
        try await clock.waitForSleepers(1)
        let second = Task { try await client.ai.reply(to: request, idempotencyKey: "message-1", estimate: 20) }
        let shared = "ai " + IdempotencyKey.derive(method: "POST", path: Self.path, body: try TallyJSON.encoder().encode(request), intent: "message-1")
        try await waitUntil { client.writes.waiterCount(for: shared) >= 2 }
        #expect(client.value(client.walletQuery)?.held == 20)
        clock.advance(by: 1)
        let (a, b) = try await (first.value, second.value)
        #expect(a == b && server.requests(to: Self.path).count == 1)
    }

    @Test("A refusal rolls the estimate back; a 402 confirms the server's wallet, ready for a paywall")
    func refusals() async throws {
        let (client, server, _) = try await AIStubs.client(retry: .none)
        let poor = Wallet(balance: 3, held: 0, version: 9)
        server.onChat { _ in AIStubServer.error(402, .insufficientTokens, wallet: poor) }
        let refusal = await #expect(throws: ClientError.self) { try await client.ai.chat(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20) }
        #expect(refusal?.code == .insufficientTokens && refusal?.wallet == poor)
        #expect(client.value(client.walletQuery) == poor && client.state(client.walletQuery).pendingMutations == 0)

        server.onChat { _ in AIStubServer.error(502, .upstreamFailed) }
        let failed = await #expect(throws: ClientError.self) { try await client.ai.chat(model: "chat", messages: AIStubs.ask("Hi"), estimate: 2) }
        #expect(failed?.code == .server && failed?.serverCode == .upstreamFailed)
        let after = client.state(client.walletQuery)
        #expect(after.value == poor && after.pendingMutations == 0 && !after.isStale)  // exactly as before: nothing was charged
    }

    @Test("An answer without Tally-Charge leaves the wallet to a refetch; a key the server would refuse is not sent")
    func withoutChargeAndBadKeys() async throws {
        let (client, server, _) = try await AIStubs.client()
        server.onChat { _ in try AIStubServer.json(AIStubs.completion("Hi!")) }
        let reply = try await client.ai.reply(to: ChatCompletionRequest(model: "chat", messages: AIStubs.ask("Hi")), estimate: 20)
        #expect(reply.charge == nil)
        let after = client.state(client.walletQuery)
        #expect(after.value?.held == 0 && after.pendingMutations == 0 && after.isStale)

        for key in ["", "has space", "é", String(repeating: "k", count: 256)] {
            let refused = await #expect(throws: ClientError.self) {
                try await client.ai.chat(ChatCompletionRequest(model: "chat", messages: AIStubs.ask("Hi")), idempotencyKey: key)
            }
            #expect(refused?.code == .invalidInput)
        }
        #expect(server.requests(to: Self.path).count == 1)
    }
}
