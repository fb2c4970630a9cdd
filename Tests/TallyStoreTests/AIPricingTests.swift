import TallyAPI
import TallyStore
import Testing

/// The gateway's pure price rules: what a call costs in wallet tokens, and the prompt bound it holds for.
@Suite("AI pricing", .timeLimit(.minutes(1)))
struct AIPricingTests {
    static let model = AIModelSpec(name: "chat", promptTokensPerCredit: 1_000, completionTokensPerCredit: 250, maxCompletionTokens: 1_024)

    @Test("A cost is the exact sum of both prices rounded up once: anything used costs at least 1, nothing costs 0")
    func costRoundsUpOnce() {
        #expect(Self.model.cost(promptTokens: 0, completionTokens: 0) == 0)
        #expect(Self.model.cost(promptTokens: 1, completionTokens: 0) == 1)
        #expect(Self.model.cost(promptTokens: 1_000, completionTokens: 0) == 1)
        #expect(Self.model.cost(promptTokens: 1_001, completionTokens: 0) == 2)
        // 500 prompt (0.5) + 125 completion (0.5) = exactly 1, not 2 as two roundings would say.
        #expect(Self.model.cost(promptTokens: 500, completionTokens: 125) == 1)
        #expect(Self.model.cost(promptTokens: 500, completionTokens: 126) == 2)
    }

    @Test("A cost never falls when either count grows (so the hold for the bounds covers any real usage within them)")
    func costIsMonotonic() {
        var generator = SplitMix64(seed: 21)
        for _ in 0..<2_000 {
            let prompt = Int(generator.next() % 200_000)
            let completion = Int(generator.next() % 5_000)
            let cost = Self.model.cost(promptTokens: prompt, completionTokens: completion)
            #expect(cost <= Self.model.cost(promptTokens: prompt + Int(generator.next() % 50), completionTokens: completion))
            #expect(cost <= Self.model.cost(promptTokens: prompt, completionTokens: completion + Int(generator.next() % 50)))
            // Within one wallet token of the exact price, and never under it.
            let exact = Double(prompt) / 1_000 + Double(completion) / 250
            #expect(Double(cost) >= exact - 1e-9 && Double(cost) < exact + 1)
        }
    }

    @Test("The completion limit is the request's when lower, else the model's cap")
    func completionLimit() {
        #expect(Self.model.completionLimit(requested: nil) == 1_024)
        #expect(Self.model.completionLimit(requested: 100) == 100)
        #expect(Self.model.completionLimit(requested: 5_000) == 1_024)
        #expect(Self.model.completionLimit(requested: -3) == 0)
    }

    @Test("The prompt bound counts every byte and the framing: Japanese text is bounded by its bytes, not chars/4")
    func promptBound() {
        let japanese = "今日の運勢を教えてください。仕事と恋愛について詳しく。"
        let bytes = japanese.utf8.count + "user".utf8.count
        let bound = PromptBound.tokens(messageBytes: [bytes])
        #expect(bound == bytes + PromptBound.tokensPerMessage + PromptBound.replyTokens)
        #expect(bound > japanese.count * 2, "chars/4 would say \(japanese.count / 4)")
        #expect(PromptBound.tokens(messageBytes: []) == PromptBound.replyTokens)
    }

    @Test("The bound and the gateway's allow-list are one list: every field taken as prompt adds its bytes to the bound, every other field adds nothing")
    func boundFollowsTheAllowList() throws {
        let base: [JSONKey: JSONValue] = ["model": .string("chat"), "messages": .array([.object(["role": .string("user"), "content": .string("hi")])])]
        let without = PromptBound.tokens(request: base)
        #expect(ChatRequestFields.all.values.contains(.prompt) && ChatRequestFields.all["messages"] == .prompt)
        for (field, kind) in ChatRequestFields.all where field != "messages" {
            let value = JSONValue.object(["text": .string(String(repeating: "今", count: 50))])
            var request = base
            request[field] = value
            let added = PromptBound.tokens(request: request) - without
            #expect(added == (kind == .prompt ? value.bytes.count : 0), "\(field) (\(kind)) added \(added)")
        }
        #expect(Set(PromptBound.promptFields) == Set(ChatRequestFields.all.filter { $0.value == .prompt }.keys).subtracting(["messages"]))
    }
}
