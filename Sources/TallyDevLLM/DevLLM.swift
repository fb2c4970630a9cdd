import Foundation
import Hummingbird
import Logging
import NIOCore
import TallyAPI

/// How `tally dev-llm` runs: where it listens, the key it wants, and its pace.
public struct DevLLMConfiguration: Sendable {
    /// Address to bind.
    public var host = "127.0.0.1"
    /// Port to bind (0: a free one).
    public var port = 8091
    /// The bearer key every completion request must carry; nil accepts any (or none).
    public var apiKey: String?
    /// The wait before the first token (a model's time to first token).
    public var firstTokenDelay: Duration = .zero
    /// The wait between tokens.
    public var tokenInterval: Duration = .zero

    /// The defaults: loopback, port 8091, no key, no delays.
    public init() {}
}

/// The local model for development and tests: an OpenAI-compatible `POST /v1/chat/completions` that answers
/// deterministically (``DevAnswer``), streams real Server-Sent Events chunk by chunk, reports `usage`, and takes
/// a script of failures, stalls and lengths from `POST /dev/script` (``DevBehaviour``). `GET /dev/stats`
/// counts what it was asked; `POST /dev/release` lets paused streams go on; `POST /dev/reset` forgets both.
/// It is a stand-in for a provider Tally cannot reach here, never part of the server.
public func buildDevLLM(
    configuration: DevLLMConfiguration, logger: Logger, onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let state = DevState()
    let router = Router(context: DevRequestContext.self)
    let completions = DevCompletions(configuration: configuration, state: state)
    router.post("v1/chat/completions", use: completions.respond)
    router.get("v1/models") { _, _ in DevJSON.response(DevModels()) }
    router.get("health") { _, _ in HTTPResponse.Status.ok }
    router.get("dev/stats") { _, _ in DevJSON.response(state.stats) }
    router.post("dev/reset") { _, _ in
        state.reset()
        return HTTPResponse.Status.noContent
    }
    router.post("dev/release") { _, _ in DevJSON.response(["released": state.releaseAll()]) }
    router.post("dev/script") { request, context -> Response in
        let body = try await request.body.collect(upTo: 1 << 20)
        guard let script = try? JSONDecoder().decode(DevScriptRequest.self, from: Data(body.readableBytesView)) else {
            return DevJSON.error(.badRequest, "the body must be {\"behaviours\": [...]}", type: "invalid_request_error")
        }
        state.append(script.behaviours)
        return Response(status: .noContent)
    }
    return Application(
        router: router, configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "tally-dev-llm"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) }, logger: logger)
}

/// `POST /v1/chat/completions`.
struct DevCompletions: Sendable {
    let configuration: DevLLMConfiguration
    let state: DevState

    @Sendable func respond(_ request: Request, context: DevRequestContext) async throws -> Response {
        if let key = configuration.apiKey, request.headers[.authorization] != "Bearer \(key)" {
            state.unauthorized()
            return DevJSON.error(.unauthorized, "Incorrect API key provided.", type: "invalid_request_error", code: "invalid_api_key")
        }
        let body = try await request.body.collect(upTo: 4 << 20)
        let chat: ChatCompletionRequest
        do {
            chat = try JSONDecoder().decode(ChatCompletionRequest.self, from: Data(body.readableBytesView))
        } catch {
            return DevJSON.error(.badRequest, "We could not parse the JSON body of your request.", type: "invalid_request_error")
        }
        let streaming = chat.stream == true
        let behaviour = state.nextBehaviour(streaming: streaming)
        if behaviour.pauseBeforeHead == true { await state.pause() }
        if let status = behaviour.status {
            let type = status >= 500 ? "server_error" : "invalid_request_error"
            return DevJSON.error(HTTPResponse.Status(code: status), "The dev model was told to fail with \(status).", type: type)
        }
        let (words, truncated) = DevAnswer.words(for: chat.messages, length: behaviour.answerTokens, limit: chat.completionLimit)
        let usage = ChatUsage(promptTokens: DevAnswer.promptTokens(chat.messages), completionTokens: words.count)
        let id = "chatcmpl-dev-\(UInt64.random(in: 0...UInt64.max))"
        let created = Int(Date().timeIntervalSince1970)
        let finish = truncated ? "length" : "stop"
        guard streaming else {
            try await Task.sleep(for: configuration.firstTokenDelay + configuration.tokenInterval * max(words.count - 1, 0))
            let answer = ChatCompletion(
                id: id, created: created, model: chat.model,
                choices: [.init(index: 0, message: ChatMessage(role: "assistant", content: words.joined()), finishReason: finish)],
                usage: usage)
            return DevJSON.response(answer)
        }
        let stream = DevStream(
            configuration: configuration, state: state, behaviour: behaviour, words: words, usage: usage, finish: finish,
            includeUsage: chat.streamOptions?.includeUsage == true, chunk: { choices, usage in
                ChatCompletionChunk(id: id, created: created, model: chat.model, choices: choices, usage: usage)
            })
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        let executor = EventLoopExecutor(context.eventLoop)
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            try await withTaskExecutorPreference(executor) { try await stream.run(&writer, pace: executor) }
        })
    }
}

