import Foundation

// What Tally's AI gateway adds to the OpenAI wire format: the wallet after a call's charge (a response header on
// `POST /v1/ai/chat/completions`, an SSE event after `[DONE]` on a stream, where OpenAI's clients never read it),
// and the daily generations of `GET /v1/ai/daily/{name}`.

/// The gateway's additions to the Chat Completions protocol.
public enum AIGatewayProtocol {
    /// The path of the OpenAI-compatible endpoint: a client's base URL is the server's `/v1/ai`.
    public static let chatCompletionsPath = "/v1/ai/chat/completions"
    /// The response header carrying ``AICharge`` as compact JSON on a non-streamed answer.
    public static let chargeHeader = "Tally-Charge"
    /// The `event:` name of the SSE event carrying ``AICharge`` after a stream's `[DONE]` (or its error event).
    public static let chargeEvent = "tally.charge"
    /// The most bytes the gateway buffers of one event of the provider's stream (a line, or an event's data): a
    /// longer one ends the stream with an error event and the charge (1 MiB; a chunk is a few hundred bytes).
    public static let maxUpstreamEventBytes = EventStreamParser.defaultLimit
}

/// What a call was charged and the wallet after it, so an app reconciles its optimistic balance without another request.
public struct AICharge: Codable, Hashable, Sendable {
    /// Wallet tokens charged (0 when the upstream failed before answering).
    public var charged: Int64
    /// The most the call could have cost, which was held while it ran.
    public var held: Int64
    /// The tokens the charge was computed from: the provider's `usage`, or, when none came (the client left
    /// mid-stream), the prompt's bound and the chunks generated.
    public var promptTokens: Int
    /// Completion tokens charged.
    public var completionTokens: Int
    /// The wallet after the charge.
    public var wallet: Wallet

    /// Creates a charge report.
    public init(charged: Int64, held: Int64, promptTokens: Int, completionTokens: Int, wallet: Wallet) {
        self.charged = charged
        self.held = held
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.wallet = wallet
    }

    private enum CodingKeys: String, CodingKey {
        case charged, held, wallet
        case promptTokens = "prompt_tokens"
        case completionTokens = "completion_tokens"
    }
}

/// A user's generation of the day (`GET /v1/ai/daily/{name}`): computed once per local day, the same on every device.
public struct DailyGeneration: Codable, Hashable, Sendable {
    /// The configured generation's name.
    public var name: String
    /// The user's local day it belongs to, `YYYY-MM-DD`: the one its window ends with.
    public var day: String
    /// The generated text.
    public var content: String
    /// When it was generated.
    public var generatedAt: Date
    /// The end of its window, a local midnight of the user (changing time zone does not move it), when the next call
    /// makes a new one: cache it until then.
    public var expiresAt: Date

    /// Creates a daily generation.
    public init(name: String, day: String, content: String, generatedAt: Date, expiresAt: Date) {
        self.name = name
        self.day = day
        self.content = content
        self.generatedAt = generatedAt
        self.expiresAt = expiresAt
    }
}
