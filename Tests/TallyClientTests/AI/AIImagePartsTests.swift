import Foundation
import TallyAPI
import TallyTestSupport
import Testing

/// Content parts on the wire: what the SDK sends is what OpenAI's clients send, a plain message is sent as before,
/// and what is decoded keeps its text as before parts were modelled.
@Suite("AI image parts: OpenAI's wire format", .timeLimit(.minutes(1)))
struct AIImagePartsTests {
    static let jpeg = Data(SyntheticImage.bytes(.jpeg, width: 640, height: 480, exifBytes: 300))

    static func json(_ value: some Encodable) throws -> JSONValue { try JSONValue.parse(Array(try TallyJSON.encoder().encode(value))) }

    @Test("Text, data-URL and https parts encode exactly as OpenAI's clients send them")
    func partsOnTheWire() throws {
        let message = ChatMessage(role: "user", parts: [
            .text("What is in this photo?"), .image(data: Self.jpeg, mimeType: "image/jpeg", detail: .low),
            .imageURL(URL(string: "https://images.example.com/cat.png?size=2")!), .image(data: Self.jpeg, mimeType: "image/jpeg"),
        ])
        let base64 = Self.jpeg.base64EncodedString()
        let expected = try JSONValue.parse("""
            {"role":"user","content":[
              {"type":"text","text":"What is in this photo?"},
              {"type":"image_url","image_url":{"url":"data:image/jpeg;base64,\(base64)","detail":"low"}},
              {"type":"image_url","image_url":{"url":"https://images.example.com/cat.png?size=2","detail":"auto"}},
              {"type":"image_url","image_url":{"url":"data:image/jpeg;base64,\(base64)","detail":"auto"}}]}
            """)
        #expect(try Self.json(message) == expected)
        // The data URL is the image's bytes, measured as the gateway measures it.
        let url = try #require(message.parts?[1].url)
        #expect(try ImageDataURL.measure(url, maxBytes: 1 << 20).get().header == ImageHeader(format: .jpeg, width: 640, height: 480))
        #expect(try ImageDataURL.measure(url, maxBytes: 1 << 20).get().byteCount == Self.jpeg.count)
    }

    @Test("A plain-text message and request encode byte for byte as before parts existed")
    func plainTextUnchanged() throws {
        let message = ChatMessage(role: "user", content: "Hi there")
        #expect(String(decoding: try TallyJSON.encoder().encode(message), as: UTF8.self) == #"{"content":"Hi there","role":"user"}"#)
        let request = ChatCompletionRequest(model: "chat", messages: [message], maxTokens: 5)
        #expect(
            String(decoding: try TallyJSON.encoder().encode(request), as: UTF8.self)
                == #"{"max_tokens":5,"messages":[{"content":"Hi there","role":"user"}],"model":"chat"}"#)
        #expect(message.parts == nil && message.content == "Hi there")
    }

    @Test("Decoding keeps the text joined; known parts round-trip, unknown ones leave only the text")
    func decoding() throws {
        let png = SyntheticImage.dataURL(SyntheticImage.bytes(.png, width: 64, height: 64), format: .png)
        let wire = #"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"\#(png)"}},{"type":"text","text":"b"}]}"#
        let message = try TallyJSON.decoder().decode(ChatMessage.self, from: Data(wire.utf8))
        #expect(message.content == "ab" && message.parts?.count == 3)
        #expect(message.parts?[1].url == png && message.parts?[1].detail == nil && message.parts?[1].text == nil)
        #expect(try Self.json(message) == JSONValue.parse(wire))  // no detail added where none was sent

        let audio = #"{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}"#
        let withAudio = try TallyJSON.decoder().decode(ChatMessage.self, from: Data(audio.utf8))
        #expect(withAudio == ChatMessage(role: "user", content: "a"))
        let unknownDetail = #"{"role":"user","content":[{"type":"image_url","image_url":{"url":"\#(png)","detail":"ultra"}}]}"#
        #expect(try TallyJSON.decoder().decode(ChatMessage.self, from: Data(unknownDetail.utf8)) == ChatMessage(role: "user", content: ""))
        #expect(try TallyJSON.decoder().decode(ChatMessage.self, from: Data(#"{"role":"assistant","content":null}"#.utf8)).content == "")

        var edited = message
        edited.parts = nil
        #expect(edited == ChatMessage(role: "user", content: "ab"))
        edited = message
        edited.content = "c"
        #expect(edited.parts == nil && edited == ChatMessage(role: "user", content: "c"))
    }

    @Test("The SDK's hold of a request with images is its text bound plus each image's tokens at the rule")
    func holdOfParts() throws {
        let rule = AIImageRule()
        let model = AIModelSpec(name: "vision", promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 100, images: rule)
        let png = Data(SyntheticImage.bytes(.png, width: 2048, height: 768))
        let request = ChatCompletionRequest(
            model: "vision", messages: [ChatMessage(role: "user", parts: [.text("Describe"), .image(data: png, mimeType: "image/png", detail: .high),
                .image(data: Self.jpeg, mimeType: "image/jpeg", detail: .low)])], maxTokens: 10)
        let textOnly = try Self.json(ChatCompletionRequest(model: "vision", messages: [ChatMessage(role: "user", parts: [.text("Describe")])], maxTokens: 10))
        let text = PromptBound.tokens(request: try #require(textOnly.objectValue))
        #expect(try model.hold(for: request) == Int64(text + 1445 + 85 + 10))
    }
}
