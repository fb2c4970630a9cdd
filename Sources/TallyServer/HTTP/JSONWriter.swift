import Foundation
import TallyAPI
import TallyStore

/// A value the hottest replies write by hand instead of through `JSONEncoder` (a third of the writer's
/// work per action in the profile). The bytes are exactly what `TallyJSON.encoder()` writes — sorted keys,
/// ISO 8601 dates, escaped slashes — and a test holds them to that.
protocol JSONWritable {
    /// Appends the value's JSON.
    func write(to json: inout JSONWriter)
}

/// Appends JSON to a byte array.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    /// The JSON of `value`.
    static func bytes(of value: some JSONWritable) -> [UInt8] {
        var json = JSONWriter()
        value.write(to: &json)
        return json.bytes
    }

    /// Appends literal JSON text (punctuation and keys, already quoted).
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends bytes that are already JSON (a stored document's canonical `data`).
    mutating func json(_ text: some Collection<UInt8>) {
        bytes.append(contentsOf: text)
    }

    /// Appends a JSON string, escaped as `JSONEncoder` escapes it.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw(#"\""#)
            case UInt8(ascii: "\\"): raw(#"\\"#)
            case UInt8(ascii: "/"): raw(#"\/"#)
            case 0x08: raw(#"\b"#)
            case 0x0C: raw(#"\f"#)
            case 0x0A: raw(#"\n"#)
            case 0x0D: raw(#"\r"#)
            case 0x09: raw(#"\t"#)
            case 0..<0x20:
                raw(#"\u00"#)
                bytes.append(Self.hex[Int(byte >> 4)])
                bytes.append(Self.hex[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// Appends an integer.
    mutating func int(_ value: some BinaryInteger) {
        if value == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = value.magnitude
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
        }
    }

    /// Appends a JSON array of `values`.
    mutating func array(_ values: [some JSONWritable]) {
        raw("[")
        for (index, value) in values.enumerated() {
            if index > 0 { raw(",") }
            value.write(to: &self)
        }
        raw("]")
    }

    /// Appends `key` — literal JSON: the punctuation before the member and its quoted name, `,"name":` — and an
    /// integer. The keyed forms below write one member a line, keys sorted by hand as `JSONEncoder` sorts them.
    mutating func int(_ key: StaticString, _ value: some BinaryInteger) {
        raw(key)
        int(value)
    }

    /// Appends `key` (literal JSON, as in ``int(_:_:)``) and a JSON string.
    mutating func string(_ key: StaticString, _ value: String) {
        raw(key)
        string(value)
    }

    /// Appends `key` (literal JSON, as in ``int(_:_:)``) and a date.
    mutating func date(_ key: StaticString, _ value: Date) {
        raw(key)
        date(value)
    }

    /// Appends `key` (literal JSON, as in ``int(_:_:)``) and `true` or `false`.
    mutating func bool(_ key: StaticString, _ value: Bool) {
        raw(key)
        bool(value)
    }

    /// Appends `key` (literal JSON, as in ``int(_:_:)``) and a value's JSON.
    mutating func value(_ key: StaticString, _ value: some JSONWritable) {
        raw(key)
        value.write(to: &self)
    }

    /// Appends `key` (literal JSON, as in ``int(_:_:)``) and a JSON array of `values`.
    mutating func array(_ key: StaticString, _ values: [some JSONWritable]) {
        raw(key)
        array(values)
    }

    /// Appends `true` or `false`.
    mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// Appends a date as `JSONEncoder`'s `.iso8601` strategy does: `"yyyy-MM-ddTHH:mm:ssZ"` in UTC, whole
    /// seconds (rounded down). Dates before the Gregorian reform (1582-10-15), which Foundation writes in
    /// the Julian calendar, go through Foundation's formatter.
    mutating func date(_ value: Date) {
        let seconds = Int64(saturating: value.timeIntervalSince1970, rounding: .down)
        guard seconds >= -12_219_292_800 else {
            string(ISO8601DateFormatter().string(from: value))
            return
        }
        let (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (day, time) = secondOfDay < 0 ? (days - 1, secondOfDay + 86_400) : (days, secondOfDay)
        let (year, month, dayOfMonth) = Self.civil(fromDays: day)
        bytes.append(UInt8(ascii: "\""))
        pad(year, 4)
        bytes.append(UInt8(ascii: "-"))
        pad(month, 2)
        bytes.append(UInt8(ascii: "-"))
        pad(dayOfMonth, 2)
        bytes.append(UInt8(ascii: "T"))
        pad(time / 3600, 2)
        bytes.append(UInt8(ascii: ":"))
        pad(time / 60 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        pad(time % 60, 2)
        raw("Z\"")
    }

    private mutating func pad(_ value: Int64, _ width: Int) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Year, month and day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Wallet: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.int(#"{"available":"#, available)
        json.int(#","balance":"#, balance)
        json.int(#","held":"#, held)
        json.int(#","version":"#, version)
        json.raw("}")
    }
}

extension Quota: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.int(#"{"limit":"#, limit)
        json.string(#","name":"#, name)
        json.int(#","remaining":"#, remaining)
        json.date(#","resetsAt":"#, resetsAt)
        json.bool(#","unlimited":"#, unlimited)
        json.int(#","used":"#, used)
        json.raw("}")
    }
}

extension ActionResult: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.string(#"{"action":"#, action)
        json.string(#","paidWith":"#, paidWith.rawValue)
        json.array(#","quotas":"#, quotas)
        json.int(#","tokensCharged":"#, tokensCharged)
        json.value(#","wallet":"#, wallet)
        json.raw("}")
    }
}

extension Hold: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.int(#"{"amount":"#, amount)
        if let capturedAmount { json.int(#","capturedAmount":"#, capturedAmount) }
        json.date(#","expiresAt":"#, expiresAt)
        json.string(#","holdId":"#, holdId)
        json.string(#","status":"#, status)
        json.value(#","wallet":"#, wallet)
        json.raw("}")
    }
}

extension LedgerEntry: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.int(#"{"amount":"#, amount)
        json.int(#","balanceAfter":"#, balanceAfter)
        json.date(#","createdAt":"#, createdAt)
        json.int(#","heldChange":"#, heldChange)
        json.int(#","id":"#, id)
        json.string(#","kind":"#, kind)
        if let reason { json.string(#","reason":"#, reason) }
        json.raw("}")
    }
}

extension GrantResponse: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.value(#"{"entry":"#, entry)
        json.value(#","wallet":"#, wallet)
        json.raw("}")
    }
}

extension QuotaList: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.array(#"{"items":"#, items)
        json.raw("}")
    }
}

extension ErrorResponse: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.string(#"{"error":{"code":"#, error.code.rawValue)
        if let current = error.current {
            json.value(#","current":"#, current)
        } else if error.code == .versionConflict {
            json.raw(#","current":null"#)  // the document does not exist: said, not left out
        }
        json.string(#","message":"#, error.message)
        json.raw("}")
        if let guest {
            json.int(#","guest":{"balance":"#, guest.balance)
            json.int(#","documents":"#, guest.documents)
            json.int(#","purchases":"#, guest.purchases)
            json.raw("}")
        }
        if let quotas { json.array(#","quotas":"#, quotas) }
        if let wallet { json.value(#","wallet":"#, wallet) }
        json.raw("}")
    }
}
