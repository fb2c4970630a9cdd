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
        json.raw(#"{"available":"#)
        json.int(available)
        json.raw(#","balance":"#)
        json.int(balance)
        json.raw(#","held":"#)
        json.int(held)
        json.raw(#","version":"#)
        json.int(version)
        json.raw("}")
    }
}

extension Quota: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"limit":"#)
        json.int(limit)
        json.raw(#","name":"#)
        json.string(name)
        json.raw(#","remaining":"#)
        json.int(remaining)
        json.raw(#","resetsAt":"#)
        json.date(resetsAt)
        json.raw(#","unlimited":"#)
        json.bool(unlimited)
        json.raw(#","used":"#)
        json.int(used)
        json.raw("}")
    }
}

extension ActionResult: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"action":"#)
        json.string(action)
        json.raw(#","paidWith":"#)
        json.string(paidWith.rawValue)
        json.raw(#","quotas":"#)
        json.array(quotas)
        json.raw(#","tokensCharged":"#)
        json.int(tokensCharged)
        json.raw(#","wallet":"#)
        wallet.write(to: &json)
        json.raw("}")
    }
}

extension Hold: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"amount":"#)
        json.int(amount)
        if let capturedAmount {
            json.raw(#","capturedAmount":"#)
            json.int(capturedAmount)
        }
        json.raw(#","expiresAt":"#)
        json.date(expiresAt)
        json.raw(#","holdId":"#)
        json.string(holdId)
        json.raw(#","status":"#)
        json.string(status)
        json.raw(#","wallet":"#)
        wallet.write(to: &json)
        json.raw("}")
    }
}

extension LedgerEntry: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"amount":"#)
        json.int(amount)
        json.raw(#","balanceAfter":"#)
        json.int(balanceAfter)
        json.raw(#","createdAt":"#)
        json.date(createdAt)
        json.raw(#","heldChange":"#)
        json.int(heldChange)
        json.raw(#","id":"#)
        json.int(id)
        json.raw(#","kind":"#)
        json.string(kind)
        if let reason {
            json.raw(#","reason":"#)
            json.string(reason)
        }
        json.raw("}")
    }
}

extension GrantResponse: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"entry":"#)
        entry.write(to: &json)
        json.raw(#","wallet":"#)
        wallet.write(to: &json)
        json.raw("}")
    }
}

extension QuotaList: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"items":"#)
        json.array(items)
        json.raw("}")
    }
}

extension ErrorResponse: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"error":{"code":"#)
        json.string(error.code.rawValue)
        if let current = error.current {
            json.raw(#","current":"#)
            current.write(to: &json)
        } else if error.code == .versionConflict {
            json.raw(#","current":null"#)  // the document does not exist: said, not left out
        }
        json.raw(#","message":"#)
        json.string(error.message)
        json.raw("}")
        if let guest {
            json.raw(#","guest":{"balance":"#)
            json.int(guest.balance)
            json.raw(#","documents":"#)
            json.int(guest.documents)
            json.raw(#","purchases":"#)
            json.int(guest.purchases)
            json.raw("}")
        }
        if let quotas {
            json.raw(#","quotas":"#)
            json.array(quotas)
        }
        if let wallet {
            json.raw(#","wallet":"#)
            wallet.write(to: &json)
        }
        json.raw("}")
    }
}
