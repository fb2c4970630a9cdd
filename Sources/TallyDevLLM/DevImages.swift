import Hummingbird
import TallyAPI

/// The local model's image parts: measured from their headers (TallyAPI's ``AIPricing``, the function the gateway
/// holds with, so a local run's holds and charges are exact), billed by the configured ``AIImageRule``, and described
/// in the answer ("I see a 640×480 JPEG."). An image the model cannot take gets a provider's 400.
enum DevImages {
    /// The image parts of `body` (a Chat Completions request for `model`), measured by `rule`; none without any
    /// `image_url` part (the body is then not parsed a second time). Throws what a provider would refuse.
    static func measure(_ body: some Collection<UInt8>, model: String, rule: AIImageRule) throws -> [MeasuredImage] {
        let bytes = Array(body)
        guard bytes.firstRange(of: Array("\"image_url\"".utf8)) != nil else { return [] }
        let object = try JSONValue.parse(bytes).objectValue ?? [:]
        let spec = AIModelSpec(name: model, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1, images: rule)
        return try AIPricing.measure(request: object, model: spec).images
    }

    /// What the model says it sees: for each image, `I see a 640×480 JPEG.` — five tokens.
    static func description(_ images: [MeasuredImage]) -> [String] {
        images.enumerated().flatMap { index, image -> [String] in
            let seen: [String] =
                switch image.source {
                case .data(let data): ["\(data.header.width)×\(data.header.height)", name(data.format) + "."]
                case .url: ["picture."]
                }
            return [index == 0 ? "I" : " I", " see", " a"] + seen.map { " " + $0 }
        }
    }

    /// The format as people write it.
    static func name(_ format: ImageHeader.Format) -> String {
        switch format {
        case .png: "PNG"
        case .jpeg: "JPEG"
        case .webp: "WebP"
        case .gif: "GIF"
        }
    }

    /// A provider's 400 for an image it cannot take: OpenAI's codes where it has one (`invalid_image_url` for a URL,
    /// which the local model cannot fetch; `invalid_image_format` for bytes that are not a PNG, JPEG, WebP or GIF).
    static func error(_ refusal: AIContentRefusal) -> Response {
        switch refusal.code {
        case .imageURLNotAllowed:
            return DevJSON.error(
                .badRequest, "The dev model cannot download images: send each image as a base64 data: URL.", type: "invalid_request_error",
                code: "invalid_image_url")
        case .invalidImage:
            return DevJSON.error(.badRequest, "You uploaded an unsupported image. \(refusal.message)", type: "invalid_request_error", code: "invalid_image_format")
        default:
            return DevJSON.error(.badRequest, refusal.message, type: "invalid_request_error", code: refusal.code.rawValue)
        }
    }
}
