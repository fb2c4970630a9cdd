import Foundation
import TallyAPI
import TallyTestSupport
import Testing

@Suite("JSONValue: strict parsing, canonical bytes, merge patches", .timeLimit(.minutes(1)))
struct JSONValueTests {
    @Test("Canonical bytes: compact, keys sorted by UTF-8, numbers kept as written, only required escapes")
    func canonical() throws {
        let value = try JSONValue.parse(#" { "b" : [1, 2.50, -0, 1e3, true, null], "a": "x/\"y\"\n\u00e9\ud83d\ude00", "B": {} } "#)
        #expect(value.text == #"{"B":{},"a":"x/\"y\"\né😀","b":[1,2.50,-0,1e3,true,null]}"#)
        #expect(try JSONValue.parse(value.bytes) == value)
        #expect(try JSONValue.parse("12345678901234567890") == .number("12345678901234567890"))
    }

    @Test("Refuses what RFC 8259 refuses, duplicate keys, lone surrogates, invalid UTF-8 and deep nesting")
    func refuses() {
        let bad: [[UInt8]] = [
            Array("{\"a\":1,}".utf8), Array("[1,]".utf8), Array("01".utf8), Array("1.".utf8), Array("-".utf8), Array("+1".utf8),
            Array("{\"a\":1,\"a\":2}".utf8), Array("\"\\ud800\"".utf8), Array("\"\\udc00x\"".utf8), Array("\"\u{01}\"".utf8),
            Array("nul".utf8), Array("[1] [2]".utf8), Array("{'a':1}".utf8), [0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [],
            Array(String(repeating: "[", count: JSONValue.maxDepth + 1).utf8) + Array(String(repeating: "]", count: JSONValue.maxDepth + 1).utf8),
        ]
        for bytes in bad {
            #expect(throws: JSONParseError.self, "\(String(decoding: bytes, as: UTF8.self))") { try JSONValue.parse(bytes) }
        }
        let deepest = String(repeating: "[", count: JSONValue.maxDepth) + String(repeating: "]", count: JSONValue.maxDepth)
        #expect(throws: Never.self) { try JSONValue.parse(deepest) }
    }

    @Test("Merge patch: the examples of RFC 7386 appendix A")
    func rfc7386() throws {
        let cases: [(String, String, String)] = [
            (#"{"a":"b"}"#, #"{"a":"c"}"#, #"{"a":"c"}"#), (#"{"a":"b"}"#, #"{"b":"c"}"#, #"{"a":"b","b":"c"}"#),
            (#"{"a":"b"}"#, #"{"a":null}"#, #"{}"#), (#"{"a":"b","b":"c"}"#, #"{"a":null}"#, #"{"b":"c"}"#),
            (#"{"a":["b"]}"#, #"{"a":"c"}"#, #"{"a":"c"}"#), (#"{"a":"c"}"#, #"{"a":["b"]}"#, #"{"a":["b"]}"#),
            (#"{"a":{"b":"c"}}"#, #"{"a":{"b":"d","c":null}}"#, #"{"a":{"b":"d"}}"#),
            (#"{"a":[{"b":"c"}]}"#, #"{"a":[1]}"#, #"{"a":[1]}"#), (#"["a","b"]"#, #"["c","d"]"#, #"["c","d"]"#),
            (#"{"a":"b"}"#, #"["c"]"#, #"["c"]"#), (#"{"a":"foo"}"#, "null", "null"), (#"{"a":"foo"}"#, #""bar""#, #""bar""#),
            (#"{"e":null}"#, #"{"a":1}"#, #"{"a":1,"e":null}"#), (#"[1,2]"#, #"{"a":"b","c":null}"#, #"{"a":"b"}"#),
            (#"{}"#, #"{"a":{"bb":{"ccc":null}}}"#, #"{"a":{"bb":{}}}"#),
        ]
        for (target, patch, result) in cases {
            #expect(try JSONValue.parse(target).merging(JSONValue.parse(patch)) == JSONValue.parse(result), "\(target) + \(patch)")
        }
    }

    @Test("mergePatch(from:to:) turns any object into any other (seeded random documents)")
    func diffThenMerge() {
        var random = SplitMix64(seed: 19)
        func value(_ depth: Int) -> JSONValue {
            switch random.next() % (depth > 2 ? 4 : 6) {
            case 0: return .int(Int(random.next() % 100))
            case 1: return .string(["a", "é", "x y"][Int(random.next() % 3)])
            case 2: return .bool(random.next() % 2 == 0)
            case 3: return .array((0..<Int(random.next() % 3)).map { _ in value(depth + 1) })
            default: return object(depth + 1)
            }
        }
        func object(_ depth: Int) -> JSONValue {
            var fields: [JSONKey: JSONValue] = [:]
            for _ in 0..<Int(random.next() % 5) { fields[["k1", "k2", "k3", "k4"][Int(random.next() % 4)]] = value(depth) }
            return .object(fields)
        }
        for _ in 0..<2_000 {
            let (old, new) = (object(0), object(0))
            let patch = JSONValue.mergePatch(from: old, to: new)
            #expect(old.merging(patch) == new, "\(old.text) → \(new.text) by \(patch.text)")
            #expect(JSONValue.mergePatch(from: new, to: new) == .object([:]))
        }
    }

    @Test("Codable: decodes what JSONDecoder reads and encodes back to equal JSON")
    func codable() throws {
        let text = #"{"a":[1,2.5,"s",true,null,{"b":{}}],"n":-7}"#
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(decoded == (try JSONValue.parse(text)))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(try JSONValue.parse(encoder.encode(decoded)) == decoded)
    }

    @Test("Keys spelt differently but canonically equivalent are two keys: parsed, in canonical bytes, merged, diffed and compared apart")
    func canonicallyEquivalentKeys() throws {
        let (nfc, nfd) = ("caf\u{E9}", "cafe\u{301}")
        #expect(nfc == nfd, "Swift's String takes them as one")
        let value = try JSONValue.parse(#"{"\#(nfc)":1,"\#(nfd)":2}"#)
        #expect(value.objectValue?.count == 2 && value[nfc] == .int(1) && value[nfd] == .int(2))
        // Canonical bytes: both, sorted by UTF-8 ("cafe" + U+0301 before "caf" + U+00E9), and read back equal.
        #expect(value.text == #"{"\#(nfd)":2,"\#(nfc)":1}"#)
        #expect(try JSONValue.parse(value.bytes) == value)
        // A merge patch with one spelling leaves the other.
        let patched = value.merging(try JSONValue.parse(#"{"\#(nfd)":null}"#))
        #expect(patched == .object([JSONKey(nfc): .int(1)]) && patched != .object([JSONKey(nfd): .int(1)]))
        #expect(value.merging(try JSONValue.parse(#"{"\#(nfd)":3}"#))[nfc] == .int(1))
        #expect(JSONValue.mergePatch(from: .object([JSONKey(nfc): .int(1)]), to: .object([JSONKey(nfd): .int(1)])).text == #"{"\#(nfd)":1,"\#(nfc)":null}"#)
        // The same spelling twice is one key twice.
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#"{"\#(nfc)":1,"caf\u00e9":2}"#) }
        // Strings too compare by code points, so equal values have equal bytes.
        #expect(JSONValue.string(nfc) != .string(nfd) && Set([JSONValue.string(nfc), .string(nfd)]).count == 2)
        #expect(Set([JSONKey(nfc), JSONKey(nfd)]).count == 2 && JSONKey(nfc) == JSONKey("caf\u{E9}"))
        // A request body for the server keeps both too.
        let push = SyncPushRequest(clientId: "c", mutations: [SyncMutation(id: 1, op: .put, collection: "n", docId: "d", data: value)])
        #expect(try JSONValue.parse(push.exactBody)["mutations"].flatMap { if case .array(let m) = $0 { m.first?["data"] } else { nil } } == value)
    }
}
