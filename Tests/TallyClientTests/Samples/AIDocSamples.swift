import Foundation
import TallyClient

/// The samples of the AI gateway's doc comments (`Client/Sources/TallyClient/AI`), verbatim, compiled
/// (``SamplesAreCompiledTests`` checks they match).
enum AIDocSamples {
    /// `AIClient`: a whole answer.
    static func chat(tally: Client, question: String) async throws -> String {
        var answer = ""
        let completion = try await tally.ai.chat(model: "chat", messages: [ChatMessage(role: "user", content: question)])
        answer = completion.choices.first?.message.content ?? ""
        return answer
    }

    /// `AIClient.stream(_:estimate:intent:)`: an answer shown as it arrives, then what it cost.
    static func stream(tally: Client, conversation: [ChatMessage]) async throws -> (answer: String, spent: Int64) {
        var spent: Int64 = 0
        var answer = ""
        for try await event in tally.ai.stream(model: "chat", messages: conversation) {
            answer += event.content              // show it as it arrives
            if let charge = event.charge { spent = charge.charged }
        }
        return (answer, spent)
    }

    /// README.md's AI sample.
    static func readme(tally: Client, conversation: [ChatMessage]) async throws -> (String, DailyGeneration) {
        var answer = ""
        for try await event in tally.ai.stream(model: "chat", messages: conversation) {
            answer += event.content                                      // as the model writes it
        }
        let prediction = try await tally.ai.daily("todays_prediction", parameters: ["sign": "leo"])  // once a day, cached
        return (answer, prediction)
    }

    /// `AIClient.hold(for:)`: a price before sending.
    static func price(tally: Client, conversation: [ChatMessage]) async throws -> String {
        var priceLabel = ""
        let most = try await tally.ai.hold(for: ChatCompletionRequest(model: "chat", messages: conversation))
        priceLabel = "up to \(most) tokens"
        return priceLabel
    }

    /// `AIClient.daily(_:parameters:)`.
    static func daily(tally: Client) async throws -> String {
        var horoscope = ""
        let prediction = try await tally.ai.daily("todays_prediction", parameters: ["sign": "leo"])
        horoscope = prediction.content
        return horoscope
    }
}
