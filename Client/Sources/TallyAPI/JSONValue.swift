/// An object key of a ``JSONValue``: a string compared and hashed by its Unicode code points, as RFC 8259 and
/// RFC 7386 compare member names — not by canonical equivalence, as Swift's `String` is. So `"é"` (U+00E9) and
/// `"e\u{301}"` (e, combining acute) are two keys, as every other JSON implementation sees them.
///
/// A string literal is a key (`object["model"]`, `["role": .string("user")]`), and an object's dictionary
/// takes `String` subscripts too.
public struct JSONKey: Hashable, Comparable, Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The key's text.
    public let string: String

    /// The key `string`, exactly as its code points are.
    public init(_ string: String) { self.string = string }

    /// A key written as a literal.
    public init(stringLiteral value: String) { string = value }

    /// Equal when their code points are (their UTF-8 bytes).
    public static func == (lhs: JSONKey, rhs: JSONKey) -> Bool { lhs.string.utf8.elementsEqual(rhs.string.utf8) }

    /// Hashes the UTF-8 bytes.
    public func hash(into hasher: inout Hasher) {
        var text = string
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        hasher.combine(0xFF as UInt8)  // no UTF-8 byte: ends the key, so ("ab", "c") and ("a", "bc") hash apart
    }

    /// In the order of their UTF-8 bytes (= of their code points): the order of keys in canonical bytes.
    public static func < (lhs: JSONKey, rhs: JSONKey) -> Bool { lhs.string.utf8.lexicographicallyPrecedes(rhs.string.utf8) }

    /// The text.
    public var description: String { string }
}

extension Dictionary where Key == JSONKey {
    /// The value of the key spelt exactly `key` (code point by code point).
    public subscript(key: String) -> Value? {
        get { self[JSONKey(key)] }
        set { self[JSONKey(key)] = newValue }
    }
}

/// Any JSON value: what a synced document's `data` holds.
///
/// Numbers keep their literal text, so a 64-bit id or an exact decimal survives a round trip unchanged.
/// ``parse(_:)`` is strict (RFC 8259, no duplicate keys, bounded nesting) and ``bytes`` is canonical
/// (compact, object keys sorted by their UTF-8 bytes): two equal values have the same bytes, which is what
/// the server stores and what a document's size is measured on. Strings and object keys (``JSONKey``) compare
/// by their code points, as JSON does, not by canonical equivalence as Swift's `String` does.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as its JSON literal (for example `42`, `-0.5`, `1e3`).
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([JSONKey: JSONValue])

    /// The deepest nesting of arrays and objects ``parse(_:)`` accepts.
    public static let maxDepth = 64

    /// A number value from an integer.
    public static func int(_ value: some BinaryInteger) -> JSONValue { .number(String(value)) }

    /// The object's fields, or `nil` when the value is not an object.
    public var objectValue: [JSONKey: JSONValue]? {
        if case .object(let fields) = self { return fields }
        return nil
    }

    /// The string, or `nil` when the value is not a string.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The value of a field of an object; `nil` when absent or when the value is not an object.
    public subscript(key: String) -> JSONValue? { objectValue?[JSONKey(key)] }

    /// Equal when of the same kind with equal contents; strings by their code points (so equal values have equal
    /// ``bytes``), numbers by their literal.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a.utf8.elementsEqual(b.utf8)
        case (.string(let a), .string(let b)): a.utf8.elementsEqual(b.utf8)
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    /// Hashes what ``==`` compares.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let value): hasher.combine(1 as UInt8); hasher.combine(value)
        case .number(let literal): hasher.combine(2 as UInt8); hasher.combine(JSONKey(literal))
        case .string(let text): hasher.combine(3 as UInt8); hasher.combine(JSONKey(text))
        case .array(let items): hasher.combine(4 as UInt8); hasher.combine(items)
        case .object(let fields): hasher.combine(5 as UInt8); hasher.combine(fields)
        }
    }

    /// RFC 7386 JSON Merge Patch: `patch` applied to this value. An object patch sets its fields
    /// recursively and removes those it sets to `null`; any other patch replaces the value.
    public func merging(_ patch: JSONValue) -> JSONValue {
        guard case .object(let changes) = patch else { return patch }
        var fields = objectValue ?? [:]
        for (key, change) in changes {
            if change == .null {
                fields.removeValue(forKey: key)
            } else {
                fields[key] = (fields[key] ?? .null).merging(change)
            }
        }
        return .object(fields)
    }

    /// The merge patch that turns `old` into `new` (`old.merging(patch) == new`): only changed fields, removed
    /// fields as `null`. Not defined for a `new` holding `null` inside an object (merge patch cannot set a
    /// field to `null`); such fields are left out.
    public static func mergePatch(from old: JSONValue, to new: JSONValue) -> JSONValue {
        guard case .object(let before) = old, case .object(let after) = new else { return new }
        var patch: [JSONKey: JSONValue] = [:]
        for (key, value) in after where before[key] != value && value != .null {
            patch[key] = before[key].map { mergePatch(from: $0, to: value) } ?? value.removingNullFields
        }
        for key in before.keys where after[key] == nil || after[key] == .null {
            if before[key] != .null { patch[key] = .null }
        }
        return .object(patch)
    }

    private var removingNullFields: JSONValue {
        guard case .object(let fields) = self else { return self }
        return .object(fields.filter { $0.value != .null }.mapValues(\.removingNullFields))
    }
}

