import TallyAppAttest
import Testing

/// ``CBOR/encoded``: RFC 8949 Appendix A's examples written byte for byte, and values of every kind read back equal.
@Suite("CBOR encoding", .timeLimit(.minutes(1)))
struct CBOREncodingTests {
    /// RFC 8949 Appendix A: each item and its encoding (those with a double, not a half or single, float).
    static let vectors: [(CBOR, String)] = [
        (.unsigned(0), "00"), (.unsigned(1), "01"), (.unsigned(10), "0a"), (.unsigned(23), "17"), (.unsigned(24), "1818"),
        (.unsigned(25), "1819"), (.unsigned(100), "1864"), (.unsigned(1000), "1903e8"), (.unsigned(1_000_000), "1a000f4240"),
        (.unsigned(1_000_000_000_000), "1b000000e8d4a51000"), (.unsigned(.max), "1bffffffffffffffff"),
        (.negative(0), "20"), (.negative(9), "29"), (.negative(99), "3863"), (.negative(999), "3903e7"),
        (.negative(.max), "3bffffffffffffffff"),
        (.float(1.1), "fb3ff199999999999a"), (.float(1.0e+300), "fb7e37e43c8800759c"), (.float(-4.1), "fbc010666666666666"),
        (.simple(20), "f4"), (.simple(21), "f5"), (.simple(22), "f6"), (.simple(23), "f7"), (.simple(16), "f0"), (.simple(255), "f8ff"),
        (.tagged(0, .text("2013-03-21T20:04:00Z")), "c074323031332d30332d32315432303a30343a30305a"),
        (.tagged(1, .unsigned(1_363_896_240)), "c11a514b67b0"), (.tagged(23, .bytes([1, 2, 3, 4])), "d74401020304"),
        (.tagged(32, .text("http://www.example.com")), "d82076687474703a2f2f7777772e6578616d706c652e636f6d"),
        (.bytes([]), "40"), (.bytes([1, 2, 3, 4]), "4401020304"),
        (.text(""), "60"), (.text("a"), "6161"), (.text("IETF"), "6449455446"), (.text("\"\\"), "62225c"), (.text("\u{00fc}"), "62c3bc"),
        (.text("\u{6c34}"), "63e6b0b4"), (.text("\u{10151}"), "64f0908591"),
        (.array([]), "80"), (.array([.unsigned(1), .unsigned(2), .unsigned(3)]), "83010203"),
        (.array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])]), "8301820203820405"),
        (.array((1...25).map { .unsigned($0) }), "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
        (.map([]), "a0"), (.map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .unsigned(4))]), "a201020304"),
        (.map([(.text("a"), .unsigned(1)), (.text("b"), .array([.unsigned(2), .unsigned(3)]))]), "a26161016162820203"),
        (.array([.text("a"), .map([(.text("b"), .text("c"))])]), "826161a161626163"),
        (
            .map(["a", "b", "c", "d", "e"].map { (CBOR.text($0), CBOR.text($0.uppercased())) }),
            "a56161614161626142616361436164614461656145"
        ),
    ]

    @Test("RFC 8949 Appendix A's examples encode byte for byte")
    func appendixA() throws {
        #expect(Self.vectors.count >= 10)
        for (item, hex) in Self.vectors {
            #expect(item.encoded == CBORTests.hex(hex), "\(item)")
            #expect(try CBOR.decode(CBORTests.hex(hex)) == item, "\(hex)")
        }
    }

    @Test("every argument length's boundaries take the shortest head")
    func boundaries() throws {
        let cases: [(UInt64, Int)] = [
            (23, 1), (24, 2), (255, 2), (256, 3), (65_535, 3), (65_536, 5), (4_294_967_295, 5), (4_294_967_296, 9), (.max, 9),
        ]
        for (value, length) in cases {
            // The tag's head, then null (one byte).
            for (item, expected) in [(CBOR.unsigned(value), length), (.negative(value), length), (.tagged(value, .simple(22)), length + 1)] {
                #expect(item.encoded.count == expected, "\(item)")
                #expect(try CBOR.decode(item.encoded) == item)
            }
            let bytes: CBOR = .bytes([UInt8](repeating: 0xA5, count: Int(min(value, 70_000))))
            #expect(try CBOR.decode(bytes.encoded) == bytes)
        }
        for count in [0, 23, 24, 255, 256, 65_535, 65_536] {
            let text: CBOR = .text(String(repeating: "é", count: count / 2))
            #expect(try CBOR.decode(text.encoded) == text)
            let array: CBOR = .array([CBOR](repeating: .unsigned(0), count: min(count, CBOR.maxItems - 1)))
            #expect(try CBOR.decode(array.encoded) == array)
        }
    }

    @Test("floats are doubles, read back bit for bit")
    func floats() throws {
        for value in [0.0, -0.0, 1.5, -1.0e-300, .infinity, -.infinity, .nan, .greatestFiniteMagnitude, .leastNonzeroMagnitude] {
            let bytes = CBOR.float(value).encoded
            #expect(bytes.count == 9 && bytes[0] == 0xFB)
            #expect(try CBOR.decode(bytes) == .float(value))
        }
    }

    @Test("2,000 random items read back equal")
    func roundTrip() throws {
        var random = Generator(seed: 0x5EED_CB0E)
        for _ in 0..<2_000 {
            let item = Self.randomItem(&random, depth: 0)
            #expect(try CBOR.decode(item.encoded) == item)
        }
    }

    /// An item of any kind, nested at most four deep (arrays and maps of up to five entries).
    static func randomItem(_ random: inout Generator, depth: Int) -> CBOR {
        let kinds = depth < 4 ? 9 : 6
        func argument() -> UInt64 {
            let value = random.next()
            return switch random.next() % 5 {
            case 0: value % 24
            case 1: value % 256
            case 2: value % 65_536
            case 3: value % 4_294_967_296
            default: value
            }
        }
        switch random.next() % UInt64(kinds) {
        case 0: return .unsigned(argument())
        case 1: return .negative(argument())
        case 2: return .bytes((0..<random.next() % 40).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        case 3:
            let characters = Array("aZ09 é水😀")
            return .text(String((0..<random.next() % 20).map { _ in characters[Int(random.next() % UInt64(characters.count))] }))
        case 4: return .simple(UInt8(truncatingIfNeeded: random.next()))
        case 5: return .float(Double(bitPattern: random.next()))
        case 6: return .array((0..<random.next() % 6).map { _ in randomItem(&random, depth: depth + 1) })
        case 7: return .map((0..<random.next() % 6).map { _ in (randomItem(&random, depth: depth + 1), randomItem(&random, depth: depth + 1)) })
        default: return .tagged(argument(), randomItem(&random, depth: depth + 1))
        }
    }

    /// SplitMix64: the same items at every run.
    struct Generator {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}
