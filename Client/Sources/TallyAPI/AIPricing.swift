import Foundation

/// A chat model the AI gateway offers (`ai.models` in `TALLY_CONFIG`), with its price in wallet tokens; listed by
/// `GET /v1/ai/models` (without `upstreamModel`), so an app computes what a call will hold before sending it.
public struct AIModelSpec: Codable, Sendable, Hashable {
    /// The name clients ask for.
    public var name: String
    /// The name sent upstream.
    public var upstreamModel: String
    /// Prompt tokens one wallet token buys.
    public var promptTokensPerCredit: Int
    /// Completion tokens one wallet token buys.
    public var completionTokensPerCredit: Int
    /// The most completion tokens one call may generate (reasoning included): the cap sent upstream and held for.
    public var maxCompletionTokens: Int
    /// What images cost on this model; nil: image parts are refused (`images_not_supported`).
    public var images: AIImageRule?
    /// What a premium user's calls cost on this model.
    public var premium: AIPremiumUse

    /// Creates a model; `upstreamModel` defaults to `name`.
    public init(
        name: String, upstreamModel: String? = nil, promptTokensPerCredit: Int, completionTokensPerCredit: Int, maxCompletionTokens: Int,
        images: AIImageRule? = nil, premium: AIPremiumUse = .tokens
    ) {
        self.name = name
        self.upstreamModel = upstreamModel ?? name
        self.promptTokensPerCredit = promptTokensPerCredit
        self.completionTokensPerCredit = completionTokensPerCredit
        self.maxCompletionTokens = maxCompletionTokens
        self.images = images
        self.premium = premium
    }

    /// What `promptTokens` and `completionTokens` cost in wallet tokens: their exact fractional price, summed, then
    /// rounded up once (a call that used anything costs at least 1). Total: counts a provider reports beyond what
    /// 64 bits can price cost `Int64.max` (a charge is capped at its hold), never a trap.
    public func cost(promptTokens: Int, completionTokens: Int) -> Int64 {
        let (pp, cp) = (Int64(max(promptTokensPerCredit, 1)), Int64(max(completionTokensPerCredit, 1)))
        let (prompt, completion) = (Int64(max(promptTokens, 0)), Int64(max(completionTokens, 0)))
        // p/pp + c/cp = (p div pp + c div cp) + (p mod pp × cp + c mod cp × pp) / (pp × cp): the whole credits apart, so
        // no product exceeds pp × cp (at most 10¹² with the configuration's bounds).
        let whole = (prompt / pp).addingReportingOverflow(completion / cp)
        let (promptRest, completionRest) = ((prompt % pp).multipliedReportingOverflow(by: cp), (completion % cp).multipliedReportingOverflow(by: pp))
        let rest = promptRest.partialValue.addingReportingOverflow(completionRest.partialValue)
        let denominator = pp.multipliedReportingOverflow(by: cp)
        let (roundedUp, roundingOverflow) = rest.partialValue.addingReportingOverflow(denominator.partialValue - 1)
        guard !whole.overflow, !promptRest.overflow, !completionRest.overflow, !rest.overflow, !denominator.overflow, !roundingOverflow
        else { return .max }
        let (total, overflow) = whole.partialValue.addingReportingOverflow(roundedUp / denominator.partialValue)
        return overflow ? .max : total
    }

    /// The completion cap of a request that asks for `requested` (nil: none): the request's when lower, else the model's.
    public func completionLimit(requested: Int?) -> Int {
        min(max(requested ?? maxCompletionTokens, 0), maxCompletionTokens)
    }

    /// What the gateway holds for `request`: its prompt's bound (text and images, ``AIPricing``) and its completion
    /// cap at this model's prices — the most the call can cost, and what the wallet shows held while it runs.
    /// Throws what the gateway would refuse the request with.
    public func hold(for request: ChatCompletionRequest) throws(AIContentRefusal) -> Int64 {
        let object = (try? JSONEncoder().encode(request)).flatMap { try? JSONValue.parse(Array($0)) }?.objectValue ?? [:]
        let prompt = try AIPricing.measure(request: object, model: self)
        return cost(promptTokens: prompt.tokens, completionTokens: completionLimit(requested: request.completionLimit))
    }

    private enum CodingKeys: String, CodingKey {
        case name, promptTokensPerCredit, completionTokensPerCredit, maxCompletionTokens, images, premium
    }

    /// Decodes a listed model (its upstream name is the server's: `name` stands in).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            name: try container.decode(String.self, forKey: .name),
            promptTokensPerCredit: try container.decode(Int.self, forKey: .promptTokensPerCredit),
            completionTokensPerCredit: try container.decode(Int.self, forKey: .completionTokensPerCredit),
            maxCompletionTokens: try container.decode(Int.self, forKey: .maxCompletionTokens),
            images: try container.decodeIfPresent(AIImageRule.self, forKey: .images),
            premium: try container.decodeIfPresent(AIPremiumUse.self, forKey: .premium) ?? .tokens)
    }

    /// Encodes the model as listed (never the upstream's name).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(promptTokensPerCredit, forKey: .promptTokensPerCredit)
        try container.encode(completionTokensPerCredit, forKey: .completionTokensPerCredit)
        try container.encode(maxCompletionTokens, forKey: .maxCompletionTokens)
        try container.encodeIfPresent(images, forKey: .images)
        try container.encode(premium, forKey: .premium)
    }
}

