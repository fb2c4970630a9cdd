/// Scans over megabytes of text (an image's base64 in a JSON body) sixteen bytes at a time: the JSON reader and writer
/// and the base64 check call these instead of a loop per byte.
enum ByteScan {
    /// The index of the first byte from `start` that a JSON string cannot hold as it is (`"`, `\`, a control
    /// character), or `bytes.count`.
    static func firstJSONSpecial(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = max(start, 0)
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 16 <= bytes.count {
                let chunk = raw.loadUnaligned(fromByteOffset: index, as: SIMD16<UInt8>.self)
                if any((chunk .== 0x22) .| (chunk .== 0x5C) .| (chunk .< 0x20)) { break }
                index += 16
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
            while index + 16 <= bytes.count {
                if any(raw.loadUnaligned(fromByteOffset: index, as: SIMD16<UInt8>.self) .>= 0x80) { return false }
                index += 16
            }
        }
        return bytes[index...].allSatisfy { $0 < 0x80 }
    }

    /// Whether every byte is in the standard base64 alphabet (`A–Z a–z 0–9 + /`; no padding).
    static func isBase64Alphabet(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 16 <= bytes.count {
                let chunk = raw.loadUnaligned(fromByteOffset: index, as: SIMD16<UInt8>.self)
                let letter = chunk | 0x20  // folds A–Z onto a–z; no other byte lands in a–z
                let valid = ((letter .>= 0x61) .& (letter .<= 0x7A)) .| ((chunk .>= 0x30) .& (chunk .<= 0x39))
                    .| (chunk .== 0x2B) .| (chunk .== 0x2F)
                guard all(valid) else { return false }
                index += 16
            }
        }
        return bytes[index...].allSatisfy(isBase64Character)
    }

    /// Whether `byte` is in the standard base64 alphabet.
    static func isBase64Character(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "+"), UInt8(ascii: "/"):
            true
        default: false
        }
    }
}
