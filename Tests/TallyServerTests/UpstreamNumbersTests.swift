import Foundation
import TallyAPI
@testable import TallyServer
import Testing

/// Numbers the AI provider sends are outside numbers too (issue 43, finding 1): usage counts near `Int.max` cost at most
/// the hold and never trap (their sum and their price overflowed 64 bits), and the price stays exact below that.
@Suite("Numbers from the upstream", .timeLimit(.minutes(1)))
struct UpstreamNumbersTests {
    @Test("Usage counts at the edge of 64 bits are read, summed and priced without a trap; the charge is the hold")
    func hugeUsage() throws {
        let json = #"{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":1}"#
        let usage = try #require(ChatCompletionsController.usage(try JSONValue.parse(Array(json.utf8))))
        #expect(usage.totalTokens == .max)
        let request = try AIGatewayTests.bound("hello")
        let charge = ChatCharge.of(request, usage: usage, chunks: 0)
        #expect(charge.amount == request.maxCost && charge.fromUsage)
        let model = AIModelSpec(name: "m", promptTokensPerCredit: 7, completionTokensPerCredit: 3, maxCompletionTokens: 10)
        // (2⁶³ − 1)/7 + (2⁶³ − 1)/3, rounded up: it fits, exactly; with a credit per token it does not.
        #expect(model.cost(promptTokens: .max, completionTokens: .max) == Int64.max / 7 + Int64.max / 3 + 1)
        let perToken = AIModelSpec(name: "m", promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 10)
        #expect(perToken.cost(promptTokens: .max, completionTokens: 1) == .max)
        #expect(model.cost(promptTokens: .max, completionTokens: 0) == Int64.max / 7 + (Int64.max % 7 == 0 ? 0 : 1))
        #expect(model.cost(promptTokens: 0, completionTokens: .max) == Int64.max / 3 + (Int64.max % 3 == 0 ? 0 : 1))
        #expect(model.cost(promptTokens: .min, completionTokens: -5) == 0)
    }

    @Test("The price is exact: ⌈p/pp + c/cp⌉, as the plain formula gives wherever it does not overflow")
    func exactPrice() {
        var random = SplitMix64(seed: 51)
        for _ in 0..<20_000 {
            let (pp, cp) = (Int(random.next() % 1_000_000) + 1, Int(random.next() % 1_000_000) + 1)
            let (p, c) = (Int(random.next() % 10_000_000), Int(random.next() % 10_000_000))
            let model = AIModelSpec(name: "m", promptTokensPerCredit: pp, completionTokensPerCredit: cp, maxCompletionTokens: 10)
            let denominator = Int64(pp) * Int64(cp)
            let plain = (Int64(p) * Int64(cp) + Int64(c) * Int64(pp) + denominator - 1) / denominator
            #expect(model.cost(promptTokens: p, completionTokens: c) == plain, "p=\(p) c=\(c) pp=\(pp) cp=\(cp)")
        }
    }
}
