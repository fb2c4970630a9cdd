import Foundation
import TallyAPI
import TallyTestSupport
import Testing

/// The image rule (TallyAPI's `AIImageRule`), the header readers on real encoder output and on synthetic headers of
/// every size, and `AIPricing.measure`, which the gateway holds by and an app estimates with.
@Suite("Image pricing: header readers, the tile and patch rules, request measurement", .timeLimit(.minutes(2)))
struct ImagePricingTests {
    static let tiles = AIImageRule()
    static let patches = AIImageRule(sizing: .patches(patchSize: 32, maxPatches: 1536, multiplier: 1.62), lowDetailTokens: nil)
    static let vision = AIModelSpec(
        name: "vision", promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 1024, images: tiles)

    @Test("The tile rule prices OpenAI's documented examples", arguments: [
        (1024, 1024, ImageDetail.high, 765), (2048, 768, .high, 1445), (2048, 768, .auto, 1445), (2048, 768, .low, 85),
        (4096, 4096, .high, 765), (64, 64, .high, 255), (512, 512, .high, 255), (513, 512, .high, 425),
        (4096, 8192, .high, 85 + 170 * 2 * 3),  // → 1024×2048 → 768×1536: 2 × 3 tiles
        (3000, 1, .high, 85 + 170 * 4),  // fits to 2048×1: 4 × 1 tiles
    ])
    func tileRule(width: Int, height: Int, detail: ImageDetail, tokens: Int) {
        #expect(Self.tiles.tokens(width: width, height: height, detail: detail) == tokens)
    }

    @Test("The patch rule prices OpenAI's documented examples")
    func patchRule() {
        // 1024×1024: 32 × 32 = 1024 patches, under the cap; × 1.62 = 1658.88 → 1659.
        #expect(Self.patches.tokens(width: 1024, height: 1024, detail: .high) == 1659)
        // 1800×2400 exceeds 1536 patches: shrunk to 1056×1408, 33 × 44 = 1452 patches; × 1.62 = 2352.24 → 2353.
        #expect(Self.patches.tokens(width: 1800, height: 2400, detail: .high) == 2353)
        #expect(Self.patches.tokens(width: 1800, height: 2400, detail: .low) == 2353)  // no low price set: as high
        #expect(Self.patches.costliestTokens(detail: .high) == 2489)  // 1536 × 1.62 = 2488.32
        // 640×480: 20 × 15 = 300 patches; × 1.62 = 486 exactly (486.00000000000006 in doubles, not 487).
        #expect(Self.patches.tokens(width: 640, height: 480, detail: .high) == 486)
    }

    @Test("No image costs more than the costliest, the price a URL image is held at")
    func costliestBounds() {
        var random = SplitMix64(seed: 44)
        for _ in 0..<20_000 {
            let (w, h) = (Int(random.next() % 9000) + 1, Int(random.next() % 9000) + 1)
            for rule in [Self.tiles, Self.patches] {
                #expect(rule.tokens(width: w, height: h, detail: .high) <= rule.costliestTokens(detail: .high), "\(w)×\(h)")
                let scaled = rule.scaledSize(width: w, height: h)
                // What the model sees costs what the original does: an app may downscale to it for free.
                #expect(rule.tokens(width: scaled.width, height: scaled.height, detail: .high) <= rule.tokens(width: w, height: h, detail: .high))
            }
        }
        #expect(Self.tiles.costliestTokens(detail: .high) == 1445)
        #expect(Self.tiles.costliestTokens(detail: .low) == 85)
    }

