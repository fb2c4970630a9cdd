import Foundation

/// The JSON of App Store signed payloads: dates are whole milliseconds since 1970 (`1712345678901`), as Apple writes them.
///
/// One decoder and one encoder for the format, shared by ``AppStoreVerifier`` and the local stand-in that signs payloads.
/// A date decodes to `Date(timeIntervalSince1970: ms / 1000)`, the same conversion as the rest of Tally's
/// millisecond timestamps, and encodes rounded to the nearest millisecond.
public enum AppStoreJSON {
    /// A decoder for signed payloads (millisecond dates; a fractional number is accepted).
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let millis = try? container.decode(Int64.self) {
                return Date(timeIntervalSince1970: TimeInterval(millis) / 1000)
            }
            let millis = try container.decode(Double.self)
            guard millis.isFinite else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "a date must be a finite number of milliseconds")
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
