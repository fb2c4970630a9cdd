import TallyAPI

/// One pass over a request body, before `JSONDecoder` reads it, for what the decoder would let through:
/// text RFC 8259 refuses (the decoder takes a trailing comma), an object that repeats a key (the decoder
/// keeps the first, another parser may keep the last: a parser differential), and integer fields written
/// as `5.0`, `1e3` or beyond 64 bits (the decoder takes any number whose value is whole).
///
/// Linear in the body's length, without recursion: a stack of the open containers and one set of the keys
/// seen. Keys compare after unescaping (`"a"` and `"\u0061"` are one key), code point by code point, as RFC 8259
/// compares names (``JSONKey``): canonically equivalent spellings (`"é"` and `"e\u0301"`) are two keys. The
/// decoder would take such a pair as one name; it only matters for a field whose name has another spelling, and
/// the request bodies' field names are ASCII letters, none of which has one. UTF-8 validity is left to the decoder.
struct JSONScanner {
    /// The first thing wrong with a body.
    enum Problem: Error, Equatable {
        /// Not JSON as RFC 8259 defines it.
        case malformed
        /// An object has this key twice.
        case duplicateKey(String)
        /// This top-level integer field holds a number with a fraction or an exponent.
        case notAnInteger(field: String)
        /// This top-level integer field holds an integer beyond the 64-bit range.
        case integerOutOfRange(field: String)
    }

    /// The first problem of `bytes`, or `nil` if they are one JSON value whose objects have distinct keys and,
    /// when it is an object, whose `integerFields` are written as integers that fit in 64 bits.
    static func firstProblem(in bytes: UnsafeRawBufferPointer, integerFields: Set<String>) -> Problem? {
        var scanner = JSONScanner(bytes: bytes, integerFields: integerFields)
        do {
            try scanner.scanDocument()
            return nil
        } catch {
            return error
        }
    }

    /// An open object (numbered, to tell its keys from other objects') or array.
    private enum Container {
        case object(Int)
        case array
    }

    /// A key of one object.
    private struct ObjectKey: Hashable {
        let object: Int
        let key: JSONKey
    }

    private let bytes: UnsafeRawBufferPointer
    private let integerFields: Set<String>
    private var index = 0
    private var open: [Container] = []
    private var keys: Set<ObjectKey> = []
    private var objects = 0
    /// The last key read in the top-level object: the field the values directly inside it belong to.
    private var topLevelKey: String?

    private init(bytes: UnsafeRawBufferPointer, integerFields: Set<String>) {
        self.bytes = bytes
        self.integerFields = integerFields
    }

