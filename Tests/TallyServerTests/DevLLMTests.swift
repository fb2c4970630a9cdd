import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import ServiceLifecycle
import TallyAPI
import TallyDevLLM
import TallyLoad
import TallyStore
import TallyTestSupport
import Testing

/// `tally-dev dev-llm`, the local model the AI gateway's tests and a developer's setup call: OpenAI's wire format,
/// deterministic answers, real streaming, `usage`, and the scripted failures the gateway must survive.
@Suite("Local model (tally-dev dev-llm)", .timeLimit(.minutes(1)))
struct DevLLMTests {
    static let key = "sk-dev-test-0123456789"

    /// Runs `body` with an in-process local model on a free port that wants ``key``, writing a token every `tokenInterval`.
    static func with<T: Sendable>(
        tokenInterval: Duration = .zero, _ body: @Sendable (DevLLMClient) async throws -> T
    ) async throws -> T {
        try await LocalModel.with(apiKey: key, tokenInterval: tokenInterval) { port in try await body(DevLLMClient(port: port)) }
    }

    static func request(_ text: String, stream: Bool = false, usage: Bool = false, maxTokens: Int? = nil) -> ChatCompletionRequest {
        ChatCompletionRequest(
            model: "dev", messages: [ChatMessage(role: "user", content: text)], stream: stream ? true : nil,
            streamOptions: usage ? ChatStreamOptions(includeUsage: true) : nil, maxTokens: maxTokens)
    }

    @Test("A non-streamed answer is OpenAI's shape, the same for the same prompt, with usage that counts it")
    func deterministicAnswer() async throws {
        try await Self.with { model in
            let first = try await model.complete(Self.request("What do the stars say?"))
            let second = try await model.complete(Self.request("What do the stars say?"))
            #expect(first.status == 200)
            let answer = try JSONDecoder().decode(ChatCompletion.self, from: first.body)
            let again = try JSONDecoder().decode(ChatCompletion.self, from: second.body)
            let text = try #require(answer.choices.first?.message.content)
            #expect(answer.object == "chat.completion" && answer.choices.first?.message.role == "assistant")
            #expect(text == again.choices.first?.message.content && !text.isEmpty)
            let usage = try #require(answer.usage)
            #expect(usage.completionTokens == text.split(separator: " ").count && (20...59).contains(usage.completionTokens))
            #expect(usage.promptTokens == DevAnswer.promptTokens([ChatMessage(role: "user", content: "What do the stars say?")]))
            #expect(usage.totalTokens == usage.promptTokens + usage.completionTokens)
            let other = try JSONDecoder().decode(ChatCompletion.self, from: try await model.complete(Self.request("Something else")).body)
            #expect(other.choices.first?.message.content != text)
        }
    }