/// Hummingbird's basic context, plus the event loop of the request's connection.
struct DevRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let eventLoop: any EventLoop

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        eventLoop = source.channel.eventLoop
    }
}

/// One streamed answer: a role chunk, one chunk per token (paced, paused or cut as scripted), the finishing
/// chunk, the usage chunk when asked for, then `[DONE]`.
struct DevStream: Sendable {
    let configuration: DevLLMConfiguration
    let state: DevState
    let behaviour: DevBehaviour
    let words: [String]
    let usage: ChatUsage
    let finish: String
    let includeUsage: Bool
    let chunk: @Sendable ([ChatCompletionChunk.Choice], ChatUsage?) -> ChatCompletionChunk

    /// The connection is cut on purpose (``DevBehaviour/failAfterChunks``).
    struct Cut: Error {}

    func run(_ writer: inout any ResponseBodyWriter, pace: EventLoopExecutor) async throws {
        state.streamOpened()
        defer { state.streamClosed() }
        try await writer.write(event(chunk([.init(index: 0, delta: .init(role: "assistant", content: ""), finishReason: nil)], nil)))
        try await pace.sleep(for: configuration.firstTokenDelay)
        let token = try TokenEvent(chunk([.init(index: 0, delta: .init(content: TokenEvent.marker), finishReason: nil)], nil))
        for (index, word) in words.enumerated() {
            if index == behaviour.failAfterChunks { throw Cut() }
            if index == behaviour.pauseAfterChunks { await state.pause() }
            if index > 0 { try await pace.sleep(for: configuration.tokenInterval) }
            try await writer.write(token.event(word))
            state.chunkWritten()
        }
        if behaviour.failAfterChunks == words.count { throw Cut() }
        try await writer.write(event(chunk([.init(index: 0, delta: .init(), finishReason: finish)], nil)))
        if includeUsage { try await writer.write(event(chunk([], usage))) }
        try await writer.write(ByteBuffer(string: "data: [DONE]\n\n"))
        try await writer.finish(nil)
    }

    private func event(_ chunk: ChatCompletionChunk) throws -> ByteBuffer {
        var buffer = ByteBuffer(string: "data: ")
        buffer.writeBytes(try DevJSON.encoder.encode(chunk))
        buffer.writeString("\n\n")
        return buffer
    }

    /// A token's event, encoded once per stream around the token's text: JSONEncoder for every token was most
    /// of the stand-in's CPU, which it shares with the gateway it stands in front of in `scripts/bench-ai`.
    struct TokenEvent {
        /// Stands for the token in the encoded chunk.
        static let marker = "tally-dev-llm-token-marker"
        private let head: [UInt8]
        private let tail: [UInt8]

        /// The encoder wrote the marker otherwise than expected.
        struct NoMarker: Error {}

        init(_ chunk: ChatCompletionChunk) throws {
            let encoded = Array(try DevJSON.encoder.encode(chunk))
            var quoted: [UInt8] = []
            JSONValue.writeString(Self.marker, to: &quoted)
            guard let at = encoded.indices.first(where: { encoded[$0...].starts(with: quoted) }) else { throw NoMarker() }
            head = Array("data: ".utf8) + encoded[..<at]
            tail = Array(encoded[(at + quoted.count)...]) + Array("\n\n".utf8)
        }

        /// The event carrying `text`.
        func event(_ text: String) -> ByteBuffer {
            var bytes = head
            JSONValue.writeString(text, to: &bytes)
            bytes += tail
            return ByteBuffer(bytes: bytes)
        }
    }
}

/// `GET /v1/models`: the one model, whatever name a request gives.
struct DevModels: Encodable {
    struct Model: Encodable {
        var id = "dev"
        var object = "model"
        var owned_by = "tally-dev-llm"
    }

    var object = "list"
    var data = [Model()]
}

/// JSON answers of the local model.
enum DevJSON {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        let bytes = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String, type: String, code: String? = nil) -> Response {
        response(ChatErrorBody(message: message, type: type, code: code), status: status)
    }
}
