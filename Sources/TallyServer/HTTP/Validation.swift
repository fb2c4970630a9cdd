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

    /// A new address for an account (`POST /v1/auth/link`): ``accountEmail(_:)``'s form, in RFC 5321's mailbox syntax
    /// (``isMailbox(_:)``), so nothing but an address reaches the account, the console or the mail hook's `to`.
    static func email(_ value: String) throws -> String {
        let email = try accountEmail(value)
        guard isMailbox(email) else {
            throw APIError(
                .invalidField,
                "'email' must be an address as RFC 5321 writes one: dot-separated parts of letters, digits and !#$%&*+-/=?^_`{|}~ "
                    + "before the @, a domain name (letters, digits and hyphens in dot-separated labels) after it.")
        }
        return email
    }

    /// Whether `email` (as ``accountEmail(_:)`` gives it) is an RFC 5321 mailbox: a dot-atom local part of at most 64
    /// bytes — RFC 5322's `atext` without the apostrophe (the issue's rule: none of `<>"'();,` or space), so a quoted
    /// local part is refused too — then `@` and a domain of at least two LDH labels (letters, digits, hyphens; 1 to 63
    /// bytes, no hyphen at either end; the last not all digits), at most 253 bytes. Address literals (`[192.0.2.1]`)
    /// and internationalized addresses (RFC 6531) are refused: a domain is written in ASCII (`xn--` for an IDN).
    static func isMailbox(_ email: String) -> Bool {
        let parts = email.utf8.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        guard parts.count == 2, (1...64).contains(parts[0].count), (1...253).contains(parts[1].count) else { return false }
        let atoms = parts[0].split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard atoms.allSatisfy({ !$0.isEmpty && $0.allSatisfy(isAtext) }) else { return false }
        let labels = parts[1].split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard labels.count >= 2, let last = labels.last, !last.allSatisfy(isDigit) else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.count) && label.first != UInt8(ascii: "-") && label.last != UInt8(ascii: "-")
                && label.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") }
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) || (0x41...0x5A).contains(byte) }
    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
    /// RFC 5322 `atext` without `'`.
    private static func isAtext(_ byte: UInt8) -> Bool {
        isLetter(byte) || isDigit(byte) || "!#$%&*+-/=?^_`{|}~".utf8.contains(byte)
    }

    /// An email as accounts are keyed by it: NFKC-normalised (fullwidth `ａ` is `a`), trimmed, in lower case.
    /// Invisible characters (format characters such as zero-width spaces and bidi controls, other default
    /// ignorables, separators, unassigned and private-use code points) are refused, so two addresses
    /// that look the same are the same. What finds an account (sign-in, a password reset, the console's search)
    /// takes this form only, so an address linked before ``email(_:)`` kept to RFC 5321 still signs in.
    static func accountEmail(_ value: String) throws -> String {
        let email = nfkc(nfkc(value).trimmingCharacters(in: .whitespaces).lowercased())
        guard !email.unicodeScalars.contains(where: isInvisible) else {
            throw APIError(
                .invalidField, "'email' must not contain spaces or invisible, formatting or bidirectional-control characters.")
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard (3...254).contains(email.utf8.count), parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
            !parts[1].hasPrefix("."), !parts[1].hasSuffix(".")
        else {
            throw APIError(.invalidField, "'email' is not a valid email address.")
        }
        return email
    }

    /// bcrypt reads at most this many bytes of a password and ignores the rest.
    static let maxPasswordBytes = 72

    /// A password as bcrypt sees it: NFKC-normalised (the same password typed on another keyboard matches),
    /// at least 8 characters as sent (Unicode code points, as openapi.yaml's `minLength` counts them: grapheme
    /// clusters or the normalised form can be fewer), at most ``maxPasswordBytes`` UTF-8 bytes (longer ones would be
    /// silently cut), and without NUL (where bcrypt's C string would end).
    static func password(_ value: String, field: String = "password") throws -> String {
        let password = nfkc(value)
        guard value.unicodeScalars.count >= 8 else {
            throw APIError(.invalidField, "'\(field)' must be at least 8 characters.")
        }
        guard password.utf8.count <= maxPasswordBytes else {
            throw APIError(
                .invalidField, "'\(field)' must be at most \(maxPasswordBytes) bytes in UTF-8 (after NFKC normalisation).")
        }
        guard !password.utf8.contains(0) else {
            throw APIError(.invalidField, "'\(field)' must not contain the NUL character.")
        }
        return password
    }

    /// IANA zone names (at most 64 of `A-Z a-z 0-9 / _ - +`) that Foundation resolves: `Area/Location` names
    /// (`Europe/Paris`, `Asia/Kolkata`, `America/Argentina/Buenos_Aires`, also older links such as `Asia/Saigon`
    /// and `Etc/GMT-5`), and `UTC` or `GMT`. Names without a slash other than those two are refused even where Foundation resolves them:
    /// they are abbreviations (`EST`, `IST` — India, Israel or Ireland?), offsets (`GMT+5`) or deprecated
    /// country links (`Japan`), none of which an app should store as a user's zone.
    /// (`TimeZone.knownTimeZoneIdentifiers` is no test: on Linux it lacks current names such as `Asia/Kolkata`.)
    static func timezone(_ value: String) throws -> String {
        let named = value == "UTC" || value == "GMT" || value.contains("/")
        let characters = value.utf8.allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2F || byte == 0x5F || byte == 0x2D || byte == 0x2B
        }
        guard named, characters, value.utf8.count <= 64, TimeZone(identifier: value) != nil else {
            throw APIError(.invalidField, "'timezone' must be an IANA time zone name such as 'Europe/Paris'.")
        }
        return value
    }

    /// A DeviceCheck token (`DCDevice.generateToken()`, standard base64): at most 16 KiB of base64.
    static func deviceCheckToken(_ value: String) throws -> String {
        guard (1...16_384).contains(value.utf8.count), Data(base64Encoded: value) != nil else {
            throw APIError(.invalidField, "'deviceCheckToken' must be a base64 DeviceCheck token of at most 16384 characters.")
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

    /// Unicode normalisation form KC: compatibility characters (fullwidth letters, ligatures such as `ﬁ`)
    /// become their plain equivalents, then canonical composition.
    private static func nfkc(_ value: String) -> String { value.precomposedStringWithCompatibilityMapping }

    /// Characters that show nothing, or change how their neighbours show, in an email address.
    private static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        let properties = scalar.properties
        switch properties.generalCategory {
        case .control, .format, .privateUse, .surrogate, .unassigned:
            return true
        case .spaceSeparator, .lineSeparator, .paragraphSeparator:
            return true
        default:
            // Default ignorables include the Hangul fillers and variation selectors; U+2800 is a blank Braille cell.
            return properties.isDefaultIgnorableCodePoint || properties.isWhitespace || scalar == "\u{2800}"
        }
    }
}
