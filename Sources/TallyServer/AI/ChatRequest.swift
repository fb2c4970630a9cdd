import Foundation
import Hummingbird
@_spi(Gateway) import TallyAPI
import TallyStore

/// A client's Chat Completions request, checked, bounded and rewritten for the upstream: a pure function of the
/// body and the configuration (``parse(_:user:configuration:)``), so every rule of what a call may cost is tested
/// without a network.
struct ChatRequest: Sendable {
    /// The gateway model asked for.
    let model: AIModelSpec
    /// Whether the answer streams.
    let stream: Bool
    /// Whether the client asked for the usage chunk of a stream (the gateway always asks the upstream for it).
    let clientWantsUsage: Bool
    /// The most completion tokens the upstream may generate: the request's cap within the model's.
    let completionLimit: Int
    /// The prompt measured (``AIPricing/measure(request:model:)``): its text's byte bound (``PromptBound``, the
    /// image parts left out) and each image's tokens at the model's rule.
    let measure: PromptMeasure
    /// What the prompt estimate of a call without usage describes: the text's features (never an image's base64).
    let textFeatures: PromptEstimator.Features
    /// The body sent upstream (made where the body is parsed: for a large one, off the cooperative threads), its
    /// `messages` the client's bytes as sent.
    let upstreamBody: UpstreamBody
    /// The client's body as sent.
    let body: ByteBuffer
    /// The body's bytes in this process's ``RequestBodyBudget``: given back when the last copy of this request goes
    /// (the call's end), since until then its bytes live on here and in the upstream request.
    private(set) var reservation: RequestBodyBudget.Reservation?
    /// When the body had been read whole: where the gateway's own time (``GatewayTiming``) starts.
    private(set) var bodyRead = ContinuousClock.now

    /// A true upper bound on the prompt's tokens: the text's bound plus every image's tokens.
    var promptBound: Int { measure.tokens }

    /// The client's body in canonical form, for the `Idempotency-Key` fingerprint (non-streamed calls only): parsed
    /// again whole, since the request's own reading left its images in the bytes (``JSONObjectText``).
    var canonicalBody: [UInt8] { ((try? JSONValue.parse(body.readableBytesView)) ?? .null).bytes }

    /// The most the call can cost: what is held before the upstream is called.
    var maxCost: Int64 { model.cost(promptTokens: promptBound, completionTokens: completionLimit) }

    /// Reads `request`'s body, whose bytes `reservation` holds in the gateway's ``RequestBodyBudget`` (413 beyond
    /// `ai.maxRequestBytes`), and parses it for `user`.
    static func read(
        _ request: Request, reservation: RequestBodyBudget.Reservation, user: String, ai: AIGateway
    ) async throws -> ChatRequest {
        let buffer = try await RequestBody.collect(request, upTo: ai.bodies.maxBodyBytes)
        let bodyRead = ContinuousClock.now
        reservation.keep(buffer.readableBytes)
        let configuration = ai.configuration
        @Sendable func parsed() throws(APIError) -> ChatRequest { try parse(buffer, user: user, configuration: configuration) }
        // A body with images (megabytes: milliseconds to read, check and write again) is handled on the gateway's
        // low-priority threads, so that the cooperative threads and the event loops keep answering everyone else;
        // one of a photo's size at a time here (``BulkWork/run(bytes:_:)``).
        let size = buffer.readableBytes
        var chat = size > Self.offloadedBodyBytes ? try await ai.bulk.run(bytes: size) { try parsed() } : try parsed()
        chat.reservation = reservation
        chat.bodyRead = bodyRead
        return chat
    }

    /// Bodies larger than this are parsed through ``BulkWork`` (on its threads unless one of a photo's size, alone).
    static let offloadedBodyBytes = 256 * 1024

