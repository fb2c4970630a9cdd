import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import ServiceLifecycle
import TallyAPI
@testable import TallyClient
import TallyDevLLM
@testable import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// `client.ai` against a real server whose gateway calls a real local model (`tally-dev dev-llm`) over loopback.
@Suite("SDK AI gateway (real server, dev-llm upstream)", .timeLimit(.minutes(2)))
struct AIGatewayClientTests {
    static let key = "sk-client-test-0123456789"
    static let model = AIModelSpec(name: "chat", upstreamModel: "dev", promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 40)
    static let longModel = AIModelSpec(name: "long", upstreamModel: "dev", promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 400)
    static let catalog = try! Catalog(signupGrant: 0, quotas: [], actions: [ActionSpec(name: "ai.daily", tokens: 3)])

    /// A server on `kind` with the gateway in front of an in-process dev-llm, and that model's control URL.
    static func with<T: Sendable>(
        _ kind: StoreKind, tokenInterval: Duration = .zero, _ body: @Sendable (TallyTestServer, DevModel) async throws -> T
    ) async throws -> T {
        try await LocalModel.with(apiKey: key, tokenInterval: tokenInterval) { port in
            let spec = try DailyGenerationSpec(
                name: "todays_prediction", model: model, prompt: PromptTemplate("A prediction for {{date}}.", params: [], hasProfile: false, place: "test"),
                action: catalog.action(named: "ai.daily")!, quotaLimit: nil, params: [], profileDocument: nil)
            return try await TallyTestServer.with(kind, catalog: catalog, configure: { configuration in
                configuration.ai = AIConfiguration(
                    upstream: AIUpstream(baseURL: "http://127.0.0.1:\(port)/v1", apiKey: key), models: [model, longModel], dailyGenerations: [spec])
            }) { server in try await body(server, DevModel(port: port)) }
        }
    }

    static func ask(_ text: String, maxTokens: Int? = nil, model: String = "chat") -> ChatCompletionRequest {
        ChatCompletionRequest(model: model, messages: [ChatMessage(role: "user", content: text)], maxTokens: maxTokens)
    }

