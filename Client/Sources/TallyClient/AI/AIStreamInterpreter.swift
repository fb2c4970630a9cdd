import Foundation
import TallyAPI

/// What the gateway's events of one streamed call mean, read in order: pure (no I/O), so every way a stream can
/// end is tested without a network.
///
/// The gateway sends `data: <chunk>` events, then `data: [DONE]`, then the `tally.charge` event; a stream that
/// fails after its 200 sends `data: {"error":{…}}` (OpenAI's shape) and the charge, and no `[DONE]`. Chunks are
/// read leniently (only the fields an app shows), since the gateway relays the provider's chunks as they are.
struct AIStreamInterpreter {
    /// Whether `[DONE]` came: the answer is whole.
    private(set) var done = false
    /// The charge event's report, once it came.
    private(set) var charge: AICharge?
    /// The stream's error event, if one came.
    private(set) var failure: ErrorEvent.Detail?
    private let decoder = TallyJSON.decoder()

    init() {}

    /// The event to hand the app for `event`, if any: a chunk with text, a finish reason or usage; the charge.
    /// `[DONE]`, the error event (reported by ``ending``), empty chunks and unknown events hand nothing.
    mutating func read(_ event: ServerSentEvent) -> AIStreamEvent? {
        switch event.name {
        case AIGatewayProtocol.chargeEvent:
            guard let charge = try? decoder.decode(AICharge.self, from: Data(event.data.utf8)) else { return nil }
            self.charge = charge
            return AIStreamEvent(charge: charge)
        case "message":
            if event.data == "[DONE]" {
                done = true
                return nil
            }
            let data = Data(event.data.utf8)
            if let error = try? decoder.decode(ErrorEvent.self, from: data) {
                failure = error.error
                return nil
            }
            guard let chunk = try? decoder.decode(Chunk.self, from: data) else { return nil }
            let choice = chunk.choices?.first { ($0.index ?? 0) == 0 }
            let read = AIStreamEvent(content: choice?.delta?.content ?? "", finishReason: choice?.finishReason, usage: chunk.usage)
            return read.content.isEmpty && read.finishReason == nil && read.usage == nil ? nil : read
        default:
            return nil
        }
    }

    /// How a stream whose body ended after the events read so far ends for the app.
    enum Ending: Equatable {
        /// The answer is whole (`[DONE]` or the charge came, and no error).
        case complete
        /// The gateway reported a failure after the 200 (the charge, when it came, is in the error's wallet).
        case failed(ClientError)
        /// The body ended with neither: the connection dropped mid-answer.
        case cut
    }

    /// How the stream ends, given what was read.
    var ending: Ending {
        if let failure {
            return .failed(
                ClientError(
                    .server, serverCode: ErrorCode(rawValue: failure.code ?? ErrorCode.upstreamFailed.rawValue),
                    message: failure.message ?? "the model's stream failed", wallet: charge?.wallet))
        }
        return done || charge != nil ? .complete : .cut
    }

    /// `data: {"error":{…}}`, read leniently.
    struct ErrorEvent: Decodable, Equatable {
        /// The error's fields.
        struct Detail: Decodable, Equatable {
            var message: String?
            var type: String?
            var code: String?
        }

        var error: Detail
    }

    /// The fields of a chunk the app is shown; any may be missing.
    private struct Chunk: Decodable {
        struct Choice: Decodable {
            var index: Int?
            var delta: Delta?
            var finishReason: String?

            private enum CodingKeys: String, CodingKey {
                case index, delta
                case finishReason = "finish_reason"
            }
        }

        struct Delta: Decodable {
            var content: String?
        }

        var choices: [Choice]?
        var usage: ChatUsage?

        private enum CodingKeys: String, CodingKey { case choices, usage }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            choices = try container.decodeIfPresent([Choice].self, forKey: .choices)
            usage = try? container.decodeIfPresent(ChatUsage.self, forKey: .usage)  // a usage missing a count is no reason to lose the text
        }
    }
}
