import Foundation

/// The JSON of App Store signed payloads: dates are whole milliseconds since 1970 (`1712345678901`), as Apple writes them.
///
/// One decoder and one encoder for the format, shared by ``AppStoreVerifier`` and the local stand-in that signs payloads.
/// A date decodes to `Date(timeIntervalSince1970: ms / 1000)`, the same conversion as the rest of Tally's
/// millisecond timestamps, and encodes rounded to the nearest millisecond.
public enum AppStoreJSON {
    /// The dates a signed payload may carry, in milliseconds since 1970: 2000-01-01T00:00:00Z to the last millisecond of
    /// the year 9999. Apple signs nothing older than the App Store, and nothing later than what RFC 3339 can write; a
    /// date beyond them (say 1e300, or −2⁶³ ms) makes the whole payload `malformed`, so no date from a payload can
    /// reach a conversion that would not hold it.
    public static let dateMillis: ClosedRange<Int64> = 946_684_800_000...253_402_300_799_999

    /// A decoder for signed payloads (millisecond dates within ``dateMillis``; a fractional number is accepted).
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let millis = try? container.decode(Int64.self), dateMillis.contains(millis) {
                return Date(timeIntervalSince1970: TimeInterval(millis) / 1000)
            }
            let millis = try container.decode(Double.self)
            guard millis >= Double(dateMillis.lowerBound), millis <= Double(dateMillis.upperBound) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "a date must be a number of milliseconds from the year 2000 to 9999")
            }
            return Date(timeIntervalSince1970: millis / 1000)
        }
        return decoder
    }

    /// An encoder for signed payloads (millisecond dates, sorted keys).
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(milliseconds(date))
        }
        return encoder
    }

    /// `date` in whole milliseconds since 1970, rounded to the nearest (a date beyond what 64 bits of milliseconds
    /// hold, some 292 million years away, is clamped to the nearest that fits).
    public static func milliseconds(_ date: Date) -> Int64 {
        let millis = (date.timeIntervalSince1970 * 1000).rounded()
        guard millis > -9.2e18, millis < 9.2e18, let whole = Int64(exactly: millis) else {
            return millis < 0 ? -9_200_000_000_000_000_000 : 9_200_000_000_000_000_000
        }
        return whole
    }
}
