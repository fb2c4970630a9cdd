import Foundation
import TallyAPI
@testable import TallyServer
import TallyTestSupport
import Testing

/// The gateway's pure readers of what a provider sends: the `usage` of an answer too long to keep (`UsageScan`) and
/// the keys taken out of a provider's messages (`KeyRedaction`).
@Suite("AI gateway: reading the upstream's answers", .timeLimit(.minutes(1)))
struct UpstreamAnswerTests {
    /// A random JSON value of depth at most `depth`, whose strings and keys often say "usage" (and escape quotes).
    static func value(_ random: inout SplitMix64, depth: Int) -> JSONValue {
        let strings = ["usage", "\"usage\":", "a\\\"b", "{\"usage\":{\"prompt_tokens\":1}}", "x", "今日", ""]
        switch random.next() % (depth > 0 ? 6 : 4) {
        case 0: return .string(strings[Int(random.next() % UInt64(strings.count))])
        case 1: return .int(Int(random.next() % 1_000))
        case 2: return .bool(random.next() % 2 == 0)
        case 3: return .null
        case 4: return .array((0..<Int(random.next() % 4)).map { _ in value(&random, depth: depth - 1) })
        default:
            var object: [JSONKey: JSONValue] = [:]
            for _ in 0..<Int(random.next() % 4) {
                object[strings[Int(random.next() % UInt64(strings.count))]] = value(&random, depth: depth - 1)
            }
            return .object(object)
        }
    }

    @Test("UsageScan finds the top-level usage a parse finds, whatever else the answer holds and however it is cut; a nested or quoted `usage` is not taken")
    func usageScanAgreesWithAParse() throws {
        var random = SplitMix64(seed: 4_211)
        var found = 0
        for _ in 0..<2_000 {
            var answer: [JSONKey: JSONValue] = ["choices": Self.value(&random, depth: 3), "id": Self.value(&random, depth: 2)]
            if random.next() % 3 != 0 {
                let usage = ChatUsage(promptTokens: Int(random.next() % 10_000), completionTokens: Int(random.next() % 10_000))
                answer["usage"] = try JSONValue.parse(Array(try JSONEncoder().encode(usage)))
            } else if random.next() % 2 == 0 {
                answer["usage"] = Self.value(&random, depth: 2)  // not a usage object: nothing to charge from
            }
            let bytes = JSONValue.object(answer).bytes
            let expected = ChatCompletionsController.usage(try JSONValue.parse(bytes)["usage"])
            var scan = UsageScan()
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + 1 + Int(random.next() % 64))
                scan.feed(bytes[start..<end])
                start = end
            }
            #expect(scan.usage == expected, "\(String(decoding: bytes, as: UTF8.self))")
            if expected != nil { found += 1 }
        }
        #expect(found > 1_000, "the property saw usages (\(found))")
        // Spaced JSON, the usage last after a long answer, as providers write it.
        var scan = UsageScan()
        let spaced = #"{ "choices" : [ { "message" : { "content" : "\#(String(repeating: "x\"usage\": ", count: 1_000))" } } ] , "usage" : { "prompt_tokens" : 12 , "completion_tokens" : 7 } }"#
        scan.feed(Array(spaced.utf8))
        #expect(scan.usage == ChatUsage(promptTokens: 12, completionTokens: 7))
    }

    @Test("KeyRedaction takes out the configured key and key-shaped text, and keeps what a provider says about the request")
    func redaction() {
        let redaction = KeyRedaction(key: "my-very-own-provider-key-42")
        let cases: [(String, String)] = [
            ("Incorrect API key provided: sk-proj-abc*****************xyz1. See the docs.", "Incorrect API key provided: [redacted] See the docs."),
            (#"Headers: {"Authorization": "Bearer my-very-own-provider-key-42"}"#, #"Headers: {"Authorization": "Bearer [redacted]"}"#),
            ("the key my-very-own-provider-key-42 is revoked", "the key [redacted] is revoked"),
            ("authorization=Basic dXNlcjpwYXNz", "authorization=Basic [redacted]"),
            ("x-api-key: QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", "x-api-key: [redacted]"),
            (#"token=abcdefghijklmnop1234 and api_key="ZZZZZZZZZZZZZZZZZZZZ""#, #"token=[redacted] and api_key="[redacted]""#),
            ("AIzaSyA1234567890abcdefghijklmnopqrstu is not valid", "[redacted] is not valid"),
            ("gsk_0123456789abcdefABCDEF and xai-0123456789abcdef", "[redacted] and [redacted]"),
            ("secret 0123456789abcdef0123456789abcdef0123", "secret [redacted]"),
        ]
        for (text, expected) in cases { #expect(redaction.redact(text) == expected, "\(text)") }
        let kept = [
            "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (5000 in the messages, 4000 in the completion).",
            "Invalid 'messages[0].content': string too long. Expected a string with maximum length 1048576, but got 2000000.",
            "The model `meta-llama/Llama-3.3-70B-Instruct-Turbo` does not exist.",
            "Unrecognized request argument supplied: top_k",
        ]
        for text in kept { #expect(redaction.redact(text) == text) }
    }
}