    private mutating func scanDocument() throws(Problem) {
        // RFC 8259 lets a parser ignore a leading byte order mark, and JSONDecoder does.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        repeat {
            try scanValueStart()
            if open.isEmpty { break }
        } while try scanAfterValue()
        skipWhitespace()
        guard index == bytes.count else { throw .malformed }
    }

    /// Reads a scalar value, an empty container, or the opening of a container up to its first value.
    private mutating func scanValueStart() throws(Problem) {
        while true {
            skipWhitespace()
            switch try next() {
            case UInt8(ascii: "{"):
                objects += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "}") {
                    index += 1
                    return
                }
                open.append(.object(objects))
                try scanKey(of: objects)
            case UInt8(ascii: "["):
                skipWhitespace()
                if peek() == UInt8(ascii: "]") {
                    index += 1
                    return
                }
                open.append(.array)
            case UInt8(ascii: "\""):
                _ = try scanString(keeping: false)
                return
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                index -= 1
                try scanNumber()
                return
            case UInt8(ascii: "t"): return try expect("rue")
            case UInt8(ascii: "f"): return try expect("alse")
            case UInt8(ascii: "n"): return try expect("ull")
            default: throw .malformed
            }
        }
    }

    /// After a value: closes containers until one goes on with a comma (`true`, ready for the next value),
    /// or none is left open (`false`).
    private mutating func scanAfterValue() throws(Problem) -> Bool {
        while let container = open.last {
            skipWhitespace()
            switch (try next(), container) {
            case (UInt8(ascii: ","), .object(let object)):
                try scanKey(of: object)
                return true
            case (UInt8(ascii: ","), .array):
                return true
            case (UInt8(ascii: "}"), .object), (UInt8(ascii: "]"), .array):
                open.removeLast()
            default:
                throw .malformed
            }
        }
        return false
    }

    /// Reads `"key" :` and fails if the object already has the key.
    private mutating func scanKey(of object: Int) throws(Problem) {
        skipWhitespace()
        guard try next() == UInt8(ascii: "\"") else { throw .malformed }
        let key = try scanString(keeping: true)
        guard keys.insert(ObjectKey(object: object, key: JSONKey(key))).inserted else { throw .duplicateKey(key) }
        if open.count == 1 { topLevelKey = key }
        skipWhitespace()
        guard try next() == UInt8(ascii: ":") else { throw .malformed }
    }

    /// Reads a string after its opening quote; returns its unescaped text if `keeping`, else "".
    private mutating func scanString(keeping: Bool) throws(Problem) -> String {
        var unescaped: [UInt8] = []  // once an escape is met in a kept string: its UTF-8 up to `copied`
        var escaped = false
        var copied = index
        while true {
            // The plain run: anything but a quote, a backslash or a control character.
            while index < bytes.count, bytes[index] != 0x22, bytes[index] != 0x5C, bytes[index] >= 0x20 { index += 1 }
            guard index < bytes.count, bytes[index] >= 0x20 else { throw .malformed }
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                guard keeping else { return "" }
                let run = UnsafeRawBufferPointer(rebasing: bytes[copied..<index - 1])
                guard escaped else { return String(decoding: run, as: UTF8.self) }
                unescaped.append(contentsOf: run)
                return String(decoding: unescaped, as: UTF8.self)
            }
            if keeping { unescaped.append(contentsOf: bytes[copied..<index]) }
            escaped = true
            index += 1
            let scalar = try scanEscape()
            if keeping { UTF8.encode(scalar) { unescaped.append($0) } }
            copied = index
        }
    }

    /// Reads what follows a backslash in a string: the character it stands for (a lone surrogate stands for
    /// U+FFFD here; the decoder refuses the body).
    private mutating func scanEscape() throws(Problem) -> Unicode.Scalar {
        switch try next() {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try scanHex4()
            guard (0xD800..<0xDC00).contains(unit), peek() == UInt8(ascii: "\\"), index + 1 < bytes.count,
                bytes[index + 1] == UInt8(ascii: "u")
            else { return Unicode.Scalar(unit) ?? "\u{FFFD}" }
            let highEnd = index
            index += 2
            let low = try scanHex4()
            guard (0xDC00..<0xE000).contains(low) else {
                index = highEnd  // not a pair: the next escape is read on its own
                return "\u{FFFD}"
            }
            return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) ?? "\u{FFFD}"
        default:
            throw .malformed
        }
    }

    private mutating func scanHex4() throws(Problem) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = try next()
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw .malformed
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Reads a number; a value of a top-level integer field must be an integer that fits in 64 bits.
    private mutating func scanNumber() throws(Problem) {
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        let digits = index
        switch try next() {
        case UInt8(ascii: "0"): break
        case UInt8(ascii: "1")...UInt8(ascii: "9"): _ = skipDigits()
        default: throw .malformed
        }
        let integerPart = digits..<index
        var whole = true
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard skipDigits() else { throw .malformed }
            whole = false
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard skipDigits() else { throw .malformed }
            whole = false
        }
        guard open.count == 1, let field = topLevelKey, integerFields.contains(field) else { return }
        guard whole else { throw .notAnInteger(field: field) }
        guard fitsInInt64(integerPart, negative: negative) else { throw .integerOutOfRange(field: field) }
    }

    private func fitsInInt64(_ digits: Range<Int>, negative: Bool) -> Bool {
        var magnitude: UInt64 = 0
        for position in digits {
            let (times10, overflowed) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carried) = times10.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
            guard !overflowed, !carried else { return false }
            magnitude = sum
        }
        return magnitude <= (negative ? Int64.min.magnitude : UInt64(Int64.max))
    }

    /// Skips digits; `true` if there was at least one.
    private mutating func skipDigits() -> Bool {
        let start = index
        while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
        return index > start
    }

    private mutating func expect(_ rest: StaticString) throws(Problem) {
        for expected in UnsafeRawBufferPointer(start: rest.utf8Start, count: rest.utf8CodeUnitCount) {
            guard try next() == expected else { throw .malformed }
        }
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    /// The byte at `index`, moving past it; the end of the body here is malformed.
    private mutating func next() throws(Problem) -> UInt8 {
        guard index < bytes.count else { throw .malformed }
        defer { index += 1 }
        return bytes[index]
    }
}
