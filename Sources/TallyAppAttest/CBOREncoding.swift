extension CBOR {
    /// The item written as CBOR (RFC 8949): definite lengths and the shortest argument for every head, a `.float` as a
    /// double (major type 7, additional information 27), a simple value below 24 in one byte and any other in two.
    /// Maps keep their pairs in the order given (``decode(_:)`` reads them back in that order); write them in
    /// bytewise order of their encoded keys, as App Attest does, for RFC 8949's core deterministic encoding.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        Self.write(self, into: &bytes)
        return bytes
    }

    private static func write(_ item: CBOR, into bytes: inout [UInt8]) {
        switch item {
        case .unsigned(let n): head(0, n, into: &bytes)
        case .negative(let n): head(1, n, into: &bytes)
        case .bytes(let value):
            head(2, UInt64(value.count), into: &bytes)
            bytes += value
        case .text(let text):
            head(3, UInt64(text.utf8.count), into: &bytes)
            bytes += text.utf8
        case .array(let items):
            head(4, UInt64(items.count), into: &bytes)
            for item in items { write(item, into: &bytes) }
        case .map(let pairs):
            head(5, UInt64(pairs.count), into: &bytes)
            for (key, value) in pairs {
                write(key, into: &bytes)
                write(value, into: &bytes)
            }
        case .tagged(let tag, let inner):
            head(6, tag, into: &bytes)
            write(inner, into: &bytes)
        case .simple(let value):
            if value < 24 { bytes.append(0xE0 | value) } else { bytes += [0xF8, value] }
        case .float(let value):
            bytes.append(0xFB)
            bigEndian(value.bitPattern, width: 8, into: &bytes)
        }
    }

    /// An initial byte of `major` type and the shortest form of `argument` (RFC 8949 §3).
    private static func head(_ major: UInt8, _ argument: UInt64, into bytes: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24: bytes.append(type | UInt8(argument))
        case 24...0xFF: bytes += [type | 24, UInt8(argument)]
        case 0x100...0xFFFF:
            bytes.append(type | 25)
            bigEndian(argument, width: 2, into: &bytes)
        case 0x1_0000...0xFFFF_FFFF:
            bytes.append(type | 26)
            bigEndian(argument, width: 4, into: &bytes)
        default:
            bytes.append(type | 27)
            bigEndian(argument, width: 8, into: &bytes)
        }
    }

    private static func bigEndian(_ value: UInt64, width: Int, into bytes: inout [UInt8]) {
        for index in (0..<width).reversed() { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }
}
