/// Scans over megabytes of text (an image's base64 in a JSON body) eight bytes at a time where it can: the JSON reader
/// and writer and the base64 check call these instead of a loop per byte.
enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether some byte of `word` is below `limit` (at most 128): exact for "some", never for "which".
    @inline(__always)
    private static func hasByte(below limit: UInt64, in word: UInt64) -> Bool {
        (word &- ones &* limit) & ~word & highs != 0
    }

    /// Whether some byte of `word` is `byte`.
    @inline(__always)
    private static func hasByte(_ byte: UInt64, in word: UInt64) -> Bool {
        hasByte(below: 1, in: word ^ (ones &* byte))
    }

    /// The index of the first byte from `start` that a JSON string cannot hold as it is (`"`, `\`, a control
    /// character), or `bytes.count`.
    static func firstJSONSpecial(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = max(start, 0)
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                if hasByte(below: 0x20, in: word) || hasByte(0x22, in: word) || hasByte(0x5C, in: word) { break }
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x22 || byte == 0x5C || byte < 0x20 { return index }
            index += 1
        }
        return bytes.count
    }

    /// Whether every byte is ASCII (below 0x80).
    static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & highs != 0 { return false }
                index += 8
            }
        }
        return bytes[index...].allSatisfy { $0 < 0x80 }
    }

    /// The high bit of each byte of `word` that lies strictly between `low` and `high` (both at most 128), exactly.
    @inline(__always)
    private static func bytes(of word: UInt64, between low: UInt64, and high: UInt64) -> UInt64 {
        let low7 = word & (ones &* 0x7F)  // no byte then carries or borrows into its neighbour
        return (ones &* (127 &+ high) &- low7) & (low7 &+ ones &* (127 &- low)) & ~word & highs
    }

    /// Whether every byte is in the standard base64 alphabet (`A–Z a–z 0–9 + /`; no padding).
    static func isBase64Alphabet(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let valid = Self.bytes(of: word, between: 0x40, and: 0x5B) | Self.bytes(of: word, between: 0x60, and: 0x7B)
                    | Self.bytes(of: word, between: 0x2E, and: 0x3A) | Self.bytes(of: word, between: 0x2A, and: 0x2C)
                guard valid == highs else { return false }
                index += 8
            }
        }
        return bytes[index...].allSatisfy { Base64Bytes.value($0) != nil }
    }
}