    @Test("chat returns the answer; the hold the SDK computes is the server's, and the charge settles the cached wallet", arguments: StoreKind.allCases)
    func chat(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, model in
            let (client, _) = try await server.readyClient(tokens: 500)
            let request = Self.ask("What do the stars say?")
            let computed = try await client.ai.hold(for: request)
            let reply = try await client.ai.reply(to: request)
            let charge = try #require(reply.charge)
            #expect(!reply.text.isEmpty && !reply.isReplay)
            #expect(charge.held == computed && charge.charged <= computed && charge.charged > 0)
            #expect(client.value(client.walletQuery) == charge.wallet && charge.wallet.balance == 500 - charge.charged)
            let again = try await client.ai.reply(to: request, idempotencyKey: "message-1")
            let replay = try await client.ai.reply(to: request, idempotencyKey: "message-1")
            #expect(replay.isReplay && replay.completion == again.completion)
            #expect(try await model.stats().completions == 2)
        }
    }

    @Test("A stream yields deltas while the model is still writing, shows the hold at once, then the real charge", arguments: StoreKind.allCases)
    func streams(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, model in
            let (client, _) = try await server.readyClient(tokens: 500)
            let request = Self.ask("Tell me a story", maxTokens: 12)
            let hold = try await client.ai.hold(for: request)
            try await model.script(#"{"behaviours":[{"pauseAfterChunks":3}]}"#)
            var iterator = client.ai.stream(request).makeAsyncIterator()
            var text = ""
            var events = 0
            while events < 3, let event = try await iterator.next() {
                text += event.content
                if !event.content.isEmpty { events += 1 }
            }
            // The model is paused after three tokens: what arrived was not buffered, and the wallet shows the hold.
            #expect(try await model.stats().pausedStreams == 1)
            #expect(client.value(client.walletQuery)?.available == 500 - hold)
            try await model.release()
            var charge: AICharge?
            while let event = try await iterator.next() {
                text += event.content
                if let reported = event.charge { charge = reported }
            }
            let report = try #require(charge)
            #expect(text.split(separator: " ").count == 12 && report.completionTokens == 12)
            #expect(client.value(client.walletQuery) == report.wallet && report.wallet.held == 0)
        }
    }

    @Test("A double-tapped streamed send makes one model call and one charge; another intent is a second call", arguments: StoreKind.allCases)
    func doubleTappedStream(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, model in
            let (client, _) = try await server.readyClient(tokens: 500)
            let request = Self.ask("Tell me a story", maxTokens: 12)
            try await model.script(#"{"behaviours":[{"pauseAfterChunks":2}]}"#)
            /// One tap of Send: the whole answer and its charge.
            @Sendable func send(intent: String? = nil) async throws -> (text: String, charge: AICharge?) {
                var text = ""
                var charge: AICharge?
                for try await event in client.ai.stream(request, intent: intent) {
                    text += event.content
                    charge = event.charge ?? charge
                }
                return (text, charge)
            }
            let first = Task { try await send() }
            // The second tap once the model is writing (paused after two tokens): it joins the call in flight.
            for _ in 0..<500 where try await model.stats().pausedStreams == 0 { try await Task.sleep(for: .milliseconds(10)) }
            let second = Task { try await send() }
            for _ in 0..<500 where client.aiStreams.readerCount < 2 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(client.aiStreams.count == 1 && client.aiStreams.readerCount == 2)
            try await model.release()
            let (a, b) = (try await first.value, try await second.value)
            #expect(a.text == b.text && a.text.split(separator: " ").count == 12)
            let charge = try #require(a.charge)
            #expect(b.charge == charge)
            #expect(try await model.stats().completions == 1)
            let wallet = try await client.fetch(client.walletQuery, forceRefresh: true)
            #expect(wallet.balance == 500 - charge.charged && wallet.held == 0)  // charged once

            // The same request with another intent is its own call.
            let other = try await send(intent: "message-2")
            #expect(other.charge != nil)
            #expect(try await model.stats().completions == 2)
        }
    }

    @Test("Cancelling the task that reads a stream ends the call; the server charges at most what was generated")
    func cancellation() async throws {
        // 300 tokens 20 ms apart (6 s): the server must stop the model long before its end.
        try await Self.with(.sqlite, tokenInterval: .milliseconds(20)) { server, model in
            let (client, _) = try await server.readyClient(tokens: 500)
            let request = Self.ask("A very long story", model: "long")
            let hold = try await client.ai.hold(for: request)
            try await model.script(#"{"behaviours":[{"pauseAfterChunks":4,"answerTokens":300}]}"#)
            let reader = Task {
                var deltas = 0
                for try await event in client.ai.stream(request) where !event.content.isEmpty {
                    deltas += 1
                    if deltas == 3 { return deltas }
                }
                return deltas
            }
            #expect(try await reader.value == 3)
            // Release the model only once it is paused (a release before the pause would be lost).
            for _ in 0..<500 where try await model.stats().pausedStreams == 0 { try await Task.sleep(for: .milliseconds(10)) }
            try await model.release()
            // The server settles once it notices: poll its wallet (through the SDK, which refetches).
            var wallet = try await client.fetch(client.walletQuery, forceRefresh: true)
            for _ in 0..<800 where wallet.held != 0 {
                try await Task.sleep(for: .milliseconds(10))
                wallet = try await client.fetch(client.walletQuery, forceRefresh: true)
            }
            let generated = try await model.stats().contentChunks
            #expect(wallet.held == 0 && generated < 250, "\(generated) of 300 generated")
            let charged = 500 - wallet.balance
            let prompt = try JSONValue.parse(Array(try JSONEncoder().encode(request))).objectValue ?? [:]
            #expect(charged > 0 && charged <= hold)
            #expect(charged <= Self.longModel.cost(promptTokens: PromptBound.tokens(request: prompt), completionTokens: generated))
        }
    }

    @Test("daily answers from the cache until the user's local midnight: one model call, one charge; observers go by that midnight too", arguments: StoreKind.allCases)
    func daily(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, model in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            let first = try await client.ai.daily("todays_prediction")
            let requests = transport.count(path: "/v1/ai/daily/todays_prediction")
            let second = try await client.ai.daily("todays_prediction")
            #expect(first == second && transport.count(path: "/v1/ai/daily/todays_prediction") == requests)
            #expect(try await model.stats().completions == 1)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 7)
            // The observed query is fresh until the generation's expiresAt (hours away here), then stale, whatever its age.
            let query = client.ai.dailyQuery("todays_prediction")
            let untilMidnight = first.expiresAt.timeIntervalSince(clock.now)
            try #require(untilMidnight > 2 * 3600, "the test clock starts early in the server's day")
            clock.advance(by: untilMidnight - 1)
            #expect(!client.state(query).isStale)
            clock.advance(by: 1)
            #expect(client.state(query).isStale)
        }
    }

    @Test("An observer left open over the user's local midnight shows the new day's generation, with no call from the app", arguments: StoreKind.allCases)
    func dailyObserverCrossesMidnight(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, model in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            let sleepersBefore = clock.sleeperCount
            var states = client.observe(client.ai.dailyQuery("todays_prediction")).makeAsyncIterator()
            var shown: DailyGeneration?
            while shown == nil, let state = await states.next() { shown = state.value }
            let today = try #require(shown)
            // The observation now sleeps (until that midnight on the client's clock, or a minute when it looked before
            // the value came), and asks nothing meanwhile.
            try await clock.waitForSleepers(sleepersBefore + 1)
            let requests = transport.count(path: "/v1/ai/daily/todays_prediction")
            clock.advance(by: today.expiresAt.timeIntervalSince(clock.now) - 60)
            #expect(transport.count(path: "/v1/ai/daily/todays_prediction") == requests)
            // Whichever it was, it now sleeps until midnight. Wait for that sleep before passing midnight: advancing
            // while the observer is between reading the clock and sleeping would put its wake-up a day late.
            try await clock.waitForSleeper(until: today.expiresAt)
            // Midnight passes on both sides: the observer shows the next day's generation.
            server.serverClock.advance(by: today.expiresAt.timeIntervalSince(server.serverClock.now) + 1)
            clock.advance(by: 61)
            var tomorrow: DailyGeneration?
            while tomorrow == nil, let state = await states.next() {
                if let value = state.value, value.day != today.day { tomorrow = value }
            }
            #expect(tomorrow?.expiresAt ?? .distantPast > today.expiresAt)
            #expect(transport.count(path: "/v1/ai/daily/todays_prediction") == requests + 1)
            #expect(try await model.stats().completions == 2)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 4)
        }
    }
}

/// The local model's controls over loopback.
struct DevModel: Sendable {
    let port: Int

    private func call(_ method: String, _ path: String, body: String? = nil) async throws -> Data {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        return try await URLSession.shared.data(for: request).0
    }

    func script(_ json: String) async throws { _ = try await call("POST", "/dev/script", body: json) }
    func release() async throws { _ = try await call("POST", "/dev/release") }
    func stats() async throws -> DevStats { try JSONDecoder().decode(DevStats.self, from: try await call("GET", "/dev/stats")) }
}
