import Foundation

/// Dates in request bodies: RFC 3339 `date-time`, every form of it and nothing else.
///
/// `2027-01-15T08:00:00Z`, lower-case `t`/`z`, fractional seconds of any length (kept to the nanosecond),
/// any offset `±HH:MM` up to `±23:59` (Foundation's ISO 8601 parser refuses offsets beyond ±18 h), and a leap
/// second (`:60`, read as the next second) only where it can fall: at 23:59 UTC. Refused: a missing offset,
/// `+0100`, a space for `T`, days a month does not have, hour 24.
enum RFC3339 {
    /// The instant `text` names, or `nil` if it is not an RFC 3339 date-time.
    static func date(from text: String) -> Date? {
        var text = text
        return text.withUTF8(parse)
    }

    /// The request decoder's date strategy: a string holding an RFC 3339 date-time, else `dataCorrupted`.
    @Sendable static func decode(_ decoder: any Decoder) throws -> Date {
        let container = try decoder.singleValueContainer()
        guard let date = date(from: try container.decode(String.self)) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected an RFC 3339 date-time such as 2027-01-15T08:00:00Z")
        }
        return date
    }

    private static func parse(_ text: UnsafeBufferPointer<UInt8>) -> Date? {
        func number(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= text.count else { return nil }
            var value = 0
            for byte in text[start..<start + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ position: Int, is allowed: StaticString) -> Bool {
            guard position < text.count else { return false }
            return UnsafeBufferPointer(start: allowed.utf8Start, count: allowed.utf8CodeUnitCount).contains(text[position])
        }
        guard let year = number(0, 4), byte(4, is: "-"), let month = number(5, 2), byte(7, is: "-"), let day = number(8, 2),
            byte(10, is: "Tt"), let hour = number(11, 2), byte(13, is: ":"), let minute = number(14, 2), byte(16, is: ":"),
            let second = number(17, 2)
        else { return nil }
        var position = 19
        var nanoseconds = 0
        if byte(position, is: ".") {
            position += 1
            var digits = 0
            while let digit = number(position, 1) {
                if digits < 9 { nanoseconds = nanoseconds * 10 + digit }
                digits += 1
                position += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 9) { nanoseconds *= 10 }
        }
        let offsetMinutes: Int
        if byte(position, is: "Zz") {
            offsetMinutes = 0
            position += 1
        } else if byte(position, is: "+-"), let offsetHour = number(position + 1, 2), byte(position + 3, is: ":"),
            let offsetMinute = number(position + 4, 2), offsetHour <= 23, offsetMinute <= 59
        {
            offsetMinutes = (offsetHour * 60 + offsetMinute) * (text[position] == UInt8(ascii: "-") ? -1 : 1)
            position += 6
        } else {
            return nil
        }
        guard position == text.count, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        let utcMinuteOfDay = ((hour * 60 + minute - offsetMinutes) % 1440 + 1440) % 1440
        guard second < 60 || utcMinuteOfDay == 1439 else { return nil }
        let seconds = daysSinceEpoch(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
            - offsetMinutes * 60
        return Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1_000_000_000)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
