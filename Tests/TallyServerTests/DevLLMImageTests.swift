import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TallyAPI
import TallyDevLLM
import TallyTestSupport
import Testing

/// `tally-dev dev-llm` takes image parts as a provider does: measured from their headers, their tokens (by OpenAI's tile
/// rule, or the patch rule) added to the text's in `usage.prompt_tokens`, each described in the answer; a URL it
/// cannot fetch and bytes that are not an image answered with a provider's 400.
@Suite("Local model images (tally-dev dev-llm)", .timeLimit(.minutes(1)))
struct DevLLMImageTests {
    static let text = "What is in this picture?"

    /// A request body whose one user message is `text` and an image part for each of `urls` (with `detail`, if any).
    static func body(_ urls: [String], detail: String? = nil, stream: Bool = false) -> Data {
        var parts: [JSONValue] = [.object(["type": .string("text"), "text": .string(text)])]
        for url in urls {
            var image: [JSONKey: JSONValue] = ["url": .string(url)]
            if let detail { image["detail"] = .string(detail) }
            parts.append(.object(["type": .string("image_url"), "image_url": .object(image)]))
        }
        var request: [JSONKey: JSONValue] = [
            "model": .string("dev"), "messages": .array([.object(["role": .string("user"), "content": .array(parts)])]),
        ]
        if stream { request["stream"] = .bool(true); request["stream_options"] = .object(["include_usage": .bool(true)]) }
        return Data(JSONValue.object(request).bytes)
    }

    /// Posts `body` to the local model on `port`: the status and body.
    static func post(_ body: Data, port: Int) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/chat/completions")!)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(DevLLMTests.key)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    static func fixture(_ name: String) throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/images/\(name)")
        return Array(try Data(contentsOf: url))
    }

    /// What the model bills for ``text`` alone.
    static var textTokens: Int { DevAnswer.promptTokens([ChatMessage(role: "user", content: text)]) }

    @Test("Usage is the text's tokens plus the tile rule's for each image, and the answer names each image's size")
    func billedAndDescribed() async throws {
        let photo = SyntheticImage.dataURL(try Self.fixture("face-640x480-exif.jpg"), format: .jpeg)
        let banner = SyntheticImage.dataURL(SyntheticImage.bytes(.png, width: 2048, height: 768), format: .png)
        let gif = SyntheticImage.dataURL(SyntheticImage.bytes(.gif, width: 64, height: 64), format: .gif)
        let rule = AIImageRule()
        try await DevLLMTests.with { model in
            let cases: [(urls: [String], detail: String?, images: Int, said: String)] = [
                ([photo], nil, rule.tokens(width: 640, height: 480, detail: .auto), "I see a 640×480 JPEG."),
                ([photo, banner], "high", 425 + 1445, "I see a 640×480 JPEG. I see a 2048×768 PNG."),
                ([banner, gif], "low", 85 + 85, "I see a 2048×768 PNG. I see a 64×64 GIF."),
            ]
            #expect(cases[0].images == 425, "OpenAI's documented 640×480: 85 + 170 × 2 tiles")
            for (urls, detail, images, said) in cases {
                let answer = try await Self.post(Self.body(urls, detail: detail), port: model.port)
                #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
                let completion = try JSONDecoder().decode(ChatCompletion.self, from: answer.body)
                let usage = try #require(completion.usage)
                #expect(usage.promptTokens == Self.textTokens + images, "\(urls.count) images at \(detail ?? "auto"): \(usage)")
                let content = try #require(completion.choices.first?.message.content)
                #expect(content.hasPrefix(said + " "), "\(content)")
                #expect(usage.completionTokens == content.split(separator: " ").count)
            }
            // Streamed: the same words, chunk by chunk, and the same usage.
            let (stream, head) = try await EventStreamClient.open(
                port: model.port, token: DevLLMTests.key, path: "/v1/chat/completions", json: Array(Self.body([photo], stream: true)))
            #expect(head.status == 200)
            var chunks: [ChatCompletionChunk] = []
            while case .event(_, _, let data) = try await stream.nextEvent(), data != "[DONE]" {
                chunks.append(try JSONDecoder().decode(ChatCompletionChunk.self, from: Data(data.utf8)))
            }
            await stream.close()
            let streamed = chunks.compactMap { $0.choices.first?.delta.content }.joined()
            #expect(streamed.hasPrefix("I see a 640×480 JPEG. "), "\(streamed)")
            #expect(chunks.last?.usage?.promptTokens == Self.textTokens + 425)
            // Text alone is billed as it always was.
            let plain = try await model.complete(DevLLMTests.request(Self.text))
            #expect(try JSONDecoder().decode(ChatCompletion.self, from: plain.body).usage?.promptTokens == Self.textTokens)
        }
    }

    @Test("A URL it cannot fetch and bytes that are not an image are a provider's 400, not an answer")
    func refusals() async throws {
        try await DevLLMTests.with { model in
            let png = SyntheticImage.bytes(.png, width: 100, height: 100)
            let cases: [(url: String, code: String)] = [
                ("https://example.com/cat.jpg", "invalid_image_url"),
                ("data:image/png;base64," + Data(png.prefix(20)).base64EncodedString(), "invalid_image_format"),
                ("data:image/jpeg;base64," + Data(png).base64EncodedString(), "invalid_image_format"),
                ("data:image/png;base64,@@@@", "invalid_image_format"),
                ("data:text/plain;base64,aGVsbG8=", "invalid_image_format"),
            ]
            for (url, code) in cases {
                let answer = try await Self.post(Self.body([url]), port: model.port)
                let text = String(decoding: answer.body, as: UTF8.self)
                #expect(answer.status == 400, "\(url.prefix(40)): \(text)")
                let error = try JSONDecoder().decode(ChatErrorBody.self, from: answer.body)
                #expect(error.error.code == code && error.error.type == "invalid_request_error", "\(url.prefix(40)): \(text)")
            }
        }
    }

    @Test("With the patch rule chosen, an image is billed by its 32-px patches")
    func patches() async throws {
        let rule = try #require(DevLLMConfiguration.imageRules["patches"])
        // 640×480 is 20 × 15 patches, times 1.62, rounded up; no cheaper `low`.
        #expect(rule.tokens(width: 640, height: 480, detail: .auto) == 486 && rule.tokens(width: 640, height: 480, detail: .low) == 486)
        let photo = SyntheticImage.dataURL(try Self.fixture("face-640x480-exif.jpg"), format: .jpeg)
        try await LocalModel.with(apiKey: DevLLMTests.key, images: rule) { port in
            for detail in ["low", "high"] {
                let answer = try await Self.post(Self.body([photo], detail: detail), port: port)
                let completion = try JSONDecoder().decode(ChatCompletion.self, from: answer.body)
                #expect(completion.usage?.promptTokens == Self.textTokens + 486, "\(detail): \(String(decoding: answer.body, as: UTF8.self))")
            }
        }
    }
}
