import Foundation
import TallyAPI
import Testing

/// ``ChatCompletion`` and ``ChatCompletionChunk`` are one generic envelope: each still reads and writes OpenAI's
/// wire format, names its own `object`, and keeps the member names apps use (`ChatCompletion.Choice`, `ChatCompletionChunk.Delta`).
@Suite(.timeLimit(.minutes(1)))
struct ChatAnswerWireTests {
    @Test func wholeAnswerReadsOpenAIsFormat() throws {
        let body = #"""
            {"id":"chatcmpl-9","object":"chat.completion","created":1800000000,"model":"gpt-4o-mini",
             "choices":[{"index":0,"message":{"role":"assistant","content":"A cat."},"finish_reason":"stop"}],
             "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}
            """#
        let answer = try JSONDecoder().decode(ChatCompletion.self, from: Data(body.utf8))
        let choice: ChatCompletion.Choice = try #require(answer.choices.first)
        #expect(choice.message.content == "A cat.")
        #expect(choice.finishReason == "stop")
        #expect(answer.usage == ChatUsage(promptTokens: 12, completionTokens: 3))
        #expect(answer.object == "chat.completion")
    }

    @Test func eachEnvelopeNamesItsObject() throws {
        let whole = ChatCompletion(
            id: "a", created: 1, model: "m", choices: [.init(index: 0, message: ChatMessage(role: "assistant", content: "x"), finishReason: nil)],
            usage: nil)
        let delta: ChatCompletionChunk.Delta = .init(role: "assistant", content: "")
        let chunk = ChatCompletionChunk(id: "a", created: 1, model: "m", choices: [.init(index: 0, delta: delta, finishReason: nil)])
        let wholeJSON = try JSONSerialization.jsonObject(with: JSONEncoder().encode(whole)) as? [String: Any]
        let chunkJSON = try JSONSerialization.jsonObject(with: JSONEncoder().encode(chunk)) as? [String: Any]
        #expect(wholeJSON?["object"] as? String == "chat.completion")
        #expect(chunkJSON?["object"] as? String == "chat.completion.chunk")
        let choices = try #require(chunkJSON?["choices"] as? [[String: Any]])
        #expect(choices.first?.keys.sorted() == ["delta", "index"])  // a nil finish_reason is left out, as before
        #expect(try JSONDecoder().decode(ChatCompletionChunk.self, from: JSONEncoder().encode(chunk)) == chunk)
    }
}
