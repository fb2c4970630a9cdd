import TallyAppAttest
import Testing

/// ``CBOR`` and ``AuthenticatorData``: RFC 8949's examples, App Attest-shaped objects written and read back, and 100,000
/// random, truncated and mutated inputs — each read to a value or a refusal, never a trap or a read past the bytes.
@Suite("CBOR and authenticator data, bounded and total", .timeLimit(.minutes(2)))
struct CBORTests {
    /// A small CBOR writer (definite lengths, shortest arguments), for the tests.
    static func encode(_ item: CBOR) -> [UInt8] {
        func head(_ major: UInt8, _ value: UInt64) -> [UInt8] {
            switch value {
            case 0..<24: return [major << 5 | UInt8(value)]
            case 24..<256: return [major << 5 | 24, UInt8(value)]
            case 256..<65_536: return [major << 5 | 25] + (0..<2).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
            case 65_536..<4_294_967_296: return [major << 5 | 26] + (0..<4).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
            default: return [major << 5 | 27] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
            }
        }
        switch item {
        case .unsigned(let n): return head(0, n)
        case .negative(let n): return head(1, n)
        case .bytes(let b): return head(2, UInt64(b.count)) + b
        case .text(let t): return head(3, UInt64(t.utf8.count)) + Array(t.utf8)
        case .array(let items): return head(4, UInt64(items.count)) + items.flatMap(encode)
        case .map(let pairs): return head(5, UInt64(pairs.count)) + pairs.flatMap { encode($0.0) + encode($0.1) }
        case .tagged(let tag, let inner): return head(6, tag) + encode(inner)
        case .simple(let s): return s < 24 ? [0xE0 | s] : [0xF8, s]
        case .float(let f): return [0xFB] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: f.bitPattern >> (8 * $0)) }
        }
    }

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// An App Attest attestation object's shape: `fmt`, `attStmt {x5c, receipt}`, `authData`.
    static func attestation(authData: [UInt8]) -> CBOR {
        .map([
            (.text("fmt"), .text("apple-appattest")),
            (.text("attStmt"), .map([(.text("x5c"), .array([.bytes(Array(repeating: 0x30, count: 300)), .bytes([0x30, 0x82])])), (.text("receipt"), .bytes([1, 2, 3]))])),
            (.text("authData"), .bytes(authData)),
        ])
    }

    /// Authenticator data of an attestation: a COSE P-256 key after a 32-byte key id.
    static func authData(counter: UInt32 = 0) -> [UInt8] {
        let cose: CBOR = .map([
            (.unsigned(1), .unsigned(2)), (.unsigned(3), .negative(6)), (.negative(0), .unsigned(1)),
            (.negative(1), .bytes(Array(repeating: 7, count: 32))), (.negative(2), .bytes(Array(repeating: 9, count: 32))),
        ])
        return Array(repeating: 0xAB, count: 32) + [0x40] + (0..<4).reversed().map { UInt8(truncatingIfNeeded: counter >> (8 * $0)) }
            + Array("appattestdevelop".utf8) + [0, 32] + Array(repeating: 0xCD, count: 32) + encode(cose)
    }

    @Test("RFC 8949's examples (Appendix A) read as written there")
    func rfcExamples() throws {
        let cases: [(String, CBOR)] = [
            ("00", .unsigned(0)), ("17", .unsigned(23)), ("1818", .unsigned(24)), ("1903e8", .unsigned(1000)),
            ("1bffffffffffffffff", .unsigned(.max)), ("20", .negative(0)), ("3863", .negative(99)),
            ("f93c00", .float(1.0)), ("f97bff", .float(65504.0)), ("fa47c35000", .float(100000.0)), ("f90001", .float(5.960464477539063e-8)),
            ("fb3ff199999999999a", .float(1.1)), ("f4", .simple(20)), ("f5", .simple(21)), ("f6", .simple(22)), ("f818", .simple(24)),
            ("40", .bytes([])), ("4401020304", .bytes([1, 2, 3, 4])), ("6449455446", .text("IETF")), ("62c3bc", .text("ü")),
            ("83010203", .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
            ("a201020304", .map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .unsigned(4))])),
            ("c11a514b67b0", .tagged(1, .unsigned(1_363_896_240))),
        ]
        for (hex, expected) in cases { #expect(try CBOR.decode(Self.hex(hex)) == expected, "\(hex)") }
        #expect(throws: CBORError.unsupported) { try CBOR.decode(Self.hex("9fff")) }  // indefinite length
        #expect(throws: CBORError.trailingBytes) { try CBOR.decode(Self.hex("0000")) }
        #expect(throws: CBORError.invalidText) { try CBOR.decode(Self.hex("62c328")) }
        #expect(throws: CBORError.truncated) { try CBOR.decode(Self.hex("9b00000000ffffffff")) }  // 4 billion entries in 9 bytes
    }

    @Test("An attestation object and its authenticator data read back as written")
    func attestationShape() throws {
        let object = try CBOR.decode(Self.encode(Self.attestation(authData: Self.authData())))
        #expect(object["fmt"]?.textString == "apple-appattest")
        #expect(object["attStmt"]?["x5c"]?.arrayItems?.count == 2 && object["attStmt"]?["receipt"]?.byteString == [1, 2, 3])
        let data = try AuthenticatorData(try #require(object["authData"]?.byteString))
        #expect(data.rpIdHash == Array(repeating: 0xAB, count: 32) && data.flags == 0x40 && data.counter == 0)
        let credential = try #require(data.attestedCredential)
        #expect(credential.aaguid == Array("appattestdevelop".utf8) && credential.credentialId == Array(repeating: 0xCD, count: 32))
        #expect(credential.publicKey[int: -2]?.byteString == Array(repeating: 7, count: 32) && credential.publicKey[int: 3] == .negative(6))
        let assertion = try AuthenticatorData(Array(repeating: 1, count: 32) + [0x01, 0, 0, 1, 2])
        #expect(assertion.counter == 258 && assertion.attestedCredential == nil)
        #expect(throws: AuthenticatorDataError.extensions) { try AuthenticatorData(Array(repeating: 0, count: 32) + [0xC0, 0, 0, 0, 0]) }
    }

    @Test("100,000 random, truncated and mutated inputs: each a value or a refusal; a value written again reads the same")
    func fuzz() throws {
        var random = SystemRandomNumberGenerator()
        let valid = Self.encode(Self.attestation(authData: Self.authData(counter: 7)))
        let validData = Self.authData()
        var values = 0
        for round in 0..<100_000 {
            var input: [UInt8]
            switch round % 4 {
            case 0: input = (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            case 1: input = Array(valid.prefix(Int.random(in: 0...valid.count, using: &random)))
            case 2:
                input = valid
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    input[Int.random(in: 0..<input.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            default:
                input = validData
                input[Int.random(in: 0..<input.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                if Bool.random(using: &random) { input = Array(input.prefix(Int.random(in: 0...input.count, using: &random))) }
                _ = try? AuthenticatorData(input)
            }
            if let item = try? CBOR.decode(input) {
                values += 1
                // Floats and non-shortest arguments may be written differently; what reads back must be the same item.
                #expect(try CBOR.decode(Self.encode(item)) == item)
            }
        }
        #expect(values > 1_000, "the mutations keep some inputs valid: \(values)")
    }

    @Test("Nesting beyond the bound and item counts beyond the bytes are refused without building them")
    func bounds() {
        let deep = Array(repeating: UInt8(0x81), count: 100) + [0x00]  // [[[…[0]…]]]
        #expect(throws: CBORError.tooDeep) { try CBOR.decode(deep) }
        let wide = [UInt8(0x9A), 0x00, 0x10, 0x00, 0x00] + Array(repeating: UInt8(0x00), count: 20_000)  // 1,048,576 entries
        #expect(throws: CBORError.truncated) { try CBOR.decode(wide) }
        let many = [UInt8(0x99), 0x4E, 0x20] + Array(repeating: UInt8(0x00), count: 20_000)  // 20,000 entries, all there
        #expect(throws: CBORError.tooLarge) { try CBOR.decode(many) }
    }
}