/// What a premium user's gateway calls on a model cost (`ai.models[].premium`): `tokens` (the default: as anyone's),
/// `free` (held and recorded as usage with the provider's counts, charged 0), or `{quota: name}` (one use of that
/// daily quota instead of tokens). The hold and every cap apply alike, so the operator sees what premium costs.
public enum AIPremiumUse: Sendable, Hashable, Codable {
    /// Premium users pay tokens like everyone.
    case tokens
    /// Premium users' calls are recorded and charged 0.
    case free
    /// Premium users' calls each take one use of the named quota.
    case quota(String)

    /// The quota premium users' calls take a use of; nil for `tokens` and `free`.
    public var quotaName: String? {
        if case .quota(let name) = self { name } else { nil }
    }

    private enum CodingKeys: String, CodingKey { case quota }

    /// Decodes `"tokens"`, `"free"` or `{"quota": "name"}`.
    public init(from decoder: any Decoder) throws {
        if let word = try? decoder.singleValueContainer().decode(String.self) {
            switch word {
            case "tokens": self = .tokens
            case "free": self = .free
            default:
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "premium is tokens, free or {quota: name}"))
            }
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self = .quota(try container.decode(String.self, forKey: .quota))
    }

    /// Encodes as decoded.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .tokens: var c = encoder.singleValueContainer(); try c.encode("tokens")
        case .free: var c = encoder.singleValueContainer(); try c.encode("free")
        case .quota(let name): var c = encoder.container(keyedBy: CodingKeys.self); try c.encode(name, forKey: .quota)
        }
    }
}

/// `GET /v1/ai/models`: the models the gateway offers, with their prices.
public struct AIModelList: Codable, Hashable, Sendable {
    /// Every model, in configuration order.
    public var items: [AIModelSpec]
    /// Creates the list.
    public init(items: [AIModelSpec]) { self.items = items }
}

/// A true upper bound on a chat prompt's tokens, before any provider counts them.
///
/// Byte-level BPE tokenizers (GPT, Llama 3, Qwen, …) emit at most one token per UTF-8 byte, so the bytes of the
/// messages' roles, names and text bound their tokens whatever the language (chars/4, the usual guess, is about
/// 4× low for Japanese). On top, each message's chat-template framing and the reply's priming are counted
/// generously: OpenAI's cookbook counts 3 a message, 1 for a name and 3 for the reply; Llama and Qwen
/// templates use up to 5 a message.
public enum PromptBound {
    /// Template tokens allowed per message.
    public static let tokensPerMessage = 8
    /// Template tokens allowed for the reply's priming.
    public static let replyTokens = 8

    /// The bound for messages whose role, name and text take `bytes` UTF-8 bytes each.
    public static func tokens(messageBytes bytes: [Int]) -> Int {
        bytes.reduce(replyTokens) { $0 + tokensPerMessage + $1 }
    }

    /// Request fields whose text reaches the model as prompt besides the messages (tool definitions, forced formats):
    /// the ``ChatRequestFields/Kind/prompt`` fields of ``ChatRequestFields/all`` but `messages`.
    public static let promptFields = ChatRequestFields.all.filter { $0.value == .prompt && $0.key != "messages" }.keys.sorted()

    /// The bound of a Chat Completions request body: every byte of each message's canonical JSON (role, name, text,
    /// tool calls, punctuation), the per-message framing, and the bytes of ``promptFields``. The gateway holds by
    /// this; an app computes the same number from the same request.
    public static func tokens(request body: [JSONKey: JSONValue]) -> Int {
        guard case .array(let messages)? = body["messages"] else { return replyTokens }
        return tokens(messageBytes: messages.map { $0.bytes.count }) + promptFields.reduce(0) { $0 + (body[$1]?.bytes.count ?? 0) }
    }
}

/// The Chat Completions request fields the AI gateway takes, each with how the hold accounts for it: one list, so
/// what ``PromptBound`` counts and what reaches the provider cannot drift apart. The gateway refuses any other
/// field (400 `invalid_field` naming it): an allow-list, because the fields a provider adds tend to cost more —
/// `service_tier` (priority processing), `modalities`/`audio` (audio tokens), `web_search_options` (searches),
/// `prediction` (predicted tokens, billed and not in the prompt), `reasoning_effort`, `logit_bias`, `store`,
/// `metadata` — and a hold must bound every one.
public enum ChatRequestFields {
    /// How the hold accounts for a field.
    public enum Kind: Sendable, Hashable {
        /// Its text reaches the model as prompt: every byte of it is counted by ``PromptBound``.
        case prompt
        /// It shapes the answer within the completion cap the gateway sends (sampling, stop sequences, log
        /// probabilities): forwarded as sent.
        case answer
        /// The gateway reads it and rewrites it: the model's upstream name, the completion cap (`max_tokens`,
        /// `max_completion_tokens`), `stream` and `stream_options` (the gateway asks for the usage), `n` (1 only),
        /// `user` (set by the server to the Tally user's id, whatever the client sent).
        case gateway
    }

    /// Every field the gateway takes.
    public static let all: [String: Kind] = [
        "messages": .prompt, "tools": .prompt, "functions": .prompt, "tool_choice": .prompt, "function_call": .prompt,
        "response_format": .prompt,
        "temperature": .answer, "top_p": .answer, "frequency_penalty": .answer, "presence_penalty": .answer, "stop": .answer,
        "seed": .answer, "parallel_tool_calls": .answer, "logprobs": .answer, "top_logprobs": .answer,
        "model": .gateway, "stream": .gateway, "stream_options": .gateway, "max_tokens": .gateway, "max_completion_tokens": .gateway,
        "n": .gateway, "user": .gateway,
    ]
}
