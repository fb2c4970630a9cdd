import Foundation

// The OpenAI Chat Completions wire format (`POST /v1/chat/completions`), as far as Tally reads and writes it:
// the request's model, messages, streaming and length fields; the answer, its streamed chunks and `usage`.
// Keys are snake_case on the wire. The gateway takes more fields than these types model (``ChatRequestFields``
// lists them: any other is refused); these types are for the SDK, the local model (`tally-dev dev-llm`) and reading answers.

/// One message of a conversation: plain text, or parts (text and images) for a question about a picture.
///
/// ```swift
/// let question = ChatMessage(role: "user", parts: [.text("What is in this photo?"), .image(data: jpeg, mimeType: "image/jpeg")])
/// ```
public struct ChatMessage: Codable, Hashable, Sendable {
    /// `system`, `user`, `assistant` or `tool`.
    public var role: String
    private var body: Body

    /// What a message carries: a string, or parts (kept as decoded when every part is one ``ChatContentPart`` models).
    private enum Body: Hashable, Sendable {
        case text(String)
        case parts([ChatContentPart])
    }

    /// The text: a plain message's whole content; a message of parts, its text parts joined (as on the wire before
    /// parts were modelled). Setting it makes the message plain text.
    public var content: String {
        get {
            switch body {
            case .text(let text): text
            case .parts(let parts): parts.compactMap(\.text).joined()
            }
        }
        set { body = .text(newValue) }
    }

    /// The content's parts, in order; nil for a plain-text message. Setting nil makes the message plain text (its
    /// text parts joined).
    public var parts: [ChatContentPart]? {
        get { if case .parts(let parts) = body { parts } else { nil } }
        set { body = newValue.map(Body.parts) ?? .text(content) }
    }

    /// Creates a plain-text message.
    public init(role: String, content: String) {
        self.role = role
        self.body = .text(content)
    }

    /// Creates a message of parts: text and images (``ChatContentPart``), sent in this order.
    public init(role: String, parts: [ChatContentPart]) {
        self.role = role
        self.body = .parts(parts)
    }

    private enum CodingKeys: String, CodingKey { case role, content }

    /// A part as it may come on the wire: only its type and text are required to read the message's text.
    private struct AnyPart: Decodable {
        var type: String
        var text: String?
    }

    /// Decodes `content` as a string, an array of parts or null (empty). Parts are kept when every one is a text or
    /// image part; otherwise (audio, a type added later) the text parts are joined, as before parts were modelled.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        role = try container.decode(String.self, forKey: .role)
        if let text = try? container.decodeIfPresent(String.self, forKey: .content) {
            body = .text(text)
        } else if let parts = try? container.decodeIfPresent([ChatContentPart].self, forKey: .content) {
            body = .parts(parts)
        } else if let parts = try? container.decodeIfPresent([AnyPart].self, forKey: .content) {
            body = .text(parts.compactMap { $0.type == "text" ? $0.text : nil }.joined())
        } else if try container.decodeNil(forKey: .content) {
            body = .text("")
        } else {
            throw DecodingError.dataCorruptedError(forKey: .content, in: container, debugDescription: "content must be a string or parts")
        }
    }

    /// Encodes `content` as a string, or as OpenAI's array of parts.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(role, forKey: .role)
        switch body {
        case .text(let text): try container.encode(text, forKey: .content)
        case .parts(let parts): try container.encode(parts, forKey: .content)
        }
    }
}

/// One part of a message's content, in OpenAI's wire format: `{"type":"text","text":…}` or
/// `{"type":"image_url","image_url":{"url":…,"detail":…}}`. The gateway holds an image by its pixel size and the
/// model's ``AIImageRule`` (read from the image's header, never decoded), not by its bytes.
public struct ChatContentPart: Codable, Hashable, Sendable {
    /// The text of a text part; nil for an image.
    public let text: String?
    /// The URL of an image part — `data:<type>;base64,…` or `https://…` —; nil for text.
    public let url: String?
    /// The detail an image part asks for; nil for text, or an image part decoded without one (priced as `auto`).
    public let detail: ImageDetail?

    private init(text: String?, url: String?, detail: ImageDetail?) {
        (self.text, self.url, self.detail) = (text, url, detail)
    }

    /// A text part.
    public static func text(_ text: String) -> ChatContentPart {
        ChatContentPart(text: text, url: nil, detail: nil)
    }

    /// An image sent with the request as a `data:` URL: PNG, JPEG, WebP or GIF bytes (`mimeType` `image/png`,
    /// `image/jpeg`, `image/webp` or `image/gif`, which must match the bytes). Its price depends on its pixel size
    /// and `detail` only (the SDK's `tally.ai.estimatedCost(model:parts:)` says it before asking).
    public static func image(data: Data, mimeType: String, detail: ImageDetail = .auto) -> ChatContentPart {
        ChatContentPart(text: nil, url: "data:\(mimeType);base64," + data.base64EncodedString(), detail: detail)
    }

