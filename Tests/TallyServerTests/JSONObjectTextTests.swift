import Foundation
import NIOCore
@_spi(Gateway) import TallyAPI
import TallyTestSupport
import Testing

@testable import TallyServer

/// The gateway's reading of a body (``JSONObjectText``): each top-level member's place in the text, so the client's
/// `messages` go upstream as written, and every base64 `data:` URL measured where it lies, with the same answer as
/// the whole parse gives, or read again whole when one is not an image's URL.
@Suite("JSON object text", .timeLimit(.minutes(1)))
struct JSONObjectTextTests {
    static func text(_ text: String, leavingDataURLs: Bool = true) throws -> JSONObjectText {
        try Array(text.utf8).withUnsafeBufferPointer { try JSONObjectText($0, leavingDataURLs: leavingDataURLs) }
    }

    static func member(_ name: String, _ text: String) throws -> String? {
        try Self.text(text).members[JSONKey(name)].map { String(decoding: Array(text.utf8)[$0], as: UTF8.self) }
    }

    @Test("A member's value is found whatever precedes it: strings with quotes, backslashes and brackets, nesting, whitespace, escaped keys")
    func members() throws {
        #expect(try Self.member("m", #"{"m":1}"#) == "1")
        #expect(try Self.member("m", #" { "a" : "x\"}]" , "b":[{"c":"\\"},[]], "m" : [ {"t":"\\\"" } ] } "#) == #"[ {"t":"\\\"" } ]"#)
        #expect(try Self.member("m", #"{"a":{"m":2},"m":"v\\"}"#) == #""v\\""#)
        #expect(try Self.member("m", "{\"a\":true,\n\t\"m\":null\r\n}") == "null")
        #expect(try Self.member("m", #"{"a":-1.5e3,"m":false}"#) == "false")
        #expect(try Self.member("m", #"{"\u006d":1}"#) == "1")
        #expect(try Self.member("m", #"{"a":{"m":2}}"#) == nil)
        #expect(try Self.text("[1]").members.isEmpty)
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
            let parsed = try Self.text(text)
            let whole = try JSONValue.parse(bytes)
            #expect(parsed.value == whole && parsed.dataURLs.isEmpty)
            #expect(Set(parsed.members.keys) == Set(fields.keys.map { JSONKey($0) }), "\(text)")
            for (key, value) in fields {
                let range = try #require(parsed.members[JSONKey(key)])
                #expect(try JSONValue.parse(Array(bytes[range])) == value, "\(text)")
            }
        }
    }

    @Test("A base64 data: URL is left in the text under a stand-in; any other string is read as a string")
    func dataURLsLeft() throws {
        let left = [
            "data:image/png;base64,iVBORw0KGgo=", "DATA:image/jpeg;base64,/9j/4AAQ", "data:image/gif;name=a b;base64,R0lGODlh",
            "data:image/png;base64,", "data:image/png;base64,AA==", "data:,QUJD", "data:text/plain;base64,SGk=",
        ]
        for url in left {
            let body = #"{"a":[{"u":""# + url + #""}],"b":"x"}"#
            let parsed = try Self.text(body)
            let (standIn, range) = try #require(parsed.dataURLs.first, "\(url)")
            #expect(parsed.dataURLs.count == 1 && String(decoding: Array(body.utf8)[range], as: UTF8.self) == url)
            #expect(parsed.value["a"].flatMap { if case .array(let items) = $0 { items.first?["u"] } else { nil } } == .string(standIn) && standIn.hasPrefix("data:tally-stand-in;"))
            let whole = try JSONValue.parse(body)
            #expect(try Self.text(body, leavingDataURLs: false).value == whole)
        }
        let kept = [
            #"data:image/png;base64,AA\/A"#, "data:image/png;base64,AA A", "data:image/png;base64,AAA===", #"data:image/p\"ng;base64,AA"#,
            "data:image/png;base64,AAé", "dat:image/png;base64,AA", "data:image/png;base64" + String(repeating: "A", count: 300),
            "data:" + String(repeating: "x", count: 300) + ",AA", #"data:image/png;base64,AA\u0041"#, "https://example.com/a.png",
            #"data\u001aimage/png;base64,AA=="#,
        ]
        for url in kept {
            let body = #"{"u":""# + url + #""}"#
            let parsed = try Self.text(body)
            let whole = try JSONValue.parse(body)
            #expect(parsed.dataURLs.isEmpty && parsed.value == whole, "\(url)")
        }
        // A control byte where the colon goes is no scheme: written raw it is not JSON at all, and no URL is left.
        let control = Array(#"{"u":"data"#.utf8) + [0x1A] + Array(#"image/png;base64,AA=="}"#.utf8)
        #expect(throws: JSONParseError.self) { try control.withUnsafeBufferPointer { try JSONObjectText($0, leavingDataURLs: true) } }
        #expect(ImageDataURL.measure("data\u{1A}image/png;base64,AA==", maxBytes: 100) == .failure(.notBase64DataURL))
        // The stand-ins differ from one parse to the next: no client can write one.
        let body = #"{"u":"data:image/png;base64,AA=="}"#
        let first = try Self.text(body).dataURLs.keys, second = try Self.text(body).dataURLs.keys
        #expect(first != second)
    }

    static let vision = AIModelSpec(
        name: "vision", upstreamModel: "up-vision", promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 50,
        images: AIImageRule(maxBytes: 1 << 16))
    static let gateway = AIConfiguration(upstream: AIUpstream(baseURL: "http://127.0.0.1:1/v1", apiKey: nil), models: [vision])

    /// The hold and the measure of `body`, or its refusal's code.
    static func outcome(_ body: String) -> String {
        do {
            let request = try ChatRequest.parse(ByteBuffer(string: body), user: "u", configuration: gateway)
            return "\(request.maxCost) \(request.measure)"
        } catch {
            return "\(error.body.error.code)"
        }
    }

    /// The same outcome from the whole parse: every image measured from its string.
    static func wholeOutcome(_ body: String) throws -> String {
        let object = try #require(try JSONValue.parse(body).objectValue)
        do {
            let measure = try AIPricing.measure(request: object, model: vision)
            return "\(vision.cost(promptTokens: measure.tokens, completionTokens: 50)) \(measure)"
        } catch {
            return "\(error.code)"
        }
    }

    @Test("Images measured where they lie answer as the whole parse: holds, refusals, a data: URL as text, the fingerprint")
    func measuredInPlace() throws {
        var generator = SplitMix64(seed: 4_401)
        let images = [
            SyntheticImage.bytes(.png, width: 640, height: 480), SyntheticImage.bytes(.jpeg, width: 2_048, height: 768, exifBytes: 20_000),
            SyntheticImage.bytes(.gif, width: 64, height: 64), SyntheticImage.bytes(.webp, width: 4_096, height: 4_096),
            SyntheticImage.bytes(.png, width: 100, height: 100) + [UInt8](repeating: 7, count: 70_000),
        ]
        for round in 0..<400 {
            var parts: [String] = []
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let image = images.randomElement(using: &generator)!
                var url = "data:image/\(["png", "jpeg", "gif", "webp"].randomElement(using: &generator)!);base64,"
                    + Data(image).base64EncodedString()
                switch Int.random(in: 0..<8, using: &generator) {
                case 0: url.removeLast()  // a length not a multiple of 4
                case 1: url = String(url.prefix(40))  // a cut header
                case 2: url = url.replacingOccurrences(of: "/", with: "\\/")  // an escape: read as a string
                default: break
                }
                parts.append(
                    Int.random(in: 0..<5, using: &generator) == 0
                        ? #"{"type":"text","text":""# + url + #""}"#
                        : #"{"type":"image_url","image_url":{"url":""# + url + #"","detail":"auto"}}"#)
            }
            let body = #"{"model":"vision","max_tokens":50,"messages":[{"role":"user","content":["# + parts.joined(separator: ",") + "]}]}"
            let outcome = Self.outcome(body)
            let whole = try Self.wholeOutcome(body)
            #expect(outcome == whole, "round \(round)")
            if let request = try? ChatRequest.parse(ByteBuffer(string: body), user: "u", configuration: Self.gateway) {
                // Upstream: the messages byte for byte; the fingerprint: the whole body's canonical form.
                #expect(String(buffer: request.upstreamBody.joined).contains(#""messages":[{"role":"user","content":["# + parts.joined(separator: ",")))
                let whole = try JSONValue.parse(body)
                #expect(request.canonicalBody == whole.bytes)
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
