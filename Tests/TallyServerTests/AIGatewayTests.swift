import Foundation
import NIOCore
import HTTPTypes
import Logging
import TallyAPI
import TallyDevLLM
@testable import TallyServer
import TallyStore
import Testing

/// The AI gateway against a real server on both stores, with `tally-dev dev-llm` as the upstream over loopback.
@Suite("AI gateway", .timeLimit(.minutes(3)))
struct AIGatewayTests {
    static let model = AIModelSpec(name: "chat", upstreamModel: "dev", promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 40)
    /// A model that may write long answers: a stream the gateway must cut short.
    static let longModel = AIModelSpec(name: "long", upstreamModel: "dev", promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 400)

    /// A server on `kind` whose gateway calls `upstream` (the dev model wants ``DevLLMTests/key``).
    static func with<T: Sendable>(
        _ kind: StoreKind, maxConcurrent: Int = 64, apiKey: String = DevLLMTests.key, logs: LogCapture? = nil,
        catalog: Catalog = .standard, daily: [DailyGenerationSpec] = [], connectionsPerIP: Int = 256, tokenInterval: Duration = .zero,
        _ body: @Sendable (LiveServer, DevLLMClient) async throws -> T
    ) async throws -> T {
        try await DevLLMTests.with(tokenInterval: tokenInterval) { upstream in
            try await LiveServer.with(kind, catalog: catalog, logs: logs, configure: { configuration in
                configuration.connections.maxConnectionsPerIP = connectionsPerIP
                configuration.backlog = max(configuration.backlog, connectionsPerIP)
                configuration.ai = AIConfiguration(
                    upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: apiKey),
                    models: [Self.model, Self.longModel], maxConcurrentPerUser: maxConcurrent, dailyGenerations: daily)
            }) { server in try await body(server, upstream) }
        }
    }

    static func chat(_ text: String, stream: Bool = false, maxTokens: Int? = nil, usage: Bool = false, model: String = "chat") -> ChatCompletionRequest {
        ChatCompletionRequest(
            model: model, messages: [ChatMessage(role: "user", content: text)], stream: stream ? true : nil,
            streamOptions: usage ? ChatStreamOptions(includeUsage: true) : nil, maxTokens: maxTokens)
    }

    /// The most a request of `text` can cost (what the gateway holds).
    static func bound(_ text: String, maxTokens: Int? = nil, model: String = "chat") throws -> ChatRequest {
        let body = ByteBuffer(bytes: try JSONEncoder().encode(chat(text, maxTokens: maxTokens, model: model)))
        return try ChatRequest.parse(
            body, user: "user-1", configuration: AIConfiguration(upstream: AIUpstream(baseURL: "http://x/v1", apiKey: nil), models: [Self.model, Self.longModel]))
    }

    /// `user`'s wallet once nothing is held (or after 8 s): a call settles after its response ended.
    static func settled(_ api: APIConnection, _ user: TestUser) async throws -> Wallet {
        var wallet = try await api.wallet(user)
        for _ in 0..<800 where wallet.held != 0 {
            try await Task.sleep(for: .milliseconds(10))
            wallet = try await api.wallet(user)
        }
        return wallet
    }

    @Test("A streamed answer is relayed chunk by chunk while the model is still generating, then charged its real usage", arguments: StoreKind.allCases)
    func streamedAndCharged(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000)
            try await upstream.script([DevBehaviour(pauseAfterChunks: 3)])
            let (stream, head) = try await EventStreamClient.open(
                port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions",
                json: Array(try JSONEncoder().encode(Self.chat("Tell me about the stars", stream: true))))
            #expect(head.status == 200 && head.header("X-Content-Type-Options") == "nosniff")
            try await stream.expectOpening()
            // Three content chunks (after the role chunk) arrive while the model is paused: nothing is buffered.
            var data: [String] = []
            while data.count < 4 { if case .event(_, _, let text) = try await stream.nextEvent() { data.append(text) } }
            #expect(try await upstream.stats().pausedStreams == 1)
            // The hold shows in the wallet while the call runs.
            let during = try await api.wallet(user)
            let held = try Self.bound("Tell me about the stars").maxCost
            #expect(during.held == held && during.available == 1_000 - held)
            #expect(try await upstream.release() == 1)
            var charge: AICharge?
            while true {
                let item = try await stream.nextEvent()
                guard case .event(let name, _, let text) = item else { break }
                if name == AIGatewayProtocol.chargeEvent {
                    charge = try JSONDecoder.tallyAPI.decode(AICharge.self, from: Data(text.utf8))
                    break
                }
                data.append(text)
            }
            await stream.close()
            #expect(data.last == "[DONE]")
            #expect(!data.contains { $0.contains("\"usage\":{") }, "the usage chunk is the gateway's, not asked for")
            let words = data.dropFirst().filter { $0.contains("\"content\":\"") }.count
            let prompt = DevAnswer.promptTokens([ChatMessage(role: "user", content: "Tell me about the stars")])
            let report = try #require(charge)
            #expect(report.promptTokens == prompt && report.completionTokens == words)
            #expect(report.charged == Self.model.cost(promptTokens: prompt, completionTokens: words))
            #expect(report.wallet.balance == 1_000 - report.charged && report.wallet.held == 0)
            #expect(try await api.wallet(user) == report.wallet)
            let entries = try await api.allEntries(user).filter { $0.kind == "hold" || $0.kind == "capture" || $0.kind == "release" }
            try #require(entries.map(\.kind) == ["capture", "hold"])
            #expect(entries[0].reason?.hasSuffix("ai chat prompt=\(prompt) completion=\(words)") == true, "\(entries)")
            try await api.expectBooksBalance(user)
        }
    }

    @Test("An upstream 500 before the first chunk charges nothing, streamed or not", arguments: StoreKind.allCases)
    func upstreamFailureChargesNothing(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            try await upstream.script([DevBehaviour(status: 500), DevBehaviour(status: 500)])
            for stream in [false, true] {
                let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hi", stream: stream))
                #expect(response.status == .badGateway && response.text.contains("upstream_failed"), "\(response.text)")
            }
            #expect(try await api.wallet(user).balance == 100)
            let kinds = try await api.allEntries(user).map(\.kind)
            #expect(kinds == ["release", "hold", "release", "hold", "grant"])
            try await api.expectBooksBalance(user)
        }
    }

    @Test("A client that leaves after N chunks is charged at most what was generated, never more than the hold", arguments: StoreKind.allCases)
    func clientLeavesMidStream(_ kind: StoreKind) async throws {
        // 300 tokens 20 ms apart (6 s): the gateway must stop the model long before its end, even on a loaded machine.
        try await Self.with(kind, tokenInterval: .milliseconds(20)) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000)
            try await upstream.script([DevBehaviour(pauseAfterChunks: 5, answerTokens: 300)])
            let (stream, _) = try await EventStreamClient.open(
                port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions",
                json: Array(try JSONEncoder().encode(Self.chat("A long story please", stream: true, model: "long"))))
            var seen = 0
            while seen < 6 { if case .event = try await stream.nextEvent() { seen += 1 } }
            await stream.close()
            #expect(try await upstream.release() == 1)
            // The gateway notices at its next write, stops the model and settles: wait for the hold to close.
            let wallet = try await Self.settled(api, user)
            #expect(wallet.held == 0)
            let request = try Self.bound("A long story please", model: "long")
            let generated = try await upstream.stats().contentChunks
            let charged = 1_000 - wallet.balance
            #expect(charged > 0 && charged <= request.maxCost)
            #expect(charged <= Self.longModel.cost(promptTokens: request.promptBound, completionTokens: generated), "generated \(generated)")
            #expect(request.completionLimit == 400 && generated < 250, "the model was stopped long before its end (\(generated) of 300)")
            try await api.expectBooksBalance(user)
        }
    }

    @Test("A client that hangs up before the stream's head is written leaves no hold open", arguments: StoreKind.allCases)
    func clientLeavesBeforeTheHead(_ kind: StoreKind) async throws {
        // 300 tokens 20 ms apart (6 s) once the model answers: a relay that did not notice the client leave would read
        // them all, and be charged the model's usage, before it settled.
        try await Self.with(kind, tokenInterval: .milliseconds(20)) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000)
            try await upstream.script([DevBehaviour(answerTokens: 300, pauseBeforeHead: true)])
            let body = String(decoding: try JSONEncoder().encode(Self.chat("count the stars", stream: true, model: "long")), as: UTF8.self)
            let raw = try await RawConnection.open(port: server.port)
            try await raw.send(
                "POST /v1/ai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(user.accessToken)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            // The hold is open and the model has not answered: the client leaves now.
            var (held, paused) = (0 as Int64, 0)
            for _ in 0..<500 where held == 0 || paused == 0 {
                try await Task.sleep(for: .milliseconds(10))
                (held, paused) = (try await api.wallet(user).held, try await upstream.stats().pausedStreams)
            }
            #expect(held > 0 && paused == 1)
            await raw.close()
            #expect(try await upstream.release() == 1)
            // No clock advance: the hold must not wait for its expiry. (The client's close is a half-close to the
            // server, so the stream's body still runs; its writes then fail, and the relay settles what was generated.)
            let wallet = try await Self.settled(api, user)
            let hold = try Self.bound("count the stars", model: "long").maxCost
            #expect(wallet.held == 0 && wallet.balance >= 1_000 - hold)
            // The hang-up itself ended the call: the relay stopped the model long before its end and charged what it had
            // relayed, estimated — not the usage the model reports after its last token, which a relay that went on
            // reading (ignoring its failed writes) would have been charged.
            let generated = try await upstream.stats().contentChunks
            #expect(generated < 250, "the model was stopped long before its end (\(generated) of 300)")
            let captures = try await api.allEntries(user).filter { $0.kind == "capture" }
            try #require(captures.count == 1, "\(captures)")
            #expect(captures[0].reason?.hasSuffix("(estimated)") == true, "charged from the model's usage: \(captures)")
            try await api.expectBooksBalance(user)
        }
    }

    @Test("50 concurrent calls by one user never overdraw the wallet", arguments: StoreKind.allCases)
    func concurrentCallsNeverOverdraw(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest()
            let hold = try Self.bound("count the stars").maxCost
            try await api.grant(hold * 10 + hold / 2, to: user)
            let statuses = try await concurrently(50, server: server) { index, connection in
                let response = try await connection.send(
                    .post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("count the stars", stream: index % 2 == 0))
                return response.status.code
            }
            #expect(statuses.allSatisfy { $0 == 200 || $0 == 402 }, "\(statuses)")
            #expect(statuses.contains(402) && statuses.filter { $0 == 200 }.count >= 10)
            let wallet = try await api.wallet(user)
            #expect(wallet.balance >= 0 && wallet.held == 0)
            let entries = try await api.allEntries(user)
            #expect(entries.filter { $0.kind == "hold" }.count == statuses.filter { $0 == 200 }.count)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("An answer says in Server-Timing how long the gateway and the upstream took; a replay does not", arguments: [StoreKind.sqlite])
    func serverTiming(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            func durations(_ response: APIResponse) -> [String: Double] {
                let value = response.headers[.serverTiming] ?? ""
                return Dictionary(uniqueKeysWithValues: value.split(separator: ",").compactMap { metric -> (String, Double)? in
                    let fields = metric.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                    guard fields.count == 2, fields[1].hasPrefix("dur="), let ms = Double(fields[1].dropFirst(4)) else { return nil }
                    return (fields[0], ms)
                })
            }
            let clock = ContinuousClock()
            var response: APIResponse?
            let wall = try await clock.measure {
                response = try await api.send(
                    .post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hello"), headers: [.idempotencyKey: "timed"])
            }
            let answered = try #require(response)
            #expect(answered.status == .ok)
            let times = durations(answered)
            let gateway = try #require(times["gateway"]), upstreamTime = try #require(times["upstream"])
            #expect(gateway >= 0 && upstreamTime > 0)
            #expect(gateway + upstreamTime <= Double(wall.components.seconds) * 1000 + Double(wall.components.attoseconds) / 1e15 + 0.2)
            let replay = try await api.send(
                .post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hello"), headers: [.idempotencyKey: "timed"])
            #expect(replay.headers[.idempotentReplayed] == "true" && replay.headers[.serverTiming] == nil)
            let (stream, head) = try await EventStreamClient.open(
                port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions",
                json: Array(try JSONEncoder().encode(Self.chat("hi", stream: true))))
            let streamed = head.header("Server-Timing") ?? ""
            #expect(head.status == 200 && streamed.hasPrefix("gateway;dur=") && streamed.contains(", upstream;dur="), "\(streamed)")
            while case .event = try await stream.nextEvent() {}
            await stream.close()
        }
    }

    @Test("A retried request with the same Idempotency-Key returns the same answer, one upstream call, one charge", arguments: StoreKind.allCases)
    func idempotentRetry(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            let headers: HTTPFields = [.idempotencyKey: "ask-1"]
            let first = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hello"), headers: headers)
            let second = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hello"), headers: headers)
            #expect(first.status == .ok && second.status == .ok)
            #expect(first.body == second.body && second.headers[.idempotentReplayed] == "true")
            #expect(first.headers[HTTPField.Name("Tally-Charge")!] == second.headers[HTTPField.Name("Tally-Charge")!])
            _ = try first.decode(ChatCompletion.self)
            #expect(try await upstream.stats().completions == 1)
            let other = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("bye"), headers: headers)
            #expect(other.status.code == 422)
            #expect(try await api.allEntries(user).filter { $0.kind == "capture" }.count == 1)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("Beyond maxConcurrentPerUser calls in flight, a call is refused with 429 and holds nothing", arguments: [StoreKind.sqlite])
    func concurrencyLimit(_ kind: StoreKind) async throws {
        try await Self.with(kind, maxConcurrent: 1) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            try await upstream.script([DevBehaviour(pauseAfterChunks: 1)])
            let (stream, _) = try await EventStreamClient.open(
                port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions",
                json: Array(try JSONEncoder().encode(Self.chat("hi", stream: true))))
            _ = try await stream.nextEvent()
            let refused = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hi"))
            #expect(refused.status == .tooManyRequests && refused.headers[.retryAfter] != nil)
            #expect(try await upstream.release() == 1)
            while case .event = try await stream.nextEvent() {}
            await stream.close()
            let after = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hi"))
            #expect(after.status == .ok)
        }
    }

    @Test("The provider's key is sent upstream but never appears in logs or responses, even when the provider refuses it")
    func keyNeverLeaks() async throws {
        let logs = LogCapture(level: .trace)
        let wrongKey = "sk-wrong-key-abcdef0123456789"
        try await Self.with(.sqlite, apiKey: wrongKey, logs: logs) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hi"))
            #expect(response.status == .badGateway)
            #expect(!response.text.contains(wrongKey) && !response.text.contains("abcdef"))
            #expect(try await upstream.stats().unauthorized == 1, "the key reached the provider")
            #expect(try await api.wallet(user).balance == 100)
        }
        #expect(!logs.lines.isEmpty && !logs.lines.contains { $0.text.contains(wrongKey) || $0.text.contains("abcdef") })
        #expect(!AIUpstream(baseURL: "http://x", apiKey: wrongKey).description.contains(wrongKey))
    }

    @Test("Bad requests are 4xx and hold nothing: unknown model, no messages, n > 1, image parts, a float cap")
    func badRequests() async throws {
        try await Self.with(.sqlite) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            let bodies = [
                #"{"model":"nope","messages":[{"role":"user","content":"x"}]}"#, #"{"model":"chat","messages":[]}"#,
                #"{"model":"chat","n":2,"messages":[{"role":"user","content":"x"}]}"#,
                #"{"model":"chat","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]}"#,
                #"{"model":"chat","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}"#, "[]", "{",
            ]
            for body in bodies {
                let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: body)
                #expect((400..<500).contains(response.status.code) && response.text.contains("\"code\""), "\(body): \(response.status) \(response.text)")
            }
            #expect(try await api.allEntries(user).allSatisfy { $0.kind == "grant" })
            #expect(try await upstream.stats().completions == 0)
        }
    }

    @Test("Only the fields a hold accounts for reach the provider, with the server's `user`; a field that could cost more is refused by name", arguments: [false, true])
    func onlyAllowedFieldsForwarded(_ stream: Bool) async throws {
        try await Self.with(.sqlite) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000)
            // Every field the gateway takes, with a value a client may send, and a `user` the client chose.
            let body = """
                {"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":\(stream),"stream_options":{"include_usage":true,"include_obfuscation":false},
                "max_tokens":10,"max_completion_tokens":12,"n":1,"user":"someone@example.com","temperature":0.5,"top_p":0.9,
                "frequency_penalty":0,"presence_penalty":0,"stop":["\\n\\n"],"seed":7,"logprobs":false,"top_logprobs":null,
                "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none",
                "parallel_tool_calls":false,"response_format":{"type":"text"},"functions":null,"function_call":null}
                """
            let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: body)
            #expect(response.status == .ok, "\(response.text)")
            let forwarded = try #require(try await upstream.lastRequest()?.objectValue, "the provider got no request")
            #expect(Set(forwarded.keys.map(\.string)).isSubset(of: ChatRequestFields.all.keys), "\(forwarded.keys.sorted())")
            #expect(forwarded["user"] == .string(user.userId), "the server's user, never the client's: \(String(describing: forwarded["user"]))")
            #expect(forwarded["stream_options"] == (stream ? .object(["include_usage": .bool(true)]) : nil))
            #expect(forwarded["max_completion_tokens"] == .int(10) && forwarded["max_tokens"] == nil && forwarded["model"] == .string("dev"))
            for (field, kind) in ChatRequestFields.all where kind != .gateway {
                #expect(forwarded[field] != nil, "\(field) is taken and forwarded")
            }
            try await upstream.reset()

            // Fields that raise the provider's bill past the hold, or choose who the provider bills for: refused by name.
            let refused = [
                "service_tier": #""priority""#, "modalities": #"["text","audio"]"#, "audio": #"{"voice":"alloy","format":"mp3"}"#,
                "web_search_options": "{}", "prediction": #"{"type":"content","content":"a long predicted text"}"#,
                "reasoning_effort": #""high""#, "logit_bias": #"{"50256":-100}"#, "store": "true", "metadata": #"{"a":"b"}"#,
                "safety_identifier": #""someone""#, "prompt_cache_key": #""k""#, "verbosity": #""high""#, "made_up": "null",
            ]
            for (field, value) in refused {
                let body = #"{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":\#(stream),"\#(field)":\#(value)}"#
                let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: body)
                #expect(response.status == .badRequest && response.errorCode == "invalid_field" && response.text.contains("'\(field)'"), "\(field): \(response.text)")
            }
            let audio = #"{"model":"chat","messages":[{"role":"assistant","content":null,"audio":{"id":"audio_1"}},{"role":"user","content":"hi"}]}"#
            #expect(try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: audio).errorCode == "audio_not_supported")
            #expect(try await upstream.stats().completions == 0, "a refused request never reaches the provider")
            #expect(try await api.allEntries(user).filter { $0.kind == "hold" }.count == 1, "and holds nothing")
            try await api.expectBooksBalance(user)
        }
    }

    @Test("A provider's error that quotes its Authorization header never hands the key on: 400, 422, a stream's error event; nor in the logs")
    func keyRedactedFromForwardedMessages() async throws {
        let logs = LogCapture(level: .trace)
        try await Self.with(.sqlite, logs: logs) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000)
            try await upstream.script([
                DevBehaviour(status: 400, echoAuthorization: true), DevBehaviour(status: 422, echoAuthorization: true),
                DevBehaviour(failAfterChunks: 2, echoAuthorization: true),
            ])
            var forwarded: [String] = []
            for stream in [false, true] {
                let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("hi", stream: stream))
                #expect(response.status == .badRequest, "\(response.text)")
                forwarded.append(response.text)
            }
            let (stream, _) = try await EventStreamClient.open(
                port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions",
                json: Array(try JSONEncoder().encode(Self.chat("hi", stream: true))))
            while try await stream.nextEvent() != .end {}
            forwarded.append(stream.body)
            await stream.close()
            // The provider's message is still passed on, its key taken out.
            #expect(forwarded[0].contains("The dev model was told to fail with 400") && forwarded[0].contains("Bearer [redacted]"), "\(forwarded[0])")
            #expect(forwarded[2].contains("The model failed: The dev model failed mid-stream") && forwarded[2].contains("Bearer [redacted]"), "\(forwarded[2])")
            for text in forwarded {
                #expect(!text.contains(DevLLMTests.key) && !text.contains("0123456789"), "\(text)")
            }
            #expect(try await Self.settled(api, user).held == 0)
            try await api.expectBooksBalance(user)
        }
        #expect(!logs.lines.isEmpty && !logs.lines.contains { $0.text.contains(DevLLMTests.key) })
    }

    @Test("A non-streamed answer over 16 MiB is charged its real usage (read in passing) and answered 502 saying so; a retry under its key gets the same, charged once", arguments: StoreKind.allCases)
    func oversizedAnswerCharged(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000)
            try await upstream.script([DevBehaviour(answerTokens: 5, hugeTokenBytes: 17 << 20)])
            let headers: HTTPFields = [.idempotencyKey: "huge-1"]
            let first = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("A long one"), headers: headers)
            #expect(first.status == .badGateway && first.errorCode == "answer_too_large", "\(first.status) \(first.text.prefix(300))")
            let report = try JSONDecoder.tallyAPI.decode(AICharge.self, from: Data((first.headers[.tallyCharge] ?? "").utf8))
            // The provider's usage: the prompt as it counts it, five words and the huge one.
            let prompt = DevAnswer.promptTokens([ChatMessage(role: "user", content: "A long one")])
            #expect(report.promptTokens == prompt && report.completionTokens == 6, "\(report)")
            #expect(report.charged == Self.model.cost(promptTokens: prompt, completionTokens: 6) && report.charged > 0)
            #expect(first.text.contains("what it generated was charged: \(report.charged) tokens"))
            let again = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, json: Self.chat("A long one"), headers: headers)
            #expect(again.status == .badGateway && again.body == first.body && again.headers[.idempotentReplayed] == "true")
            #expect(again.headers[.tallyCharge] == first.headers[.tallyCharge])
            #expect(try await upstream.stats().completions == 1)
            let captures = try await api.allEntries(user).filter { $0.kind == "capture" }
            #expect(captures.count == 1 && captures[0].reason?.hasSuffix("ai chat prompt=\(prompt) completion=6") == true, "\(captures)")
            #expect(try await api.wallet(user) == report.wallet && report.wallet.balance == 1_000 - report.charged)
            try await api.expectBooksBalance(user)
        }
    }
}

extension JSONDecoder {
    /// The API's dates (RFC 3339).
    static var tallyAPI: JSONDecoder { TallyJSON.decoder() }
}