    @Test("The local model never bills more prompt tokens than the gateway's bound holds for, whatever the script")
    func promptCountWithinTheBound() {
        var generator = SplitMix64(seed: 2_111)
        let pieces = ["a", "Z", "7", " ", "\n", "é", "今", "日", "😀", "ß", "ab", "word", "、", "\u{0301}"]
        for _ in 0..<500 {
            let messages = (0..<Int(generator.next() % 5)).map { _ in
                ChatMessage(
                    role: ["system", "user", "assistant"][Int(generator.next() % 3)],
                    content: (0..<Int(generator.next() % 200)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined())
            }
            let bound = PromptBound.tokens(messageBytes: messages.map { $0.role.utf8.count + $0.content.utf8.count })
            #expect(DevAnswer.promptTokens(messages) <= bound, "\(messages)")
        }
    }

    @Test("The local model counts about as GPT-4's tokenizer: a token per 8 letters, 3 digits or 2 symbols of a run, per other scalar; spaces free")
    func countRule() {
        #expect(DevAnswer.count(text: "Tell me about the stars") == 5)
        #expect(DevAnswer.count(text: "internationalization") == 3)
        #expect(DevAnswer.count(text: "1234567") == 3)
        #expect(DevAnswer.count(text: "x += 10;") == 4)
        #expect(DevAnswer.count(text: "今日は晴れ") == 5)
        #expect(DevAnswer.count(text: "café au lait") == 4)
        #expect(DevAnswer.count(text: " \n\t\u{3000}") == 0)
        #expect(DevAnswer.promptTokens([ChatMessage(role: "user", content: "Hello there")]) == 7)
    }

    @Test("max_tokens cuts the answer and says so (finish_reason length)")
    func maxTokens() async throws {
        try await Self.with { model in
            let answer = try JSONDecoder().decode(ChatCompletion.self, from: try await model.complete(Self.request("Tell me", maxTokens: 3)).body)
            #expect(answer.usage?.completionTokens == 3 && answer.choices.first?.finishReason == "length")
        }
    }

    @Test("Without the key, or with another, the answer is 401 in OpenAI's error shape and counted")
    func keyRequired() async throws {
        try await Self.with { model in
            for key in [nil, "sk-wrong"] {
                let refused = try await model.complete(Self.request("hi"), key: key)
                #expect(refused.status == 401)
                #expect(try JSONDecoder().decode(ChatErrorBody.self, from: refused.body).error.code == "invalid_api_key")
            }
            let stats = try await model.stats()
            #expect(stats.unauthorized == 2 && stats.completions == 0)
        }
    }

    @Test("A stream is sent chunk by chunk: paused after three, the client already has those three and nothing after")
    func streamsChunkByChunk() async throws {
        try await Self.with { model in
            try await model.script([DevBehaviour(pauseAfterChunks: 3, answerTokens: 10)])
            let stream = try await model.stream(Self.request("hello", stream: true, usage: true))
            var contents: [String] = []
            var usage: ChatUsage?
            var done = false
            var released = false
            while !done {
                let item = try await stream.nextEvent()
                guard case .event(_, _, let data) = item else { Issue.record("stream ended early: \(item)"); return }
                if data == "[DONE]" { done = true; continue }
                let chunk = try JSONDecoder().decode(ChatCompletionChunk.self, from: Data(data.utf8))
                if let text = chunk.choices.first?.delta.content, !text.isEmpty { contents.append(text) }
                if chunk.usage != nil { usage = chunk.usage }
                if contents.count == 3, usage == nil, !released {
                    // The model stalls after three chunks and the client already has them: each was sent as it came.
                    var stats = try await model.stats()
                    for _ in 0..<500 where stats.pausedStreams == 0 {
                        try await Task.sleep(for: .milliseconds(10))
                        stats = try await model.stats()
                    }
                    #expect(stats.pausedStreams == 1 && stats.contentChunks == 3, "\(stats)")
                    #expect(try await model.release() == 1)
                    released = true
                }
            }
            await stream.close()
            #expect(contents.count == 10)
            #expect(usage?.completionTokens == 10)
            #expect(try await model.stats().contentChunks == 10)
        }
    }

    @Test("Without include_usage a stream has no usage chunk; the finishing chunk says stop, then [DONE]")
    func noUsageUnlessAsked() async throws {
        try await Self.with { model in
            try await model.script([DevBehaviour(answerTokens: 4)])
            let stream = try await model.stream(Self.request("hello", stream: true))
            var events: [String] = []
            while case .event(_, _, let data) = try await stream.nextEvent() { events.append(data) }
            #expect(events.last == "[DONE]")
            let chunks = try events.dropLast().map { try JSONDecoder().decode(ChatCompletionChunk.self, from: Data($0.utf8)) }
            #expect(chunks.allSatisfy { $0.usage == nil } && chunks.count == 6)  // role, 4 tokens, finish
            #expect(chunks.last?.choices.first?.finishReason == "stop")
        }
    }

    @Test("Scripted failures: a status before any chunk, and a stream cut after two chunks with no [DONE]")
    func scriptedFailures() async throws {
        try await Self.with { model in
            try await model.script([DevBehaviour(status: 500), DevBehaviour(failAfterChunks: 2, answerTokens: 10)])
            let failed = try await model.complete(Self.request("x"))
            #expect(failed.status == 500)
            #expect(try JSONDecoder().decode(ChatErrorBody.self, from: failed.body).error.type == "server_error")
            let stream = try await model.stream(Self.request("x", stream: true, usage: true))
            var items: [EventStreamClient.Item] = []
            while true {
                let item = try await stream.nextEvent()
                items.append(item)
                if item == .end { break }
            }
            let data = items.compactMap { if case .event(_, _, let data) = $0 { data } else { nil } }
            #expect(data.count == 3 && !data.contains("[DONE]"), "\(items)")  // the role chunk and two tokens, then the cut
            #expect(try await model.stats().completions == 2)
        }
    }

    @Test("Scripted misbehaviour: a huge token (one long line in a stream, a long body otherwise), an error that quotes the Authorization header; the last request as received")
    func misbehaviour() async throws {
        try await Self.with { model in
            try await model.script([
                DevBehaviour(answerTokens: 3, hugeTokenBytes: 200_000), DevBehaviour(answerTokens: 3, hugeTokenBytes: 200_000),
                DevBehaviour(status: 400, echoAuthorization: true), DevBehaviour(failAfterChunks: 1, echoAuthorization: true),
            ])
            let whole = try JSONDecoder().decode(ChatCompletion.self, from: try await model.complete(Self.request("big")).body)
            let content = try #require(whole.choices.first?.message.content)
            #expect(content.utf8.count > 200_000 && content.contains(String(repeating: "x", count: 200_000)) && whole.usage?.completionTokens == 4)
            let stream = try await model.stream(Self.request("big", stream: true))
            var lines: [Int] = []
            while case .event(_, _, let data) = try await stream.nextEvent() { lines.append(data.utf8.count) }
            await stream.close()
            #expect(lines.count == 7 && lines[2] > 200_000, "role, a word, the huge token, two words, finish, [DONE]: \(lines)")
            let refused = try await model.complete(Self.request("x"))
            #expect(refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains("Bearer \(Self.key)"))
            let failing = try await model.stream(Self.request("x", stream: true))
            var data: [String] = []
            while case .event(_, _, let text) = try await failing.nextEvent() { data.append(text) }
            await failing.close()
            #expect(data.count == 3 && data[2].contains("\"error\"") && data[2].contains("Bearer \(Self.key)"), "\(data)")
            let last = try #require(try await model.lastRequest())
            #expect(last["stream"] == .bool(true) && String(decoding: last.bytes, as: UTF8.self).contains(#"{"content":"x","role":"user"}"#))
            try await model.reset()
            #expect(try await model.lastRequest() == nil)
        }
    }

    @Test("tally-dev dev-llm runs as its own process and answers with the key from the environment variable it names")
    func asAProcess() async throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("dev-llm-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: output) }
        var environment = ProcessInfo.processInfo.environment
        environment["DEV_LLM_TEST_KEY"] = Self.key
        let process = try ChildProcess(
            TallyBinary.devPath, arguments: ["dev-llm", "--port", "0", "--api-key-env", "DEV_LLM_TEST_KEY"], environment: environment,
            standardOutput: .file(output))
        defer { process.terminate() }
        // It prints where it listens once it does.
        var port: Int?
        for _ in 0..<200 where port == nil {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            port = text.split(separator: "\n").first { $0.hasPrefix("tally dev-llm listening on http://127.0.0.1:") }
                .flatMap { Int($0.split(separator: ":").last?.split(separator: "/").first ?? "") }
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let model = DevLLMClient(port: try #require(port, "tally-dev dev-llm never said where it listens"))
        #expect(try await model.complete(Self.request("hello")).status == 200)
        #expect(try await model.complete(Self.request("hello"), key: nil).status == 401)
    }
}

/// Calls a local model over loopback, as a gateway or an SDK would.
struct DevLLMClient: Sendable {
    let port: Int

    struct Answer: Sendable {
        let status: Int
        let body: Data
    }

    private func send(_ method: String, _ path: String, body: Data?, key: String?) async throws -> Answer {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return Answer(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: data)
    }

    /// `POST /v1/chat/completions` (not streamed), with `key` as the bearer.
    func complete(_ chat: ChatCompletionRequest, key: String? = DevLLMTests.key) async throws -> Answer {
        try await send("POST", "/v1/chat/completions", body: try JSONEncoder().encode(chat), key: key)
    }

    /// A streamed `POST /v1/chat/completions`, read event by event as it arrives.
    func stream(_ chat: ChatCompletionRequest) async throws -> EventStreamClient {
        let (stream, head) = try await EventStreamClient.open(
            port: port, token: DevLLMTests.key, path: "/v1/chat/completions", json: Array(try JSONEncoder().encode(chat)))
        guard head.status == 200, head.header("content-type") == "text/event-stream" else {
            throw HarnessError("stream answered \(head.status)")
        }
        return stream
    }

    func script(_ behaviours: [DevBehaviour]) async throws {
        let answer = try await send("POST", "/dev/script", body: try JSONEncoder().encode(DevScriptRequest(behaviours: behaviours)), key: nil)
        guard answer.status == 204 else { throw HarnessError("script answered \(answer.status)") }
    }

    func stats() async throws -> DevStats {
        try JSONDecoder().decode(DevStats.self, from: try await send("GET", "/dev/stats", body: nil, key: nil).body)
    }

    /// Lets paused streams go on; how many there were.
    func release() async throws -> Int {
        let body = try await send("POST", "/dev/release", body: nil, key: nil).body
        return try JSONDecoder().decode([String: Int].self, from: body)["released"] ?? -1
    }

    /// The body of the last completion request the model received (what the gateway forwarded), if any.
    func lastRequest() async throws -> JSONValue? {
        let answer = try await send("GET", "/dev/last-request", body: nil, key: nil)
        return answer.status == 200 ? try JSONValue.parse(Array(answer.body)) : nil
    }

    /// Forgets the script, the counts and the last request.
    func reset() async throws {
        _ = try await send("POST", "/dev/reset", body: nil, key: nil)
    }
}
