import Foundation

/// The JSON conventions of the Tally API: camelCase keys, ISO 8601 dates in UTC.
public enum TallyJSON {
    /// An encoder configured for the Tally wire format.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// A decoder configured for the Tally wire format.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}

/// HTTP header names with meaning in the Tally API.
public enum TallyHeader {
    /// Client-chosen key that makes a mutation safe to retry.
    public static let idempotencyKey = "Idempotency-Key"
    /// Set to `true` on a response replayed from an earlier request with the same key.
    public static let idempotentReplayed = "Idempotent-Replayed"
}
