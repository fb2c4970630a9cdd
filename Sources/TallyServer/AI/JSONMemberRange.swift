#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a top-level member's value lies in the text of a JSON object that `JSONValue.parse(_:)` accepted (valid
/// JSON, no repeated keys): the gateway sends a client's `messages` upstream as the client wrote them, so their
/// megabytes of base64 are neither escaped again nor copied, instead of parsed into strings and written back.
///
/// Trusts that the text is valid: it finds the value's end, it does not check it. A string's end is the first `"`
/// not escaped (`memchr`, then the backslashes before it counted), so a long string costs one vectorised search.
enum JSONMemberRange {
    /// The byte range of the value of the member `name` of the object `bytes` holds (a key written without
    /// escapes; the text's value must be an object), or nil when no key is written exactly so.
    static func of(_ name: String, in bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        var scan = Scan(bytes: bytes)
        scan.skipWhitespace()
        guard scan.take(UInt8(ascii: "{")) else { return nil }
        let wanted = Array(name.utf8)
        // A key written with escapes is never the one wanted: its text is not the key (`"\""` is `"`, not `\"`).
        guard !wanted.contains(0x5C) else { return nil }
        while true {
            scan.skipWhitespace()
            guard scan.index < bytes.count, bytes[scan.index] == UInt8(ascii: "\"") else { return nil }
            let keyStart = scan.index + 1
            guard let keyEnd = scan.skipString() else { return nil }
            let key = UnsafeRawBufferPointer(rebasing: bytes[keyStart..<keyEnd - 1])
            scan.skipWhitespace()
            guard scan.take(UInt8(ascii: ":")) else { return nil }
            scan.skipWhitespace()
            let valueStart = scan.index
            guard scan.skipValue() else { return nil }
            if key.elementsEqual(wanted) { return valueStart..<scan.index }
            scan.skipWhitespace()
            guard scan.take(UInt8(ascii: ",")) else { return nil }
        }
    }

    private struct Scan {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count, Self.isWhitespace(bytes[index]) { index += 1 }
        }

        static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// From an opening quote to just past its closing one (also returned); nil when the text ends first.
        mutating func skipString() -> Int? {
            guard let base = bytes.baseAddress else { return nil }
            var from = index + 1
            while from < bytes.count {
                guard let found = memchr(base + from, 0x22, bytes.count - from) else { return nil }
                let quote = base.distance(to: UnsafeRawPointer(found))
                var backslashes = 0
                while quote - backslashes - 1 > index, bytes[quote - backslashes - 1] == 0x5C { backslashes += 1 }
                from = quote + 1
                if backslashes % 2 == 0 {
                    index = from
                    return from
                }
            }
            return nil
        }

        /// Past one value: a string, an object or array (their strings skipped as strings), or a literal.
        mutating func skipValue() -> Bool {
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return skipString() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while index < bytes.count {
                    switch bytes[index] {
                    case UInt8(ascii: "\""):
                        guard skipString() != nil else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 {
                            index += 1
                            return true
                        }
                    default: break
                    }
                    index += 1
                }
                return false
            default:
                while index < bytes.count, bytes[index] != UInt8(ascii: ","), bytes[index] != UInt8(ascii: "}"),
                    bytes[index] != UInt8(ascii: "]"), !Self.isWhitespace(bytes[index])
                {
                    index += 1
                }
                return true
            }
        }
    }
}
