import Foundation
import TallyAPI

extension AIClient {
    /// What asking `model` about `parts` — one user message of text and images — will hold: the most the call can
    /// cost, in wallet tokens, computed as the gateway computes its hold (``AIModelSpec/hold(for:)``, which measures
    /// each image from its header at the model's ``AIImageRule``). An app shows it before asking and keeps Send
    /// disabled while the wallet cannot hold it; the call then charges what the model really used, at most this.
    ///
    /// ```swift
    /// let parts: [ChatContentPart] = [.text("What is in this photo?"), .image(data: jpeg, mimeType: "image/jpeg")]
    /// let cost = try await tally.ai.estimatedCost(model: "vision", parts: parts)
    /// priceLabel = "up to \(cost) tokens"
    /// canSend = cost <= tally.value(tally.walletQuery)?.available ?? 0
    /// let answer = try await tally.ai.chat(model: "vision", messages: [ChatMessage(role: "user", parts: parts)])
    /// ```
    ///
    /// - Parameter maxTokens: the answer's cap, as the call will ask it (nil: the model's own).
    /// - Throws: as ``hold(for:)``: the refusal the server would answer (`images_not_supported`, `too_many_images`,
    ///   `image_too_large`, `invalid_image`, `image_url_not_allowed`, …) as ``ClientError/Code/server`` with status 400.
    public func estimatedCost(model: String, parts: [ChatContentPart], maxTokens: Int? = nil) async throws -> Int64 {
        try await hold(for: ChatCompletionRequest(model: model, messages: [ChatMessage(role: "user", parts: parts)], maxTokens: maxTokens))
    }
}