// MARK: - Parsing

/// Why bytes are not one JSON value ``JSONValue/parse(_:)`` accepts.
public struct JSONParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong, and where (a byte offset).
    public var description: String
    init(_ description: String) { self.description = description }
}

extension JSONValue {
    /// Parses one JSON value (RFC 8259) surrounded by optional whitespace. Refuses invalid UTF-8, lone
    /// surrogates, duplicate object keys and nesting deeper than ``maxDepth``.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        func document(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
            var parser = JSONParser(bytes: buffer)
            return Result { () throws(JSONParseError) in try parser.document() }
        }
        // A request body's bytes are read where they are; only a collection in pieces is copied first.
        let result = bytes.withContiguousStorageIfAvailable(document) ?? Array(bytes).withUnsafeBufferPointer(document)
        return try result.get()
    }

    /// Parses JSON text.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue { try parse(Array(text.utf8)) }
}

struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0
    /// Set: base64 `data:` URL strings are not read into strings but noted in ``dataURLs`` under a stand-in that
    /// starts with this (``JSONObjectText``).
    var standInPrefix: String?
    /// The stand-ins of the `data:` URLs left in the text, and where each URL's text lies (between its quotes).
    var dataURLs: [String: Range<Int>] = [:]
    /// Where each top-level member's value lies, when the text is an object.
    var members: [JSONKey: Range<Int>] = [:]

    init(bytes: UnsafeBufferPointer<UInt8>, standInPrefix: String? = nil) {
        self.bytes = bytes
        self.standInPrefix = standInPrefix
    }

    mutating func document() throws(JSONParseError) -> JSONValue {
        let value = try self.value()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the value") }
        return value
    }

    func fail(_ what: String) -> JSONParseError { JSONParseError("\(what) at byte \(index)") }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func value() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""):
            if let prefix = standInPrefix, let url = dataURL() {
                index = url.upperBound + 1
                let standIn = prefix + String(dataURLs.count)
                dataURLs[standIn] = url
                return .string(standIn)
            }
            return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end") }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw fail("unexpected character") }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        guard depth <= JSONValue.maxDepth else { throw fail("nesting deeper than \(JSONValue.maxDepth)") }
    }

    mutating func object() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var fields: [JSONKey: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(fields)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = JSONKey(try string())
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            let start = index
            let value = try self.value()
            if depth == 1 { members[key] = start..<index }
            guard fields.updateValue(value, forKey: key) == nil else { throw fail("duplicate key") }
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return .object(fields)
            } else {
                throw fail("expected ',' or '}'")
            }
        }
    }

    mutating func array() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(items)
        }
        while true {
            items.append(try value())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return .array(items)
            } else {
                throw fail("expected ',' or ']'")
            }
        }
    }

    mutating func number() throws(JSONParseError) -> String {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("malformed number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("malformed number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("malformed number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// At an opening quote: the text between the quotes when the string is a base64 `data:` URL (`data:` in any
    /// case, printable ASCII to its first comma within 256 bytes, then only the base64 alphabet and up to two `=`),
    /// which as JSON needs no unescaping and as base64 no second check; nil for every other string. One vector scan
    /// over an image's megabytes, nothing copied.
    func dataURL() -> Range<Int>? {
        let start = index + 1
        guard ImageDataURL.hasDataScheme(bytes[start...]) else { return nil }
        var comma = start + 5
        while comma < bytes.count, bytes[comma] != UInt8(ascii: ",") {
            let byte = bytes[comma]
            guard comma - start < 256, byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { return nil }
            comma += 1
        }
        guard comma < bytes.count else { return nil }
        var end = ByteScan.base64Run(bytes, from: comma + 1)
        for _ in 0..<2 where end < bytes.count && bytes[end] == UInt8(ascii: "=") { end += 1 }
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\"") else { return nil }
        return start..<end
    }

    /// A string starting at the opening quote; validates UTF-8 and escapes.
    mutating func string() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes.
        index = ByteScan.firstJSONSpecial(bytes, from: start)
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
            index += 1
            guard let text = validUTF8(raw) else { throw fail("invalid UTF-8 in a string") }
            return text
        }
        if index < bytes.count, bytes[index] < 0x20 { throw fail("control character in a string") }
        var scalars = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = scalars.withUnsafeBufferPointer(validUTF8) else { throw fail("invalid UTF-8 in a string") }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unexpected end") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("lone surrogate") }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw fail("lone surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw fail("invalid escape") }
                    scalars.append(contentsOf: UTF8.encode(scalar)!)
                default: throw fail("invalid escape")
                }
            default:
                guard byte >= 0x20 else { throw fail("control character in a string") }
                scalars.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    /// The text of `raw`, or `nil` when it is not valid UTF-8.
    func validUTF8(_ raw: UnsafeBufferPointer<UInt8>) -> String? {
        if #available(iOS 18, macOS 15, tvOS 18, watchOS 11, visionOS 2, *) {
            // Checked as it is copied: one pass (the server, an image's megabytes of base64).
            return String(validating: raw, as: UTF8.self)
        }
        // Decoding repairs what is invalid, so the text is valid when its bytes are the raw ones. ASCII needs no
        // comparison; otherwise one pass over two contiguous buffers.
        var text = String(decoding: raw, as: UTF8.self)
        if ByteScan.isASCII(raw) { return text }
        return text.withUTF8 { $0.elementsEqual(raw) } ? text : nil
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("unexpected end") }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            code = code << 4 | digit
            index += 1
        }
        return code
    }
}

