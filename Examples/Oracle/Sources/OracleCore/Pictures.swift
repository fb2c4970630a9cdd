import Foundation
import TallyClient

/// A question for the oracle's vision model (`vision` in tally.yaml): a prompt and the images it is about, sent as one
/// user message. What it costs depends on the images' pixel sizes, read from their headers, not on their bytes.
public struct PictureQuestion: Sendable, Hashable {
    /// The message's parts: the prompt, then each image.
    public var parts: [ChatContentPart]

    /// A question about `images`: image parts such as ``ChatContentPart/image(data:mimeType:detail:)``'s, or on Apple
    /// platforms the SDK's `ChatContentPart.image(_:detail:rule:)` (a `CGImage` scaled down to what the model sees and
    /// encoded as JPEG) and `ChatContentPart.videoFrames(of:count:detail:rule:)` (a clip's frames).
    public init(_ prompt: String, images: [ChatContentPart]) {
        parts = [.text(prompt)] + images
    }

    /// Seed 002's face reading (`processFaceReading(imageData:)`): what the face in `photo` (JPEG bytes) foretells.
    public static func faceReading(photo: Data) -> PictureQuestion {
        PictureQuestion(
            "Read this face as a fortune teller would: what do the eyes, the smile and the brow say about the year ahead?",
            images: [.image(data: photo, mimeType: "image/jpeg")])
    }

    /// `question` about one picture (JPEG bytes).
    public static func picture(_ question: String, image: Data) -> PictureQuestion {
        PictureQuestion(question, images: [.image(data: image, mimeType: "image/jpeg")])
    }

    /// `question` about a clip, shown to the model as `frames` (JPEG bytes, in order: three in the app). On iOS the app
    /// takes them from the video the user picked with `ChatContentPart.videoFrames(of: url, count: 3)`, which picks
    /// each from the middle of a third of the clip and scales it down to what the model sees, and asks
    /// `PictureQuestion(…, images: frames)`; this takes frames already encoded (Linux, the tests, the command line).
    public static func video(_ question: String, frames: [Data]) -> PictureQuestion {
        PictureQuestion(
            "These are \(frames.count) frames of a clip, in order. \(question)",
            images: frames.map { .image(data: $0, mimeType: "image/jpeg") })
    }
}

extension OracleSession {
    /// The gateway's model for questions about pictures (tally.yaml's `ai.models`).
    public static let visionModel = "vision"

    /// Whether the wallet can hold the priced question (``pictureCost``): the screen's Ask button. The server
    /// decides in the end: a wallet that changed on another device is refused there (``answer(_:)``).
    public var canAskAboutPicture: Bool {
        guard let pictureCost else { return false }
        return pictureCost == 0 || pictureCost <= wallet?.available ?? 0
    }

    /// Prices `question` before it is asked: the most it can cost, computed from the gateway's prices and image rule
    /// as the server will hold it (`tally.ai.estimatedCost(model:parts:maxTokens:)`), 0 under premium (the model is
    /// `premium: free`); shown as ``pictureCost``.
    /// - Throws: the gateway's refusal of the images, as the server would answer it (`invalid_image`,
    ///   `image_too_large`, `too_many_images`: a ``ClientError`` with status 400), before anything is sent.
    @discardableResult
    public func price(_ question: PictureQuestion) async throws -> Int64 {
        let hold = try await client.ai.estimatedCost(model: Self.visionModel, parts: question.parts)
        let free = try await client.ai.model(named: Self.visionModel).premium == .free && isPremium
        if wallet == nil { wallet = try await client.fetch(client.walletQuery) }
        pictureCost = free ? 0 : hold
        return free ? 0 : hold
    }

    /// Asks `question`: priced first (``price(_:)``: the wallet shows that much held while the model answers), then
    /// sent through the gateway; the answer shows in ``pictureAnswer`` and the wallet as the server charged it (what
    /// the model used, at most the price). A wallet that cannot hold the price is refused by the server — 402, nothing
    /// charged, the model not called —: nil, the wallet as the server has it, and a ``notice``.
    public func answer(_ question: PictureQuestion) async throws -> AIChatReply? {
        let cost = try await price(question)
        let request = ChatCompletionRequest(model: Self.visionModel, messages: [ChatMessage(role: "user", parts: question.parts)])
        do {
            let reply = try await client.ai.reply(to: request, estimate: cost)
            wallet = reply.charge?.wallet ?? client.value(client.walletQuery)
            pictureAnswer = reply.text
            notice = nil
            return reply
        } catch let error as ClientError where error.code == .insufficientTokens {
            wallet = error.wallet ?? wallet
            notice = "This question costs up to \(cost) tokens and you have \(wallet?.available ?? 0): buy tokens to ask it."
            return nil
        }
    }

    /// The face reading of `photo` (JPEG bytes of the user's face): ``answer(_:)`` of ``PictureQuestion/faceReading(photo:)``.
    public func faceReading(photo: Data) async throws -> AIChatReply? {
        try await answer(.faceReading(photo: photo))
    }

    /// Asks `question` about `image` (JPEG bytes): ``answer(_:)`` of ``PictureQuestion/picture(_:image:)``.
    public func ask(_ question: String, about image: Data) async throws -> AIChatReply? {
        try await answer(.picture(question, image: image))
    }

    /// Asks `question` about a clip seen as `frames` (JPEG bytes, in order; on iOS from the SDK's
    /// `ChatContentPart.videoFrames(of:count:)`): ``answer(_:)`` of ``PictureQuestion/video(_:frames:)``.
    public func ask(_ question: String, aboutVideoFrames frames: [Data]) async throws -> AIChatReply? {
        try await answer(.video(question, frames: frames))
    }
}