    /// Checks the JSON `bytes` against the configuration and builds the upstream request of `user` (a Tally user id,
    /// sent upstream as `user` for the provider's abuse monitoring). Every content part is checked and measured by
    /// ``AIPricing/measure(request:model:)`` — the function an app estimates with —, whose refusals answer 400 with
    /// their codes; the messages reach the upstream as sent, byte for byte. An image's `data:` URL is measured where
    /// it lies in `bytes` (``JSONObjectText``), never copied into a string.
    static func parse(_ bytes: ByteBuffer, user: String, configuration: AIConfiguration) throws(APIError) -> ChatRequest {
        // Read again whole only when a `data:` URL is not an image's (written as text, say): its stand-in would be
        // counted, not its text.
        if let request = try parse(bytes, user: user, configuration: configuration, leavingDataURLs: true) { return request }
        // Read whole, no stand-in is left to miss: never nil.
        guard let request = try parse(bytes, user: user, configuration: configuration, leavingDataURLs: false) else {
            throw APIError(.invalidImage, "The request's images could not be measured.")
        }
        return request
    }

    private static func parse(
        _ bytes: ByteBuffer, user: String, configuration: AIConfiguration, leavingDataURLs: Bool
    ) throws(APIError) -> ChatRequest? {
        let text: JSONObjectText
        switch bytes.withContiguousBytes({ bytes in Result { () throws(JSONParseError) in try JSONObjectText(bytes, leavingDataURLs: leavingDataURLs) } }) {
        case .success(let parsed): text = parsed
        case .failure(let error): throw APIError(.invalidJSON, "The body is not valid JSON: \(error.description).")
        }
        guard var object = text.value.objectValue else { throw APIError(.invalidJSON, "The body must be a JSON object.") }
        // Only fields a hold accounts for reach the provider (ChatRequestFields): a clear refusal, not a silent drop,
        // since a field a client sends changes what it gets.
        if let field = object.keys.filter({ ChatRequestFields.all[$0.string] == nil }).min() {
            throw APIError(
                .invalidField,
                "The gateway does not take '\(field.string.prefix(64))': only fields whose cost a hold bounds are forwarded ("
                    + ChatRequestFields.all.keys.sorted().joined(separator: ", ") + ").")
        }
        guard case .string(let name)? = object["model"] else { throw APIError(.invalidField, "'model' must be a string.") }
        guard let model = configuration.model(named: name) else {
            throw APIError(
                .unknownModel, "No model named '\(name.prefix(128))' (models: \(configuration.models.map(\.name).joined(separator: ", "))).")
        }
        guard case .array(let messages)? = object["messages"], !messages.isEmpty, messages.count <= 4_096,
            let messagesText = text.members["messages"]
        else {
            throw APIError(.invalidField, "'messages' must be a non-empty array (at most 4096).")
        }
        for message in messages {
            guard let fields = message.objectValue, case .string? = fields["role"] else {
                throw APIError(.invalidField, "Each message must be an object with a string 'role'.")
            }
            if let audio = fields["audio"], audio != .null {
                throw APIError(
                    .audioNotSupported, "A message's 'audio' is not supported: audio is billed by its length, which a hold cannot bound.")
            }
            switch fields["content"] {
            case .string?, .null?, nil, .array?: break
            default: throw APIError(.invalidField, "A message's 'content' must be a string, an array of content parts or null.")
            }
        }
        let stream = try flag(object["stream"], "stream") ?? false
        let streamOptions = object["stream_options"]?.objectValue ?? [:]
        if object["stream_options"] != nil, object["stream_options"]?.objectValue == nil {
            throw APIError(.invalidField, "'stream_options' must be an object.")
        }
        let clientWantsUsage = try flag(streamOptions["include_usage"], "stream_options.include_usage") ?? false
        if let n = object["n"], n != .int(1), n != .null {
            throw APIError(.invalidField, "'n' must be 1: the gateway holds and charges one answer per call.")
        }
        let requested = try [cap(object["max_tokens"], "max_tokens"), cap(object["max_completion_tokens"], "max_completion_tokens")]
            .compactMap { $0 }.min()
        let limit = model.completionLimit(requested: requested)
        // Every byte of each message's text (role, name, text, tool calls, JSON punctuation) bounds its tokens; each
        // image costs what the model's rule says of its pixel size. A refusal names what is wrong; nothing is held.
        let measured = bytes.withContiguousBytes { bytes in
            Result { () throws(AIContentRefusal) in
                try AIPricing.measure(request: object, dataURLs: text.dataURLs, in: bytes, model: model)
            }
        }
        let measure: PromptMeasure
        switch measured {
        case .success(let found?): measure = found
        case .success(nil): return nil
        case .failure(let error): throw APIError(error.code, error.message)
        }

        let textFeatures = PromptEstimator.Features(request: object, bound: measure.textTokens)
        object["model"] = .string(model.upstreamModel)
        object["max_tokens"] = nil
        object["max_completion_tokens"] = nil
        object[configuration.upstream.capField.rawValue] = .int(limit)
        // The stream's options are the gateway's: the usage (the charge), nothing else; without a stream, none.
        object["stream_options"] = stream ? .object(["include_usage": .bool(true)]) : nil
        object["user"] = .string(user)
        let request = ChatRequest(
            model: model, stream: stream, clientWantsUsage: clientWantsUsage, completionLimit: limit, measure: measure,
            textFeatures: textFeatures,
            upstreamBody: upstreamBody(object, messages: bytes.getSlice(at: bytes.readerIndex + messagesText.lowerBound, length: messagesText.count)!),
            body: bytes)
        guard request.maxCost <= Limits.maxAmount else { throw APIError(.invalidField, "The request is too large to hold for.") }
        return request
    }

