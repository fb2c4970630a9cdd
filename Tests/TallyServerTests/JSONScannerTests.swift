import Foundation
import TallyAPI
import Testing

@testable import TallyServer

/// The pass over request bodies that refuses what `JSONDecoder` would let through.
@Suite("JSON body scanner", .timeLimit(.minutes(1)))
struct JSONScannerTests {
    static func problem(_ text: String, integers: Set<String> = []) -> JSONScanner.Problem? {
        Array(text.utf8).withUnsafeBytes { JSONScanner.firstProblem(in: $0, integerFields: integers) }
    }

    static let valid = [
        "{}", "[]", "0", "-0", "\"x\"", "true", "false", "null", " \t\r\n{ } \n", "\u{FEFF}{}", "{\"\":1}",
        #"{"a" : [1, 2.5e-3, {"b":null}], "c":"\u00e9\"\\\/\b\f\n\r\t"}"#, #"[{"a":1},{"a":2}]"#, #"{"a":{"a":1}}"#,
        #"{"a":"b","A":"c"}"#, #"[1e3, 1E+3, -1.5E-3, 0.0, 10, -0.5]"#, #""\ud83c\udf89""#, #"{"a":1,"b":{"c":[],"d":{}}}"#,
        #"[[[[{"a":[{"a":[]}]}]]]]"#, "\"é 日本 🎉\"",
    ]

    @Test("Well-formed JSON passes", arguments: valid)
    func wellFormed(_ text: String) {
        #expect(Self.problem(text) == nil)
    }

    static let malformed = [
        "", " ", "{", "}", "[", "]", #"{"a"}"#, #"{"a":}"#, #"{"a":1,}"#, "[1,]", "[,1]", "{,}", #"{"a":1 "b":2}"#, "[1 2]",
        "{'a':1}", "{a:1}", "01", "-01", "1.", ".5", "+1", "-", "1e", "1e+", "1.e3", "NaN", "Infinity", "tru", "nul", "falsey",
        #""abc"#, #""a\x""#, #""\u12""#, #""\u12G4""#, "\"a\u{01}b\"", "\"tab\there\"", #"{"a":1}}"#, "[1]]",
        #"{"a":1} {"b":2}"#, "/* c */ {}", #"{"a":[}"#, "[{]", "[1}", #"{"a":1]"#, #"{"a" 1}"#, #"{1:2}"#, "\u{FEFF}",
        "[" + String(repeating: "[", count: 10_000), String(repeating: "]", count: 3),
    ]

    @Test("Text RFC 8259 refuses is malformed, including what JSONDecoder accepts (a trailing comma)", arguments: malformed)
    func refused(_ text: String) {
        #expect(Self.problem(text) == .malformed)
    }

