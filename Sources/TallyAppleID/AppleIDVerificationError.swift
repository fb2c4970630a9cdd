/// Why an identity token or an account notification was refused: one named error per rule of
/// ``AppleIdentityVerifier``, with a stable ``code`` for an API's error answer. Its ``message`` says which rule failed
/// and never quotes the token, a claim's value or the nonce.
///
/// Every code but ``Code/keysUnavailable`` is the client's fault or an attack (the server answers 401 and signs nobody
/// in); ``Code/keysUnavailable`` means Apple's keys could not be fetched (answer 503: the same token may verify later).
public struct AppleIDVerificationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The refusal's stable name (`wrong_audience`, `unknown_key`, …).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code as an API answers it.
        public let rawValue: String
        /// Wraps a code string.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw string.
        public var description: String { rawValue }

        /// Not a compact JWS, a header or payload that is not JSON, or a claim missing or of the wrong type.
        public static let malformed = Self(rawValue: "malformed")
        /// The header's `alg` is not `RS256` (`none`, `HS256`, anything else).
        public static let unsupportedAlgorithm = Self(rawValue: "unsupported_algorithm")
        /// The header's `kid` is not among Apple's keys, even after fetching them again.
        public static let unknownKey = Self(rawValue: "unknown_key")
        /// The signature does not verify with the key `kid` names (the header or payload was changed).
        public static let invalidSignature = Self(rawValue: "invalid_signature")
        /// `iss` is not `https://appleid.apple.com`.
        public static let wrongIssuer = Self(rawValue: "wrong_issuer")
        /// `aud` names none of the configured audiences (another app's token).
        public static let wrongAudience = Self(rawValue: "wrong_audience")
        /// Past `exp`, issued in the future, or issued too long ago (each beyond the leeway).
        public static let expired = Self(rawValue: "expired")
        /// The token's `nonce` is not the SHA-256 hex of the raw nonce sent, or it has none while one was sent.
        public static let wrongNonce = Self(rawValue: "wrong_nonce")
        /// Apple's keys could not be fetched (network, timeout, an answer that is not a key set): try again later.
        public static let keysUnavailable = Self(rawValue: "keys_unavailable")
    }

    /// The refusal's name.
    public let code: Code
    /// What failed, in words; safe to log and to answer (no token, claim value or nonce).
    public let message: String

    /// A refusal.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `<code>: <message>`.
    public var description: String { "\(code.rawValue): \(message)" }

    static func malformed(_ message: String) -> Self { Self(.malformed, message) }
}