    /// `object` (the upstream's fields) with its `messages` the client's own bytes (a slice of the body, no copy).
    private static func upstreamBody(_ object: [JSONKey: JSONValue], messages: ByteBuffer) -> UpstreamBody {
        var rest = object
        rest["messages"] = nil
        // `rest` holds at least `model` and `user`: `{…}` opens with a member to follow the messages.
        var tail = JSONValue.object(rest).bytes
        tail[0] = UInt8(ascii: ",")
        return UpstreamBody(parts: [ByteBuffer(string: #"{"messages":"#), messages, ByteBuffer(bytes: tail)])
    }

    private static func flag(_ value: JSONValue?, _ field: String) throws(APIError) -> Bool? {
        switch value {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw APIError(.invalidField, "'\(field)' must be a boolean.")
        }
    }

    private static func cap(_ value: JSONValue?, _ field: String) throws(APIError) -> Int? {
        switch value {
        case nil, .null?: return nil
        case .number(let literal)?:
            guard let cap = Int(literal), cap >= 1 else { throw APIError(.invalidField, "'\(field)' must be a positive integer.") }
            return cap
        default: throw APIError(.invalidField, "'\(field)' must be a positive integer.")
        }
    }
}

/// What a finished call is charged: the upstream's `usage` when it came, else the prompt as estimated
/// (``PromptEstimator``; its byte bound when no estimate is given) and the content chunks generated (a missing usage is
/// never taken as zero); never more than was held.
struct ChatCharge: Sendable, Hashable {
    /// Prompt tokens charged.
    var promptTokens: Int
    /// Completion tokens charged.
    var completionTokens: Int
    /// Wallet tokens.
    var amount: Int64
    /// Whether the counts are the provider's.
    var fromUsage: Bool

    /// The charge of `request` given the upstream's usage, if any, and the content chunks relayed; without usage the
    /// prompt is `estimatedPrompt` (within the bound, and never below the images' tokens, which are known exactly),
    /// else the bound.
    static func of(_ request: ChatRequest, usage: ChatUsage?, chunks: Int, estimatedPrompt: Int? = nil) -> ChatCharge {
        let estimated = max(min(estimatedPrompt ?? request.promptBound, request.promptBound), request.measure.imageTokens)
        let (prompt, completion, fromUsage) = usage.map { ($0.promptTokens, $0.completionTokens, true) }
            ?? (estimated, min(chunks, request.completionLimit), false)
        let amount = min(request.model.cost(promptTokens: prompt, completionTokens: completion), request.maxCost)
        return ChatCharge(promptTokens: prompt, completionTokens: completion, amount: amount, fromUsage: fromUsage)
    }
}

extension ByteBuffer {
    /// `body` of the readable bytes, where they lie (a buffer's storage is contiguous).
    fileprivate func withContiguousBytes<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        withUnsafeReadableBytes { body($0.assumingMemoryBound(to: UInt8.self)) }
    }
}
