import Foundation
@testable import TallyAPI
import TallyTestSupport
import Testing

/// The sixteen-bytes-at-a-time scans against the byte-at-a-time rules they replace, on random buffers of every length
/// near the chunk size, with the byte that matters at every position (either side of each 16-byte boundary); and the JSON
/// reader and writer over megabytes with escapes anywhere.
@Suite("Byte scans: the same answers as a loop per byte", .timeLimit(.minutes(1)))
struct ByteScanTests {
    static func special(_ byte: UInt8) -> Bool { byte == 0x22 || byte == 0x5C || byte < 0x20 }

    @Test("firstJSONSpecial, isASCII and isBase64Alphabet agree with their per-byte definitions on 20,000 buffers")
    func agreeWithTheRule() {
        var random = SplitMix64(seed: 451)
        let base64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        for round in 0..<20_000 {
            let length = Int(random.next() % 100)
            // Mostly harmless bytes, one (or none) that matters at a random place.
            var bytes = (0..<length).map { _ in base64[Int(random.next() % 64)] }
            if length > 0, round % 5 != 0 {
                bytes[Int(random.next() % UInt64(length))] = UInt8(truncatingIfNeeded: random.next())
            }
            let start = length == 0 ? 0 : Int(random.next() % UInt64(length + 1))
            bytes.withUnsafeBufferPointer { buffer in
                let expected = (start..<length).first { Self.special(buffer[$0]) } ?? length
                #expect(ByteScan.firstJSONSpecial(buffer, from: start) == expected, "\(bytes) from \(start)")
                #expect(ByteScan.isASCII(buffer) == bytes.allSatisfy { $0 < 0x80 }, "\(bytes)")
                #expect(ByteScan.isBase64Alphabet(buffer) == bytes.allSatisfy { base64.contains($0) }, "\(bytes)")
            }
        }
        // Every byte value, alone at each position of a 40-byte run.
        for value in 0...255 {
            for position in 0..<40 {
                var bytes = [UInt8](repeating: UInt8(ascii: "A"), count: 40)
                bytes[position] = UInt8(value)
                bytes.withUnsafeBufferPointer { buffer in
                    #expect(ByteScan.firstJSONSpecial(buffer, from: 0) == (Self.special(UInt8(value)) ? position : 40))
                    #expect(ByteScan.isBase64Alphabet(buffer) == base64.contains(UInt8(value)))
                    #expect(ByteScan.isASCII(buffer) == (value < 0x80))
                }
            }
        }
    }

    @Test("A 3 MB string with escapes and non-ASCII text anywhere is written and read back exactly; invalid UTF-8 and raw control characters are refused")
    func roundTripsLargeStrings() throws {
        var random = SplitMix64(seed: 452)
        let pieces = ["abc", "\"", "\\", "\n", "\u{01}", "é", "日本", "🙂", "/", String(repeating: "x", count: 37)]
        var text = ""
        while text.utf8.count < 3_000_000 { text += pieces[Int(random.next() % UInt64(pieces.count))] }
        let value = JSONValue.object(["s": .string(text)])
        let written = value.bytes
        #expect(try JSONValue.parse(written) == value)
        #expect(try JSONValue.parse(written[...]) == value, "a slice: read in place")
        // A control character or invalid UTF-8 placed deep in a long plain run.
        for bad: [UInt8] in [[0x0A], [0xFF], [0xC3], [0xED, 0xA0, 0x80]] {
            var body = Array(#"{"s":""#.utf8) + [UInt8](repeating: UInt8(ascii: "Q"), count: 100_003)
            body.insert(contentsOf: bad, at: 70_001)
            body += Array(#""}"#.utf8)
            #expect(throws: JSONParseError.self) { try JSONValue.parse(body) }
        }
    }
}