    /// An image the provider fetches: an `https` URL on a host the model's `allowedURLHosts` lists (its size is
    /// unknown before the call, so it is held at the model's costliest image).
    public static func imageURL(_ url: URL, detail: ImageDetail = .auto) -> ChatContentPart {
        ChatContentPart(text: nil, url: url.absoluteString, detail: detail)
    }

    private enum CodingKeys: String, CodingKey { case type, text, imageURL = "image_url" }
    private enum ImageKeys: String, CodingKey { case url, detail }

    /// Decodes a `text` or `image_url` part; any other type is an error (``ChatMessage`` then keeps only the text).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .type) {
        case "text": self.init(text: try container.decode(String.self, forKey: .text), url: nil, detail: nil)
        case "image_url":
            let image = try container.nestedContainer(keyedBy: ImageKeys.self, forKey: .imageURL)
            self.init(text: nil, url: try image.decode(String.self, forKey: .url), detail: try image.decodeIfPresent(ImageDetail.self, forKey: .detail))
        case let type:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "a content part of type \(type)")
        }
    }

    /// Encodes the part as OpenAI's clients send it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let url {
            try container.encode("image_url", forKey: .type)
            var image = container.nestedContainer(keyedBy: ImageKeys.self, forKey: .imageURL)
            try image.encode(url, forKey: .url)
            try image.encodeIfPresent(detail, forKey: .detail)
        } else {
            try container.encode("text", forKey: .type)
            try container.encode(text ?? "", forKey: .text)
        }
    }
}

/// `stream_options` of a streamed request.
public struct ChatStreamOptions: Codable, Hashable, Sendable {
    /// Whether a last chunk carries `usage` (with no choices).
    public var includeUsage: Bool?

    /// Creates stream options.
    public init(includeUsage: Bool? = nil) { self.includeUsage = includeUsage }

    private enum CodingKeys: String, CodingKey { case includeUsage = "include_usage" }
}

/// A Chat Completions request.
public struct ChatCompletionRequest: Codable, Hashable, Sendable {
    /// The model's name.
    public var model: String
    /// The conversation so far.
    public var messages: [ChatMessage]
    /// Whether the answer comes as Server-Sent Events of ``ChatCompletionChunk``.
    public var stream: Bool?
    /// Streaming options.
    public var streamOptions: ChatStreamOptions?
    /// The most tokens the answer may have (the older field).
    public var maxTokens: Int?
    /// The most tokens the answer may have, reasoning included (the newer field).
    public var maxCompletionTokens: Int?
    /// Sampling temperature.
    public var temperature: Double?
    /// Who the end user is, for the provider's abuse monitoring. Tally's gateway replaces it with the signed-in
    /// user's id (so it need not be set).
    public var user: String?

    /// Creates a request.
    public init(
        model: String, messages: [ChatMessage], stream: Bool? = nil, streamOptions: ChatStreamOptions? = nil, maxTokens: Int? = nil,
        maxCompletionTokens: Int? = nil, temperature: Double? = nil, user: String? = nil
    ) {
        self.model = model
        self.messages = messages
        self.stream = stream
        self.streamOptions = streamOptions
        self.maxTokens = maxTokens
        self.maxCompletionTokens = maxCompletionTokens
        self.temperature = temperature
        self.user = user
    }

    /// The answer's token limit the request sets: the smaller of the two fields when both are present.
    public var completionLimit: Int? {
        switch (maxTokens, maxCompletionTokens) {
        case (let a?, let b?): min(a, b)
        case (let a?, nil): a
        case (nil, let b?): b
        case (nil, nil): nil
        }
    }

    private enum CodingKeys: String, CodingKey {
        case model, messages, stream, temperature, user
        case streamOptions = "stream_options"
        case maxTokens = "max_tokens"
        case maxCompletionTokens = "max_completion_tokens"
    }
}

/// Token counts of one call, as the provider bills them.
public struct ChatUsage: Codable, Hashable, Sendable {
    /// Tokens of the prompt.
    public var promptTokens: Int
    /// Tokens generated (reasoning included where the model reasons).
    public var completionTokens: Int
    /// Their sum.
    public var totalTokens: Int

    /// Creates usage counts; the total is their sum (`Int.max` when it does not fit: counts come from a provider).
    public init(promptTokens: Int, completionTokens: Int) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        let (total, overflow) = promptTokens.addingReportingOverflow(completionTokens)
        self.totalTokens = overflow ? (promptTokens < 0 ? .min : .max) : total
    }

    private enum CodingKeys: String, CodingKey {
        case promptTokens = "prompt_tokens"
        case completionTokens = "completion_tokens"
        case totalTokens = "total_tokens"
    }
}

