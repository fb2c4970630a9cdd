/// Why the gateway refuses a request's content before holding anything or calling the provider (the same checks an
/// app runs with ``AIPricing/measure(request:model:)`` before asking).
public struct AIContentRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error code the gateway answers with (400).
    public var code: ErrorCode
    /// What is wrong, for a developer.
    public var message: String
    /// A refusal.
    public init(_ code: ErrorCode, _ message: String) { (self.code, self.message) = (code, message) }
    /// The code and message.
    public var description: String { "\(code): \(message)" }
}

/// One image part of a request, measured.
public struct MeasuredImage: Sendable, Hashable {
    /// Where the image comes from.
    public enum Source: Sendable, Hashable {
        /// A `data:` URL: its pixel size is known.
        case data(ImageDataURL)
        /// An `https` URL on an allowed host: held at the model's costliest image.
        case url(host: String)
    }
    /// The message's index in `messages`.
    public var message: Int
    /// The part's index in that message's `content`.
    public var part: Int
    /// The detail asked for (`auto` when absent).
    public var detail: ImageDetail
    /// The image.
    public var source: Source
    /// Its prompt tokens at the model's rule (for a URL, the most an image can cost).
    public var tokens: Int
}

/// The most a request's prompt can cost, in provider tokens: its text bound and its images.
public struct PromptMeasure: Sendable, Hashable {
    /// ``PromptBound`` of everything but the image parts.
    public var textTokens: Int
    /// The image parts, in order.
    public var images: [MeasuredImage]
    /// The images' tokens, summed.
    public var imageTokens: Int { images.reduce(0) { $0.addingReportingOverflow($1.tokens).overflow ? .max : $0 + $1.tokens } }
    /// The prompt's bound: text and images.
    public var tokens: Int {
        let (sum, overflow) = textTokens.addingReportingOverflow(imageTokens)
        return overflow ? .max : sum
    }
}

/// What a Chat Completions request may cost, computed alike by the gateway (its hold) and by an app (its estimate).
public enum AIPricing {
    /// Checks every content part of `body`'s messages and measures the prompt for `model`: text parts are counted by
    /// their bytes (``PromptBound``); an `image_url` part by its pixel size at the model's ``AIImageRule`` (its
    /// base64 is never counted as text). Refuses (``AIContentRefusal``) what a hold cannot bound or the model does
    /// not take: an image on a model without `images` (`images_not_supported`), more than `maxPerRequest` images
    /// (`too_many_images`), one over `maxBytes` (`image_too_large`), bytes that are not a PNG, JPEG, WebP or GIF of
    /// the declared type or whose header is cut (`invalid_image`), an `https` URL off `allowedURLHosts` or any other
    /// scheme (`image_url_not_allowed`), audio (`audio_not_supported`), an unknown `detail`, part type or part field
    /// (`invalid_field`).
    public static func measure(request body: [JSONKey: JSONValue], model: AIModelSpec) throws(AIContentRefusal) -> PromptMeasure {
        try measure(request: body, model: model) { url, maxBytes in ImageDataURL.measure(url, maxBytes: maxBytes) }
    }

    /// ``measure(request:model:)`` of a body read as ``JSONObjectText`` from `text`, whose `data:` URLs left in the
    /// text (`dataURLs`) are measured where they lie; nil when a stand-in is not the URL of exactly one image part
    /// (a `data:` URL written as text, say), whose body must then be read again whole.
    @_spi(Gateway)
    public static func measure(
        request body: [JSONKey: JSONValue], dataURLs: [String: Range<Int>], in text: UnsafeBufferPointer<UInt8>, model: AIModelSpec
    ) throws(AIContentRefusal) -> PromptMeasure? {
        var used: Set<String> = []
        var reused = false
        let measure = try measure(request: body, model: model) { url, maxBytes in
            guard let range = dataURLs[url] else { return ImageDataURL.measure(url, maxBytes: maxBytes) }
            reused = reused || !used.insert(url).inserted
            return ImageDataURL.measure(utf8: UnsafeBufferPointer(rebasing: text[range]), maxBytes: maxBytes, base64Checked: true)
        }
        return !reused && used.count == dataURLs.count ? measure : nil
    }