// MARK: - Canonical bytes

extension JSONValue {
    /// The canonical JSON text: compact, object keys sorted by their UTF-8 bytes, strings escaped only
    /// where JSON requires it. Equal values have equal bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(to: &out)
        return out
    }

    /// The canonical JSON text as a string.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends the canonical JSON text to `out`.
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(true): out.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
        case .bool(false): out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .string(let text): Self.writeString(text, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (offset, item) in items.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            for (offset, key) in fields.keys.sorted().enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key.string, to: &out)
                out.append(UInt8(ascii: ":"))
                fields[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `text` as a JSON string: `"` and `\` and control characters escaped, nothing else.
    public static func writeString(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            // Runs that need no escape are copied whole: an image's base64 is megabytes of one, for which the room is
            // made once, with room to spare for the rest of the document (else its next bytes copy the megabytes again).
            if bytes.count > 65_536 { out.reserveCapacity(out.count + bytes.count + 65_536) }
            out.append(UInt8(ascii: "\""))
            var run = 0
            while run < bytes.count {
                let special = ByteScan.firstJSONSpecial(bytes, from: run)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<special]))
                guard special < bytes.count else { break }
                run = special + 1
                let byte = bytes[special]
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            out.append(UInt8(ascii: "\""))
        }
    }
}

// MARK: - Codable

extension JSONValue: Codable {
    /// Decodes any JSON value. Numbers become their shortest literal (integers exactly, others through `Double`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .number(String(value))
        } else if let value = try? container.decode(Double.self) {
            guard value.isFinite else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "a JSON number must be finite")
            }
            self = .number(abs(value) < 1e15 ? Int64(exactly: value).map(String.init) ?? String(value) : String(value))
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            // A decoder's keyed container may already have merged keys that are canonically equivalent
            // (Foundation's does): a value that must keep them apart is parsed from its bytes (``parse(_:)``).
            let object = try decoder.container(keyedBy: AnyJSONKey.self)
            var fields: [JSONKey: JSONValue] = [:]
            for key in object.allKeys { fields[JSONKey(key.stringValue)] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(fields)
        }
    }

    /// Encodes the value; numbers as integers when their literal is one, else as `Double`.
    public func encode(to encoder: any Encoder) throws {
        if case .object(let fields) = self {
            var object = encoder.container(keyedBy: AnyJSONKey.self)
            for (key, value) in fields { try object.encode(value, forKey: AnyJSONKey(stringValue: key.string)) }
            return
        }
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let literal):
            if let integer = Int64(literal) {
                try container.encode(integer)
            } else {
                try container.encode(Double(literal) ?? 0)
            }
        case .string(let value): try container.encode(value)
        case .array(let items): try container.encode(items)
        case .object: break  // above
        }
    }
}

/// Any object key, for the keyed containers of ``JSONValue``'s `Codable` form.
private struct AnyJSONKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
