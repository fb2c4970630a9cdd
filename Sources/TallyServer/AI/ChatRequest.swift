import Foundation
import TallyAPI
import TallyStore

/// A client's Chat Completions request, checked, bounded and rewritten for the upstream: a pure function of the
/// body and the configuration, so every rule of what a call may cost is tested without a network.
struct ChatRequest: Sendable {
    /// The gateway model asked for.
    let model: AIModelSpec
    /// Whether the answer streams.
    let stream: Bool
    /// Whether the client asked for the usage chunk of a stream (the gateway always asks the upstream for it).
    let clientWantsUsage: Bool
    /// The most completion tokens the upstream may generate: the request's cap within the model's.
    let completionLimit: Int
    /// A true upper bound on the prompt's tokens (``PromptBound``).
    let promptBound: Int
    /// The body sent upstream.
    let upstreamBody: [UInt8]
    /// The client's body as sent.
    let clientBody: [JSONKey: JSONValue]

    /// The client's body in canonical form, for the `Idempotency-Key` fingerprint (non-streamed calls only).
    var canonicalBody: [UInt8] { JSONValue.object(clientBody).bytes }

    /// The most the call can cost: what is held before the upstream is called.
    var maxCost: Int64 { model.cost(promptTokens: promptBound, completionTokens: completionLimit) }

    /// The biggest body the gateway takes.
    static let maxBodyBytes = 1 << 20

    /// Checks `body` against the configuration and builds the upstream request of `user` (a Tally user id, sent
    /// upstream as `user` for the provider's abuse monitoring).
    static func parse(_ body: JSONValue, user: String, configuration: AIConfiguration) throws(APIError) -> ChatRequest {
        guard var object = body.objectValue else { throw APIError(.invalidJSON, "The body must be a JSON object.") }
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
        guard case .array(let messages)? = object["messages"], !messages.isEmpty, messages.count <= 4_096 else {
            throw APIError(.invalidField, "'messages' must be a non-empty array (at most 4096).")
        }
        for message in messages {
            guard let fields = message.objectValue, case .string? = fields["role"] else {
                throw APIError(.invalidField, "Each message must be an object with a string 'role'.")
            }
            if let audio = fields["audio"], audio != .null {
                throw APIError(.invalidField, "A message's 'audio' is not supported: audio is billed by its length, which a hold cannot bound.")
            }
            switch fields["content"] {
            case .string?, .null?, nil: break
            case .array(let parts)?:
                for part in parts where part["type"] != .string("text") {
                    throw APIError(.invalidField, "Only text content parts are supported (their tokens are bounded before the call).")
                }
            default: throw APIError(.invalidField, "A message's 'content' must be a string, text parts or null.")
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
        // Every byte of each message (role, name, text, tool calls, JSON punctuation) bounds its tokens.
        let promptBound = PromptBound.tokens(request: object)

        let clientBody = object
        object["model"] = .string(model.upstreamModel)
        object["max_tokens"] = nil
        object["max_completion_tokens"] = nil
        object[configuration.upstream.capField.rawValue] = .int(limit)
        // The stream's options are the gateway's: the usage (the charge), nothing else; without a stream, none.
        object["stream_options"] = stream ? .object(["include_usage": .bool(true)]) : nil
        object["user"] = .string(user)
        let request = ChatRequest(
            model: model, stream: stream, clientWantsUsage: clientWantsUsage, completionLimit: limit, promptBound: promptBound,
            upstreamBody: JSONValue.object(object).bytes, clientBody: clientBody)
        guard request.maxCost <= Limits.maxAmount else { throw APIError(.invalidField, "The request is too large to hold for.") }
        return request
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
    /// prompt is `estimatedPrompt` (within the bound), else the bound.
    static func of(_ request: ChatRequest, usage: ChatUsage?, chunks: Int, estimatedPrompt: Int? = nil) -> ChatCharge {
        let (prompt, completion, fromUsage) = usage.map { ($0.promptTokens, $0.completionTokens, true) }
            ?? (min(estimatedPrompt ?? request.promptBound, request.promptBound), min(chunks, request.completionLimit), false)
        let amount = min(request.model.cost(promptTokens: prompt, completionTokens: completion), request.maxCost)
        return ChatCharge(promptTokens: prompt, completionTokens: completion, amount: amount, fromUsage: fromUsage)
    }
}