/// A whole answer (`stream` false).
public typealias ChatCompletion = ChatAnswer<ChatCompletionChoice>

/// One Server-Sent Event of a streamed answer (`data: {…}`; the stream ends with `data: [DONE]`).
public typealias ChatCompletionChunk = ChatAnswer<ChatChunkChoice>

/// A choice of an answer: the assistant's whole message (``ChatCompletionChoice``) or what a stream's chunk adds to
/// it (``ChatChunkChoice``).
public protocol ChatAnswerChoice: Codable, Hashable, Sendable {
    /// The `object` of the answers carrying it: `chat.completion` or `chat.completion.chunk`.
    static var object: String { get }
}

/// An answer or a streamed answer's chunk: its id, time and model, and its choices (``ChatCompletion``,
/// ``ChatCompletionChunk``).
public struct ChatAnswer<AnswerChoice: ChatAnswerChoice>: Codable, Hashable, Sendable {
    /// One choice: ``ChatCompletionChoice`` or ``ChatChunkChoice``.
    public typealias Choice = AnswerChoice

    /// The answer's id (the same in every chunk).
    public var id: String
    /// `chat.completion` or `chat.completion.chunk`.
    public var object: String
    /// When the answer began, in seconds since 1970.
    public var created: Int
    /// The model that answers.
    public var model: String
    /// The choices (one); a stream's usage chunk has none.
    public var choices: [Choice]
    /// What the call cost in tokens: in a whole answer, and in a stream's last chunk when the request asked for it
    /// (`stream_options.include_usage`).
    public var usage: ChatUsage?

    /// Creates an answer or a chunk.
    public init(id: String, created: Int, model: String, choices: [Choice], usage: ChatUsage? = nil) {
        (self.id, self.object, self.created, self.model) = (id, Choice.object, created, model)
        (self.choices, self.usage) = (choices, usage)
    }
}

extension ChatAnswer where AnswerChoice == ChatChunkChoice {
    /// What a chunk adds to the message.
    public typealias Delta = ChatChunkChoice.Delta
}

/// One choice of a whole answer.
public struct ChatCompletionChoice: ChatAnswerChoice {
    /// `chat.completion`.
    public static var object: String { "chat.completion" }
    /// Its position (0 for the only one).
    public var index: Int
    /// The assistant's message.
    public var message: ChatMessage
    /// `stop`, `length`, …
    public var finishReason: String?

    /// Creates a choice.
    public init(index: Int, message: ChatMessage, finishReason: String?) {
        (self.index, self.message, self.finishReason) = (index, message, finishReason)
    }

    private enum CodingKeys: String, CodingKey {
        case index, message
        case finishReason = "finish_reason"
    }
}

/// One choice's delta in a streamed answer's chunk.
public struct ChatChunkChoice: ChatAnswerChoice {
    /// `chat.completion.chunk`.
    public static var object: String { "chat.completion.chunk" }

    /// What a chunk adds to the message.
    public struct Delta: Codable, Hashable, Sendable {
        /// `assistant`, in the first chunk.
        public var role: String?
        /// The next piece of text.
        public var content: String?

        /// Creates a delta.
        public init(role: String? = nil, content: String? = nil) {
            (self.role, self.content) = (role, content)
        }
    }

    /// Its position (0 for the only one).
    public var index: Int
    /// What it adds.
    public var delta: Delta
    /// Set in the choice's last chunk.
    public var finishReason: String?

    /// Creates a choice delta.
    public init(index: Int, delta: Delta, finishReason: String?) {
        (self.index, self.delta, self.finishReason) = (index, delta, finishReason)
    }

    private enum CodingKeys: String, CodingKey {
        case index, delta
        case finishReason = "finish_reason"
    }
}

/// The error body OpenAI-compatible servers answer with (and a stream's `error` event carries).
public struct ChatErrorBody: Codable, Hashable, Sendable {
    /// The error.
    public struct Detail: Codable, Hashable, Sendable {
        /// What went wrong, for people.
        public var message: String
        /// `invalid_request_error`, `server_error`, …
        public var type: String
        /// A machine-readable code, if any.
        public var code: String?

        /// Creates one.
        public init(message: String, type: String, code: String?) {
            self.message = message
            self.type = type
            self.code = code
        }
    }

    /// The error.
    public var error: Detail

    /// Creates an error body.
    public init(message: String, type: String, code: String? = nil) {
        error = Detail(message: message, type: type, code: code)
    }
}
