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

    /// `ChatMessage`: a question about a photo.
    static func photoQuestion(jpeg: Data) -> ChatMessage {
        let question = ChatMessage(role: "user", parts: [.text("What is in this photo?"), .image(data: jpeg, mimeType: "image/jpeg")])
        return question
    }

    /// `AIClient.estimatedCost(model:parts:maxTokens:)`: the price of a question about a photo, Send enabled only when
    /// the wallet can hold it.
    static func photoPrice(tally: Client, jpeg: Data) async throws -> (String, Bool, ChatCompletion) {
        var priceLabel = ""
        var canSend = false
        let parts: [ChatContentPart] = [.text("What is in this photo?"), .image(data: jpeg, mimeType: "image/jpeg")]
        let cost = try await tally.ai.estimatedCost(model: "vision", parts: parts)
        priceLabel = "up to \(cost) tokens"
        canSend = cost <= tally.value(tally.walletQuery)?.available ?? 0
        let answer = try await tally.ai.chat(model: "vision", messages: [ChatMessage(role: "user", parts: parts)])
        return (priceLabel, canSend, answer)
    }

    /// README.md's sample of a question about a photo.
    static func readmePhoto(tally: Client, jpeg: Data) async throws -> (Bool, String) {
        var canSend = false
        let parts: [ChatContentPart] = [.text("Read this face."), .image(data: jpeg, mimeType: "image/jpeg", detail: .high)]
        let cost = try await tally.ai.estimatedCost(model: "vision", parts: parts)   // the hold the server will take
        canSend = cost <= tally.value(tally.walletQuery)?.available ?? 0              // else the Send button stays off
        let reading = try await tally.ai.reply(to: ChatCompletionRequest(model: "vision", messages: [ChatMessage(role: "user", parts: parts)]))
        return (canSend, reading.text)
    }
}