    static func fixture(_ name: String) throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/images/\(name)")
        return Array(try Data(contentsOf: url))
    }

    @Test("The readers measure Pillow's own files", arguments: [
        ("face-640x480-exif.jpg", ImageHeader.Format.jpeg, 640, 480), ("portrait-333x777-progressive.jpg", .jpeg, 333, 777),
        ("tiny-64x64.png", .png, 64, 64), ("square-1024x1024.png", .png, 1024, 1024), ("banner-2048x768-alpha.png", .png, 2048, 768),
        ("lossy-500x300.webp", .webp, 500, 300), ("lossless-700x500.webp", .webp, 700, 500), ("alpha-300x200.webp", .webp, 300, 200),
        ("huge-4096x4096.webp", .webp, 4096, 4096), ("palette-640x480.gif", .gif, 640, 480), ("anim-160x120.gif", .gif, 160, 120),
    ])
    func realFiles(name: String, format: ImageHeader.Format, width: Int, height: Int) throws {
        let bytes = try Self.fixture(name)
        #expect(try ImageHeader.read(bytes).get() == ImageHeader(format: format, width: width, height: height))
        let url = SyntheticImage.dataURL(bytes, format: format)
        let measured = try ImageDataURL.measure(url, maxBytes: 1 << 20).get()
        #expect(measured.byteCount == bytes.count && measured.header.width == width && measured.header.height == height)
    }

    @Test("The readers measure every format at every size, a JPEG's frame header behind EXIF of any size")
    func syntheticSizes() throws {
        let sides = [1, 64, 333, 512, 1000, 2048, 4096, 16_383]
        for format in ImageHeader.Format.allCases {
            for (w, h) in sides.flatMap({ s in [(s, s), (s, max(1, s / 3)), (max(1, s / 7), s)] }) {
                for exif in format == .jpeg ? [0, 20_000, 200_000] : [0] {
                    for kind in format == .webp ? SyntheticImage.WebPKind.allCases : [.lossy] {
                        let bytes = SyntheticImage.bytes(format, width: w, height: h, exifBytes: exif, progressive: exif > 0, webp: kind)
                        #expect(try ImageHeader.read(bytes).get() == ImageHeader(format: format, width: w, height: h), "\(format) \(w)×\(h) \(exif)")
                    }
                }
            }
        }
        let big = SyntheticImage.bytes(.png, width: 100_000, height: 3)
        #expect(try ImageHeader.read(big).get().width == 100_000)
    }

    @Test("A data: URL is refused for its type, its base64, its size and a header that lies")
    func dataURLRefusals() {
        let png = SyntheticImage.bytes(.png, width: 10, height: 10)
        let base64 = Data(png).base64EncodedString()
        func measure(_ url: String, max: Int = 1 << 20) -> Result<ImageDataURL, ImageDataURL.Failure> { ImageDataURL.measure(url, maxBytes: max) }
        #expect(throws: Never.self) { try measure("data:image/png;base64,\(base64)").get() }
        #expect(throws: Never.self) { try measure("DATA:image/PNG;name=a.png;base64,\(base64)").get() }
        #expect(measure("data:image/jpeg;base64,\(base64)") == .failure(.typeMismatch(declared: .jpeg, found: .png)))
        #expect(measure("data:image/tiff;base64,\(base64)") == .failure(.unsupportedType("image/tiff")))
        #expect(measure("data:image/png,\(base64)") == .failure(.notBase64DataURL))
        #expect(measure("data:image/png;base64,\(base64.dropLast())") == .failure(.invalidBase64))
        #expect(measure("data:image/png;base64,\(base64.dropLast(4))!!!!") == .failure(.invalidBase64))
        #expect(measure("data:image/png;base64,\(base64)", max: png.count - 1) == .failure(.tooLarge(bytes: png.count, limit: png.count - 1)))
        #expect(measure("data:image/png;base64,\(Data(png.prefix(20)).base64EncodedString())") == .failure(.header(.truncated(.png))))
        #expect(measure("data:image/png;base64,") == .failure(.header(.unrecognized)))
    }

    static func request(_ parts: [JSONValue], extra: [JSONValue] = []) -> [JSONKey: JSONValue] {
        [
            "model": .string("vision"),
            "messages": .array(extra + [.object(["role": .string("user"), "content": .array(parts)])]),
        ]
    }

    static func imagePart(_ url: String, detail: String? = nil) -> JSONValue {
        var image: [JSONKey: JSONValue] = ["url": .string(url)]
        if let detail { image["detail"] = .string(detail) }
        return .object(["type": .string("image_url"), "image_url": .object(image)])
    }

    @Test("A request's prompt is its text bound plus its images; base64 is never counted as text")
    func requestMeasure() throws {
        let text: JSONValue = .object(["type": .string("text"), "text": .string("What is in this picture?")])
        let textOnly = try AIPricing.measure(request: Self.request([text]), model: Self.vision)
        let jpeg = SyntheticImage.dataURL(SyntheticImage.bytes(.jpeg, width: 1024, height: 1024, exifBytes: 20_000), format: .jpeg)
        let gif = SyntheticImage.dataURL(SyntheticImage.bytes(.gif, width: 2048, height: 768), format: .gif)
        let measured = try AIPricing.measure(
            request: Self.request([text, Self.imagePart(jpeg), Self.imagePart(gif, detail: "low"), Self.imagePart(gif, detail: "high")]),
            model: Self.vision)
        #expect(measured.textTokens == textOnly.textTokens)
        #expect(measured.images.map(\.tokens) == [765, 85, 1445])
        #expect(measured.tokens == textOnly.textTokens + 765 + 85 + 1445)
        #expect(measured.images.map(\.detail) == [.auto, .low, .high])
    }

    @Test("Each refusal is named")
    func refusals() {
        let png = SyntheticImage.dataURL(SyntheticImage.bytes(.png, width: 10, height: 10), format: .png)
        func code(_ parts: [JSONValue], model: AIModelSpec = Self.vision) -> ErrorCode? {
            do {
                _ = try AIPricing.measure(request: Self.request(parts), model: model)
                return nil
            } catch { return error.code }
        }
        var textModel = Self.vision
        textModel.images = nil
        #expect(code([Self.imagePart(png)], model: textModel) == .imagesNotSupported)
        #expect(code(Array(repeating: Self.imagePart(png), count: 8)) == nil)
        #expect(code(Array(repeating: Self.imagePart(png), count: 9)) == .tooManyImages)
        var small = Self.vision
        small.images?.maxBytes = 10
        #expect(code([Self.imagePart(png)], model: small) == .imageTooLarge)
        #expect(code([Self.imagePart("data:image/png;base64,AAAA")]) == .invalidImage)
        #expect(code([Self.imagePart(png, detail: "medium")]) == .invalidField)
        #expect(code([Self.imagePart("https://example.com/a.png")]) == .imageURLNotAllowed)
        #expect(code([Self.imagePart("http://example.com/a.png")]) == .imageURLNotAllowed)
        #expect(code([Self.imagePart("file:///etc/passwd")]) == .imageURLNotAllowed)
        #expect(code([.object(["type": .string("input_audio"), "input_audio": .object([:])])]) == .audioNotSupported)
        #expect(code([.object(["type": .string("file")])]) == .invalidField)
        #expect(code([.object(["type": .string("image_url"), "image_url": .object(["url": .string(png), "x": .null])])]) == .invalidField)
        var hosts = Self.vision
        hosts.images?.allowedURLHosts = ["images.example.com"]
        #expect(code([Self.imagePart("https://IMAGES.example.com/a.png")], model: hosts) == nil)
        #expect(code([Self.imagePart("https://images.example.com@evil.test/a.png")], model: hosts) == .imageURLNotAllowed)
        #expect(code([Self.imagePart("https://images.example.com.evil.test/a.png")], model: hosts) == .imageURLNotAllowed)
        let url = try? AIPricing.measure(request: Self.request([Self.imagePart("https://images.example.com/a.png", detail: "low")]), model: hosts)
        #expect(url?.images.first?.tokens == 85)
    }
}
