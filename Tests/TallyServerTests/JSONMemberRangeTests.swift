import Foundation
import NIOCore
import TallyAPI
import Testing

@testable import TallyServer

/// Finding a top-level member's value in a body's text, so the gateway forwards a client's `messages` as written.
@Suite("JSON member range", .timeLimit(.minutes(1)))
struct JSONMemberRangeTests {
    static func range(_ name: String, _ text: String) -> String? {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { JSONMemberRange.of(name, in: $0) }.map { String(decoding: bytes[$0], as: UTF8.self) }
    }

    @Test("The value is found whatever precedes it: strings with quotes, backslashes and brackets, nesting, whitespace")
    func found() {
        #expect(Self.range("m", #"{"m":1}"#) == "1")
        #expect(Self.range("m", #" { "a" : "x\"}]" , "b":[{"c":"\\"},[]], "m" : [ {"t":"\\\"" } ] } "#) == #"[ {"t":"\\\"" } ]"#)
        #expect(Self.range("m", #"{"a":{"m":2},"m":"v\\"}"#) == #""v\\""#)
        #expect(Self.range("m", "{\"a\":true,\n\t\"m\":null\r\n}") == "null")
        #expect(Self.range("m", #"{"a":-1.5e3,"m":false}"#) == "false")
    }

    @Test("Absent, or a key written with escapes: nil (the gateway writes the messages again)")
    func absent() {
        #expect(Self.range("m", #"{"a":{"m":2}}"#) == nil)
        #expect(Self.range("m", #"{"\u006d":1}"#) == nil)
        #expect(Self.range("m", "[1]") == nil)
        #expect(Self.range("m", "{}") == nil)
        // A name with a backslash is never matched by the raw text of an escaped key (found by the random test).
        #expect(Self.range(#"\""#, #"{"\"":1,"\\\"":2}"#) == nil)
        #expect(Self.range("m", #"{"m""#) == nil)
        #expect(Self.range("m", #"{"m":"abc"#) == nil)
        #expect(Self.range("m", #"{"m":[1,2"#) == nil)
    }

    @Test("Random objects, written with random whitespace and escapes: each member's range parses to its value")
    func randomObjects() throws {
        var generator = SplitMix64(seed: 44)
        for _ in 0..<2_000 {
            var fields: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 1...5, using: &generator) {
                fields[Self.text(&generator, length: 6)] = Self.value(&generator, depth: 0)
            }
            var text = ""
            Self.write(.object(Dictionary(uniqueKeysWithValues: fields.map { (JSONKey($0.key), $0.value) })), to: &text, &generator)
            let bytes = Array(text.utf8)
            let parsed = try JSONValue.parse(bytes)
            for (key, value) in fields {
                let range = bytes.withUnsafeBytes { JSONMemberRange.of(key, in: $0) }
                // A key the writer escaped is not found; one written plainly always is, to its exact value.
                guard let range else { continue }
                #expect(try JSONValue.parse(Array(bytes[range])) == value, "\(text)")
                #expect(parsed[key] == value)
            }
            // Keys are written with only the escapes JSON requires: one that needs none is found.
            for key in fields.keys where !key.contains("\\") && !key.contains("\"") && key.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) {
                #expect(bytes.withUnsafeBytes { JSONMemberRange.of(key, in: $0) } != nil, "\(text)")
            }
        }
    }

    @Test("The gateway's upstream body carries the client's messages byte for byte, the rest its own")
    func upstreamMessagesAsSent() throws {
        let messages = #"[ {"role" : "user", "content":[{"type":"text","text":"a \"q\" \u00e9 \\ }]"}]} ]"#
        let body = #"{"model":"chat", "max_tokens": 40, "messages": "# + messages + #" , "stream":false}"#
        let request = try ChatRequest.parse(ByteBuffer(string: body), user: "user-1", configuration: AIConfigurationTests.gateway)
        let sent = String(buffer: request.upstreamBody.joined)
        #expect(sent.contains(messages))
        let upstream = try JSONValue.parse(sent)
        #expect(upstream["model"] == .string("gpt-x") && upstream["user"] == .string("user-1") && upstream["max_tokens"] == nil)
        #expect(upstream["messages"] == (try JSONValue.parse(body))["messages"])
    }

    static let alphabet: [Character] = ["a", "m", "Z", "0", " ", "\"", "\\", "/", "{", "}", "[", "]", ",", ":", "\n", "\t", "\u{01}", "é", "日", "🎉"]

    static func text(_ generator: inout SplitMix64, length: Int) -> String {
        String((0..<Int.random(in: 0...length, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
    }

    static func value(_ generator: inout SplitMix64, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth < 3 ? 7 : 5), using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .int(Int.random(in: -1_000...1_000, using: &generator))
        case 3, 4: return .string(text(&generator, length: 40))
        case 5: return .array((0..<Int.random(in: 0...3, using: &generator)).map { _ in value(&generator, depth: depth + 1) })
        default:
            var fields: [JSONKey: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &generator) { fields[JSONKey(text(&generator, length: 4))] = value(&generator, depth: depth + 1) }
            return .object(fields)
        }
    }

    /// JSON text of `value` with random whitespace between tokens, and some characters escaped that need not be.
    static func write(_ value: JSONValue, to out: inout String, _ generator: inout SplitMix64) {
        func space() { out += ["", "", " ", "\n", " \t", "\r\n  "].randomElement(using: &generator)! }
        func string(_ text: String, key: Bool = false) {
            out += "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "/" where !key && Bool.random(using: &generator): out += "\\/"
                case _ where scalar.value < 0x20 || (!key && scalar.isASCII && Int.random(in: 0..<20, using: &generator) == 0):
                    out += String(format: "\\u%04x", scalar.value)
                default: out.unicodeScalars.append(scalar)
                }
            }
            out += "\""
        }
        space()
        switch value {
        case .object(let fields):
            out += "{"
            for (offset, key) in fields.keys.shuffled(using: &generator).enumerated() {
                if offset > 0 { out += "," }
                space(); string(key.string, key: true); space(); out += ":"
                write(fields[key]!, to: &out, &generator)
            }
            space(); out += "}"
        case .array(let items):
            out += "["
            for (offset, item) in items.enumerated() {
                if offset > 0 { out += "," }
                write(item, to: &out, &generator)
            }
            space(); out += "]"
        case .string(let text): string(text)
        default: out += value.text
        }
        space()
    }
}