    private static func measure(
        request body: [JSONKey: JSONValue], model: AIModelSpec, dataURL: (String, Int) -> Result<ImageDataURL, ImageDataURL.Failure>
    ) throws(AIContentRefusal) -> PromptMeasure {
        guard case .array(let messages)? = body["messages"] else {
            return PromptMeasure(textTokens: PromptBound.tokens(request: body), images: [])
        }
        var images: [MeasuredImage] = []
        var textBody = body
        var textMessages = messages
        for (index, message) in messages.enumerated() {
            guard case .array(let parts)? = message["content"] else { continue }
            var textParts: [JSONValue] = []
            for (partIndex, part) in parts.enumerated() {
                switch part["type"] {
                case .string("text")?: textParts.append(part)
                case .string("image_url")?:
                    if let rule = model.images, images.count == rule.maxPerRequest {
                        throw AIContentRefusal(.tooManyImages, "At most \(rule.maxPerRequest) images a request on '\(model.name)'.")
                    }
                    images.append(try measureImage(part, model: model, message: index, part: partIndex, dataURL: dataURL))
                case .string("input_audio")?, .string("audio")?:
                    throw AIContentRefusal(
                        .audioNotSupported, "Audio parts are not supported: audio is billed by its length, which a hold cannot bound.")
                default:
                    throw AIContentRefusal(.invalidField, "Content parts must be 'text' or 'image_url' parts.")
                }
            }
            if textParts.count != parts.count, var fields = message.objectValue {
                fields["content"] = .array(textParts)
                textMessages[index] = .object(fields)
            }
        }
        textBody["messages"] = .array(textMessages)
        return PromptMeasure(textTokens: PromptBound.tokens(request: textBody), images: images)
    }

    private static func measureImage(
        _ part: JSONValue, model: AIModelSpec, message: Int, part index: Int, dataURL: (String, Int) -> Result<ImageDataURL, ImageDataURL.Failure>
    ) throws(AIContentRefusal) -> MeasuredImage {
        guard let rule = model.images else {
            throw AIContentRefusal(.imagesNotSupported, "The model '\(model.name)' does not take images.")
        }
        guard let fields = part.objectValue, fields.keys.allSatisfy({ ["type", "image_url"].contains($0.string) }),
            let image = fields["image_url"]?.objectValue, image.keys.allSatisfy({ ["url", "detail"].contains($0.string) }),
            case .string(let url)? = image["url"]
        else {
            throw AIContentRefusal(.invalidField, "An image part is {\"type\":\"image_url\",\"image_url\":{\"url\":…,\"detail\":…}} and nothing more.")
        }
        let detail: ImageDetail
        switch image["detail"] {
        case nil, .null?: detail = .auto
        case .string(let name)?:
            guard let known = ImageDetail(rawValue: name) else {
                throw AIContentRefusal(.invalidField, "An image's 'detail' must be low, high or auto.")
            }
            detail = known
        default: throw AIContentRefusal(.invalidField, "An image's 'detail' must be low, high or auto.")
        }
        if ImageDataURL.hasDataScheme(url.utf8.prefix(5)) {
            switch dataURL(url, rule.maxBytes) {
            case .success(let measured):
                let tokens = rule.tokens(width: measured.header.width, height: measured.header.height, detail: detail)
                return MeasuredImage(message: message, part: index, detail: detail, source: .data(measured), tokens: tokens)
            case .failure(let failure): throw refusal(failure, rule: rule)
            }
        }
        let lowered = url.lowercased()
        guard lowered.hasPrefix("https://") else {
            throw AIContentRefusal(.imageURLNotAllowed, "An image is a data: URL (PNG, JPEG, WebP or GIF, base64) or an https URL on an allowed host.")
        }
        let authority = lowered.dropFirst("https://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.contains("@") ? "" : String(authority.split(separator: ":", omittingEmptySubsequences: false).first ?? "")
        guard !host.isEmpty, rule.allowedURLHosts.contains(where: { $0.lowercased() == host }) else {
            throw AIContentRefusal(
                .imageURLNotAllowed,
                rule.allowedURLHosts.isEmpty
                    ? "The model '\(model.name)' takes images as data: URLs only."
                    : "Image URLs are taken from \(rule.allowedURLHosts.joined(separator: ", ")) only.")
        }
        return MeasuredImage(message: message, part: index, detail: detail, source: .url(host: host), tokens: rule.costliestTokens(detail: detail))
    }

    private static func refusal(_ failure: ImageDataURL.Failure, rule: AIImageRule) -> AIContentRefusal {
        switch failure {
        case .notBase64DataURL: return AIContentRefusal(.invalidImage, "An image data: URL is data:<type>;base64,<data>.")
        case .unsupportedType(let type):
            return AIContentRefusal(.invalidImage, "Images are PNG, JPEG, WebP or GIF, not '\(type)'.")
        case .invalidBase64: return AIContentRefusal(.invalidImage, "The image's base64 is malformed.")
        case .tooLarge(let bytes, let limit):
            return AIContentRefusal(.imageTooLarge, "An image is \(bytes) bytes; the limit is \(limit).")
        case .header(.unrecognized): return AIContentRefusal(.invalidImage, "The image is not a PNG, JPEG, WebP or GIF.")
        case .header(.truncated(let format)): return AIContentRefusal(.invalidImage, "The \(format.rawValue.uppercased()) ends before its size.")
        case .header(.malformed(let format, let why)):
            return AIContentRefusal(.invalidImage, "The \(format.rawValue.uppercased()) header is malformed: \(why).")
        case .typeMismatch(let declared, let found):
            return AIContentRefusal(.invalidImage, "The image is declared \(declared.mimeType) but is \(found.mimeType).")
        }
    }
}
