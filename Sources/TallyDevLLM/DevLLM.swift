import Foundation
import Hummingbird
import Logging
import NIOCore
import TallyAPI

/// How `tally-dev dev-llm` runs: where it listens, the key it wants, and its pace.
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
    /// How image parts are priced (their tokens added to `usage.prompt_tokens`): OpenAI's tiles by default, within a
    /// provider's limits (500 images a request, 20 MiB each).
    public var images = Self.imageRules["tiles"]!
    /// The largest request body read.
    public var maxBodyBytes = 64 << 20

    /// The image rules `tally-dev dev-llm --image-rule` chooses from: `tiles` (OpenAI's GPT-4o family, ``AIImageRule``'s
    /// default) and `patches` (32-px patches up to 1,536, times 1.62: GPT-4.1-mini's).
    public static let imageRules: [String: AIImageRule] = [
        "tiles": AIImageRule(maxPerRequest: 500, maxBytes: 20 << 20),
        "patches": AIImageRule(
            sizing: .patches(patchSize: 32, maxPatches: 1536, multiplier: 1.62), lowDetailTokens: nil, maxPerRequest: 500, maxBytes: 20 << 20),
    ]

    /// The defaults: loopback, port 8091, no key, no delays, tile-priced images.
    public init() {}
}

/// The local model for development and tests: an OpenAI-compatible `POST /v1/chat/completions` that answers
/// deterministically (``DevAnswer``; image parts measured from their headers, billed by ``DevLLMConfiguration/images``
/// and described), streams real Server-Sent Events chunk by chunk, reports `usage`, and takes
/// a script of failures, stalls and lengths from `POST /dev/script` (``DevBehaviour``). `GET /dev/stats`
/// counts what it was asked; `GET /dev/last-request` is the last request's body as received (what a gateway
/// forwarded); `POST /dev/release` lets paused streams go on; `POST /dev/reset` forgets the script, the counts
/// and the last request.
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
    router.get("dev/last-request") { _, _ -> Response in
        guard let body = state.lastRequest else { return DevJSON.error(.notFound, "no request yet", type: "invalid_request_error") }
        return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
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
        let body = try await request.body.collect(upTo: configuration.maxBodyBytes)
        state.lastRequest = Array(body.readableBytesView)
        let chat: ChatCompletionRequest
        let images: [MeasuredImage]
        do {
            chat = try JSONDecoder().decode(ChatCompletionRequest.self, from: Data(body.readableBytesView))
            images = try DevImages.measure(body.readableBytesView, model: chat.model, rule: configuration.images)
        } catch let refusal as AIContentRefusal {
            return DevImages.error(refusal)
        } catch {
            return DevJSON.error(.badRequest, "We could not parse the JSON body of your request.", type: "invalid_request_error")
        }
        let streaming = chat.stream == true
        let behaviour = state.nextBehaviour(streaming: streaming)
        if behaviour.pauseBeforeHead == true { await state.pause() }
        let quoted = behaviour.echoAuthorization == true ? " Your request's Authorization header: \(request.headers[.authorization] ?? "none")." : ""
        if let status = behaviour.status {
            let type = status >= 500 ? "server_error" : "invalid_request_error"
            return DevJSON.error(HTTPResponse.Status(code: status), "The dev model was told to fail with \(status).\(quoted)", type: type)
        }
        let (words, truncated) = DevAnswer.words(
            for: chat.messages, length: behaviour.answerTokens, limit: chat.completionLimit, preface: DevImages.description(images))
        let huge = behaviour.hugeTokenBytes.map { HugeToken(bytes: $0) }
        let prompt = images.reduce(DevAnswer.promptTokens(chat.messages)) { $0 + $1.tokens }
        let usage = ChatUsage(promptTokens: prompt, completionTokens: words.count + (huge == nil ? 0 : 1))
        let id = "chatcmpl-dev-\(UInt64.random(in: 0...UInt64.max))"
        let created = Int(Date().timeIntervalSince1970)
        let finish = truncated ? "length" : "stop"
        guard streaming else {
            try await Task.sleep(for: configuration.firstTokenDelay + configuration.tokenInterval * max(words.count - 1, 0))
            let content = huge == nil ? words.joined() : (words.first ?? "") + DevStream.TokenEvent.marker + words.dropFirst().joined()
            let answer = ChatCompletion(
                id: id, created: created, model: chat.model,
                choices: [.init(index: 0, message: ChatMessage(role: "assistant", content: content), finishReason: finish)],
                usage: usage)
            guard let huge else { return DevJSON.response(answer) }
            // The marker's place in the encoded answer becomes the huge token, written piece by piece.
            let around = try HugeToken.Around(answer, prefix: [], suffix: [])
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                try await huge.write(around, to: &writer)
                try await writer.finish(nil)
            })
        }
        let stream = DevStream(
            configuration: configuration, state: state, behaviour: behaviour, words: words, usage: usage, finish: finish, huge: huge,
            authorization: request.headers[.authorization],
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
    let huge: HugeToken?
    let authorization: String?
    let includeUsage: Bool
    let chunk: @Sendable ([ChatCompletionChunk.Choice], ChatUsage?) -> ChatCompletionChunk

    /// The connection is cut on purpose (``DevBehaviour/failAfterChunks``).
    struct Cut: Error {}

    func run(_ writer: inout any ResponseBodyWriter, pace: EventLoopExecutor) async throws {
        state.streamOpened()
        defer { state.streamClosed() }
        try await writer.write(event(chunk([.init(index: 0, delta: .init(role: "assistant", content: ""), finishReason: nil)], nil)))
        // Tokens come on a schedule, as a model generates them whoever reads: each `tokenInterval` after the last one
        // was due, not after its write returned (a slower reader would otherwise slow the model down).
        var due = NIODeadline.now() + TimeAmount(configuration.firstTokenDelay)
        try await pace.sleep(until: due)
        let marked = chunk([.init(index: 0, delta: .init(content: TokenEvent.marker), finishReason: nil)], nil)
        let token = try TokenEvent(marked)
        for (index, word) in words.enumerated() {
            if index == behaviour.failAfterChunks { try await fail(&writer) }
            if index == behaviour.pauseAfterChunks {
                await state.pause()
                due = .now()  // the schedule starts again when the model is let go
            }
            if index > 0 {
                due = due + TimeAmount(configuration.tokenInterval)
                try await pace.sleep(until: due)
            }
            try await writer.write(token.event(word))
            state.chunkWritten()
            if index == 0, let huge {
                try await huge.write(try HugeToken.Around(marked, prefix: Array("data: ".utf8), suffix: Array("\n\n".utf8)), to: &writer)
                state.chunkWritten()
            }
        }
        if behaviour.failAfterChunks == words.count { try await fail(&writer) }
        try await writer.write(event(chunk([.init(index: 0, delta: .init(), finishReason: finish)], nil)))
        if includeUsage { try await writer.write(event(chunk([], usage))) }
        try await writer.write(ByteBuffer(string: "data: [DONE]\n\n"))
        try await writer.finish(nil)
    }

    /// Where ``DevBehaviour/failAfterChunks`` says: the connection is cut, or an error event quotes the request's
    /// `Authorization` header (``DevBehaviour/echoAuthorization``) and the stream ends.
    private func fail(_ writer: inout any ResponseBodyWriter) async throws -> Never {
        if behaviour.echoAuthorization == true {
            let error = ChatErrorBody(
                message: "The dev model failed mid-stream. Your request's Authorization header: \(authorization ?? "none").", type: "server_error")
            var buffer = ByteBuffer(string: "data: ")
            buffer.writeBytes(try DevJSON.encoder.encode(error))
            buffer.writeString("\n\n")
            try await writer.write(buffer)
            try await writer.finish(nil)
        }
        throw Cut()
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

/// One token of many bytes (``DevBehaviour/hugeTokenBytes``): `x`s written in 64 KiB pieces inside an encoded
/// chunk or answer, in place of ``DevStream/TokenEvent/marker``.
struct HugeToken: Sendable {
    let bytes: Int

    /// An encoded value split at the marker (inside a JSON string: the `x`s need no escaping).
    struct Around {
        let head: [UInt8]
        let tail: [UInt8]

        init(_ value: some Encodable, prefix: [UInt8], suffix: [UInt8]) throws {
            let encoded = Array(try DevJSON.encoder.encode(value))
            let marker = Array(DevStream.TokenEvent.marker.utf8)
            guard let at = encoded.indices.first(where: { encoded[$0...].starts(with: marker) }) else { throw DevStream.TokenEvent.NoMarker() }
            head = prefix + encoded[..<at]
            tail = Array(encoded[(at + marker.count)...]) + suffix
        }
    }

    func write(_ around: Around, to writer: inout any ResponseBodyWriter) async throws {
        try await writer.write(ByteBuffer(bytes: around.head))
        let piece = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 << 10)
        var left = bytes
        while left > 0 {
            try await writer.write(left >= piece.readableBytes ? piece : piece.getSlice(at: 0, length: left)!)
            left -= piece.readableBytes
        }
        try await writer.write(ByteBuffer(bytes: around.tail))
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
