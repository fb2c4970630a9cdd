import Foundation
import TallyAPI
import TallyStore

/// Checks of request values; each failure is a 400 with a message naming the field.
enum Validate {
    static func amount(_ value: Int64, field: String = "amount", allowZero: Bool = false) throws -> Int64 {
        let lower: Int64 = allowZero ? 0 : 1
        guard value >= lower, value <= Limits.maxAmount else {
            throw APIError(.invalidField, "'\(field)' must be between \(lower) and \(Limits.maxAmount).")
        }
        return value
    }

    static func text(_ value: String, field: String, length: ClosedRange<Int>) throws -> String {
        guard length.contains(value.count), !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw APIError(.invalidField, "'\(field)' must be \(length.lowerBound) to \(length.upperBound) characters on one line.")
        }
        return value
    }

    static func deviceId(_ value: String) throws -> String {
        guard (16...128).contains(value.utf8.count), value.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw APIError(.invalidField, "'deviceId' must be a random secret of 16 to 128 printable ASCII characters.")
        }
        return value
    }

    static func email(_ value: String) throws -> String {
        let email = value.trimmingCharacters(in: .whitespaces).lowercased()
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard (3...254).contains(email.utf8.count), parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
            !parts[1].hasPrefix("."), !parts[1].hasSuffix("."),
            !email.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else {
            throw APIError(.invalidField, "'email' is not a valid email address.")
        }
        return email
    }

    static func password(_ value: String) throws -> String {
        guard (8...256).contains(value.count) else {
            throw APIError(.invalidField, "'password' must be 8 to 256 characters.")
        }
        return value
    }

    /// IANA zone names only (`Europe/Paris`, `UTC`), not abbreviations or offsets.
    static func timezone(_ value: String) throws -> String {
        guard value == "UTC" || knownZones.contains(value) else {
            throw APIError(.invalidField, "'timezone' must be an IANA time zone name such as 'Europe/Paris'.")
        }
        return value
    }

    static func language(_ value: String) throws -> String {
        guard (2...35).contains(value.utf8.count),
            value.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D })
        else {
            throw APIError(.invalidField, "'language' must be a language tag such as 'en' or 'pt-BR'.")
        }
        return value
    }

    private static let knownZones = Set(TimeZone.knownTimeZoneIdentifiers)
}