    static let duplicates: [(String, String)] = [
        (#"{"a":1,"a":2}"#, "a"),
        (#"{"a":1,"b":{"c":1,"c":2}}"#, "c"),
        (#"{"amount":5,"\u0061mount":6}"#, "amount"),
        (#"[{"k":1},{"k":1,"k":1}]"#, "k"),
        (#"{"a\/b":1,"a/b":2}"#, "a/b"),
        (#"{"\ud83c\udf89":1,"🎉":2}"#, "🎉"),
        ("{\"\u{E9}\":1,\"\\u00e9\":2}", "\u{E9}"),
        (#"{"x":{"y":[{"z":1}]},"x":null}"#, "x"),
    ]

    @Test("A key repeated in one object is named, compared after unescaping, code point by code point", arguments: duplicates)
    func duplicateKeys(_ text: String, key: String) {
        #expect(Self.problem(text) == .duplicateKey(key))
    }

    @Test("Keys spelt differently but canonically equivalent (NFC and NFD, a singleton such as the Kelvin sign) are two keys, as RFC 8259 compares them")
    func canonicallyEquivalentKeys() {
        for (first, second) in [("\u{E9}", "e\u{301}"), ("caf\u{E9}", "cafe\u{301}"), ("\u{212A}", "K"), ("\u{1E9B}\u{323}", "\u{17F}\u{323}\u{307}")] {
            #expect(first == second, "Swift's String takes them as one")
            #expect(Self.problem("{\"\(first)\":1,\"\(second)\":2}") == nil, "\(first) / \(second)")
            #expect(Self.problem("{\"\(first)\":1,\"\(first)\":2}") == .duplicateKey(first))
        }
    }

    static let integers: Set<String> = ["amount", "n"]
    static let integerCases: [(String, JSONScanner.Problem?)] = [
        (#"{"amount":5}"#, nil),
        (#"{"amount":-3,"n":0}"#, nil),
        (#"{"amount":-0}"#, nil),
        (#"{"amount":9223372036854775807}"#, nil),
        (#"{"amount":-9223372036854775808}"#, nil),
        (#"{"other":1.5,"amount":1}"#, nil),
        (#"{"nested":{"amount":1.5},"list":[1.5,{"n":2.5}]}"#, nil),
        (#"{"amount":"5.0"}"#, nil),
        (#"{"amount":[1.5]}"#, nil),
        (#"{"amount":{"inner":1},"z":1.5}"#, nil),
        ("[5.0]", nil),
        ("5.0", nil),
        (#"{"amount":5.0}"#, .notAnInteger(field: "amount")),
        (#"{"amount":1e3}"#, .notAnInteger(field: "amount")),
        (#"{"amount":5E0}"#, .notAnInteger(field: "amount")),
        (#"{"amount":-0.0}"#, .notAnInteger(field: "amount")),
        (#"{"amount":1E-400}"#, .notAnInteger(field: "amount")),
        (#"{"amount":1,"n":0.5}"#, .notAnInteger(field: "n")),
        (#"{"x":{"y":1},"amount":1.0}"#, .notAnInteger(field: "amount")),
        (#"{"amount":[1],"n":2.0}"#, .notAnInteger(field: "n")),
        (#"{"\u0061mount":1e0}"#, .notAnInteger(field: "amount")),
        (#"{"amount":9223372036854775808}"#, .integerOutOfRange(field: "amount")),
        (#"{"amount":-9223372036854775809}"#, .integerOutOfRange(field: "amount")),
        (#"{"n":99999999999999999999999}"#, .integerOutOfRange(field: "n")),
    ]

    @Test("Top-level integer fields must be integers within 64 bits; other numbers keep fractions", arguments: integerCases)
    func integerFields(_ text: String, expected: JSONScanner.Problem?) {
        #expect(Self.problem(text, integers: Self.integers) == expected)
    }

    @Test("Deep nesting and many keys: no recursion, linear")
    func largeBodies() {
        let depth = 30_000
        #expect(Self.problem(String(repeating: "[", count: depth) + String(repeating: "]", count: depth)) == nil)
        #expect(Self.problem(String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)) == nil)
        let keys = (0..<6000).map { #""k\#($0)":\#($0)"# }
        #expect(Self.problem("{" + keys.joined(separator: ",") + "}") == nil)
        #expect(Self.problem("{" + keys.joined(separator: ",") + #","k5999":0}"#) == .duplicateKey("k5999"))
    }

    @Test("Documents JSONSerialization writes pass; the same with a key repeated do not")
    func agreesWithFoundation() throws {
        for _ in 0..<300 {
            let value = Self.randomValue(depth: 0)
            let data = try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .prettyPrinted])
            let text = String(decoding: data, as: UTF8.self)
            #expect(Self.problem(text) == nil, "\(text)")
            if let object = value as? [String: Any], let key = object.keys.first {
                // Repeat the first key at the end of the top-level object.
                let quoted = String(decoding: try JSONSerialization.data(withJSONObject: key, options: .fragmentsAllowed), as: UTF8.self)
                let repeated = String(text.dropLast()) + ",\(quoted):null}"
                #expect(Self.problem(repeated) == .duplicateKey(key), "\(repeated)")
            }
        }
    }

    static let strings = ["", "a", "amount", "é", "e\u{301}x", "日本", "🎉", "quote\"", "back\\slash", "tab\t", "\u{1}", "/"]

    /// A random JSON value (a failing one is printed in full by the test).
    static func randomValue(depth: Int) -> Any {
        switch Int.random(in: 0..<(depth < 4 ? 7 : 5)) {
        case 0: return Int.random(in: -1_000_000...1_000_000)
        case 1: return Double.random(in: -1e6...1e6)
        case 2: return strings.randomElement()!
        case 3: return Bool.random()
        case 4: return NSNull()
        case 5: return (0..<Int.random(in: 0...4)).map { _ in randomValue(depth: depth + 1) }
        default:
            var object: [String: Any] = [:]
            for _ in 0..<Int.random(in: 1...4) {
                object[strings.randomElement()! + "\(Int.random(in: 0...3))"] = randomValue(depth: depth + 1)
            }
            return object
        }
    }

    @Test("Each request type lists exactly its integer fields")
    func integerFieldsMatchTheTypes() {
        let samples: [any JSONRequestBody] = [
            GuestSignInRequest(deviceId: ""), RefreshRequest(refreshToken: ""), CredentialsRequest(email: "", password: ""),
            UpdateMeRequest(timezone: "", language: ""), CreateHoldRequest(amount: 1, ttlSeconds: 1), CaptureHoldRequest(amount: 1),
            GrantRequest(amount: 1, reason: ""), PremiumRequest(until: Date()),
        ]
        for sample in samples {
            let integers = Mirror(reflecting: sample).children.filter { $0.value is any BinaryInteger }.compactMap(\.label)
            #expect(Set(integers) == type(of: sample).integerFields, "\(type(of: sample))")
        }
    }
}
