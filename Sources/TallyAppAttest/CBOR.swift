/// A CBOR data item (RFC 8949), as App Attest's attestation and assertion objects use them: read by ``CBOR/decode(_:)``,
/// bounded and total — any input is a value or a ``CBORError``, never a trap or a read past the bytes.
public indirect enum CBOR: Sendable, Hashable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: a negative integer, `-1 - n` (kept as `n`, so every encodable value fits).
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a text string (valid UTF-8).
    case text(String)
    /// Major type 4: an array.
    case array([CBOR])
    /// Major type 5: a map, its pairs in the order written (keys may be any item).
    case map([(CBOR, CBOR)])
    /// Major type 6: a tagged item.
    case tagged(UInt64, CBOR)
    /// Major type 7: `false`, `true`, `null`, `undefined`, another simple value.
    case simple(UInt8)
    /// Major type 7: a half, single or double float, as a double.
    case float(Double)

    /// The most nesting read (App Attest's objects nest three deep).
    public static let maxDepth = 16
    /// The most items read in all (arrays' and maps' entries included).
    public static let maxItems = 10_000

    /// The one item `bytes` hold, entirely; definite lengths only (App Attest writes no other).
    public static func decode(_ bytes: [UInt8]) throws(CBORError) -> CBOR {
        var reader = Reader(bytes: bytes)
        let item = try reader.item(depth: 0)
        guard reader.offset == bytes.count else { throw .trailingBytes }
        return item
    }

    /// The value under the text key `key` of a map (nil for another item or a missing key).
    public subscript(key: String) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.0 == .text(key) }?.1
    }

    /// The value under the integer key `key` of a map (COSE keys use integers).
    public subscript(int key: Int64) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        let wanted: CBOR = key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))
        return pairs.first { $0.0 == wanted }?.1
    }

    /// The bytes of a byte string.
    public var byteString: [UInt8]? { if case .bytes(let bytes) = self { bytes } else { nil } }
    /// The text of a text string.
    public var textString: String? { if case .text(let text) = self { text } else { nil } }
    /// The items of an array.
    public var arrayItems: [CBOR]? { if case .array(let items) = self { items } else { nil } }

    public static func == (lhs: CBOR, rhs: CBOR) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): a == b
        case (.bytes(let a), .bytes(let b)): a == b
        case (.text(let a), .text(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.map(let a), .map(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.tagged(let t, let a), .tagged(let u, let b)): t == u && a == b
        case (.simple(let a), .simple(let b)): a == b
        case (.float(let a), .float(let b)): a.bitPattern == b.bitPattern
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let n): hasher.combine(0); hasher.combine(n)
        case .negative(let n): hasher.combine(1); hasher.combine(n)
        case .bytes(let b): hasher.combine(2); hasher.combine(b)
        case .text(let t): hasher.combine(3); hasher.combine(t)
        case .array(let items): hasher.combine(4); hasher.combine(items)
        case .map(let pairs): hasher.combine(5); for (k, v) in pairs { hasher.combine(k); hasher.combine(v) }
        case .tagged(let t, let item): hasher.combine(6); hasher.combine(t); hasher.combine(item)
        case .simple(let s): hasher.combine(7); hasher.combine(s)
        case .float(let f): hasher.combine(8); hasher.combine(f.bitPattern)
        }
    }

    /// The reader: an offset into the bytes, every read checked against their end.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0
        var items = 0

        mutating func byte() throws(CBORError) -> UInt8 {
            guard offset < bytes.count else { throw .truncated }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func take(_ count: UInt64) throws(CBORError) -> ArraySlice<UInt8> {
            guard count <= UInt64(bytes.count - offset) else { throw .truncated }
            let end = offset + Int(count)
            defer { offset = end }
            return bytes[offset..<end]
        }

        /// The argument of an initial byte's additional information (RFC 8949 §3).
        mutating func argument(_ info: UInt8) throws(CBORError) -> UInt64 {
            switch info {
            case 0..<24: return UInt64(info)
            case 24: return UInt64(try byte())
            case 25, 26, 27:
                let width = 1 << Int(info - 24)  // 2, 4, 8 bytes, big-endian
                var value: UInt64 = 0
                for byte in try take(UInt64(width)) { value = value << 8 | UInt64(byte) }
                return value
            default: throw .unsupported  // 28–30 reserved, 31 indefinite length
            }
        }

        mutating func item(depth: Int) throws(CBORError) -> CBOR {
            guard depth < CBOR.maxDepth else { throw .tooDeep }
            items += 1
            guard items <= CBOR.maxItems else { throw .tooLarge }
            let initial = try byte()
            let major = initial >> 5, info = initial & 0x1F
            if major == 7 { return try simpleOrFloat(info) }
            let argument = try argument(info)
            switch major {
            case 0: return .unsigned(argument)
            case 1: return .negative(argument)
            case 2: return .bytes(Array(try take(argument)))
            case 3:
                guard let text = String(validating: try take(argument), as: UTF8.self) else { throw .invalidText }
                return .text(text)
            case 4:
                // Each entry takes at least one byte: a count beyond what is left is a lie, refused before reserving.
                guard argument <= UInt64(bytes.count - offset) else { throw .truncated }
                var entries: [CBOR] = []
                for _ in 0..<argument { entries.append(try item(depth: depth + 1)) }
                return .array(entries)
            case 5:
                guard argument <= UInt64(bytes.count - offset) / 2 else { throw .truncated }
                var pairs: [(CBOR, CBOR)] = []
                for _ in 0..<argument { pairs.append((try item(depth: depth + 1), try item(depth: depth + 1))) }
                return .map(pairs)
            default: return .tagged(argument, try item(depth: depth + 1))  // 6
            }
        }

        mutating func simpleOrFloat(_ info: UInt8) throws(CBORError) -> CBOR {
            switch info {
            case 0..<24: return .simple(info)
            case 24: return .simple(try byte())
            case 25:
                let bits = try argument(25)
                return .float(Double(Float16Bits.float(UInt16(truncatingIfNeeded: bits))))
            case 26: return .float(Double(Float(bitPattern: UInt32(truncatingIfNeeded: try argument(26)))))
            case 27: return .float(Double(bitPattern: try argument(27)))
            default: throw .unsupported  // 28–30 reserved, 31 "break"
            }
        }
    }
}

/// Why bytes are not one CBOR item this reader takes.
public enum CBORError: Error, Sendable, Hashable {
    /// They end inside an item.
    case truncated
    /// More bytes follow the item.
    case trailingBytes
    /// Nested deeper than ``CBOR/maxDepth``.
    case tooDeep
    /// More than ``CBOR/maxItems`` items.
    case tooLarge
    /// A text string that is not UTF-8.
    case invalidText
    /// Indefinite lengths, reserved values or a stray "break".
    case unsupported
}

/// IEEE 754 half precision, without `Float16` (not on every platform Swift builds for).
private enum Float16Bits {
    static func float(_ bits: UInt16) -> Float {
        let sign: Float = bits & 0x8000 == 0 ? 1 : -1
        let exponent = Int((bits >> 10) & 0x1F), fraction = Float(bits & 0x3FF)
        switch exponent {
        case 0: return sign * fraction * Float(sign: .plus, exponent: -24, significand: 1)
        case 31: return fraction == 0 ? sign * .infinity : .nan
        default: return sign * (1 + fraction / 1024) * Float(sign: .plus, exponent: exponent - 15, significand: 1)
        }
    }
}
