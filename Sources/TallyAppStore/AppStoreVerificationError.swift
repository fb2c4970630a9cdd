/// Why a signed payload was refused: one named error per rule of ``AppStoreVerifier``, with a stable ``code`` for an
/// API's error answer. Its ``message`` says which rule failed and never quotes the payload, a certificate or the token.
public struct AppStoreVerificationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The refusal's stable name (`invalid_signature`, `untrusted_chain`, …), as an API answers it.
    public typealias Code = AppStoreValue<AppStoreValueKind.VerificationFailure>

    /// The rule of the certificate chain that failed (``Code/untrustedChain`` only).
    public enum ChainReason: String, Hashable, Sendable {
        /// `x5c` does not hold exactly three certificates.
        case certificateCount = "certificate_count"
        /// A certificate of `x5c` is not base64 DER.
        case unreadableCertificate = "unreadable_certificate"
        /// The leaf lacks the App Store receipt-signing extension 1.2.840.113635.100.6.11.1.
        case leafMissingAppleOID = "leaf_missing_apple_oid"
        /// The intermediate lacks Apple's intermediate extension 1.2.840.113635.100.6.2.1.
        case intermediateMissingAppleOID = "intermediate_missing_apple_oid"
        /// The leaf or the intermediate is not valid at the payload's `signedDate`.
        case notValidAtSignedDate = "not_valid_at_signed_date"
        /// The header's leaf and intermediate do not lead to a configured root (another root, a broken signature, a
        /// chain of another shape).
        case noPathToConfiguredRoot = "no_path_to_configured_root"
    }

    /// The refusal's name.
    public let code: Code
    /// For ``Code/untrustedChain``: the first rule the chain broke, in the order ``ChainReason`` lists them.
    public let reason: ChainReason?
    /// What failed, in words; safe to log and to answer (no payload or certificate content).
    public let message: String

    /// A refusal.
    public init(_ code: Code, reason: ChainReason? = nil, _ message: String) {
        self.code = code
        self.reason = reason
        self.message = message
    }

    /// `<code>: <message>`.
    public var description: String {
        if let reason { return "\(code.rawValue) (\(reason.rawValue)): \(message)" }
        return "\(code.rawValue): \(message)"
    }

    static func malformed(_ message: String) -> Self { Self(.malformed, message) }
    static func untrusted(_ reason: ChainReason, _ message: String) -> Self { Self(.untrustedChain, reason: reason, message) }
}

/// A verifier's configuration that cannot work: a root certificate that is not DER or PEM, the built-in root altered.
public struct AppStoreConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let message: String
    /// A configuration error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

extension AppStoreValue where Kind == AppStoreValueKind.VerificationFailure {
    /// Not a JWS, or a header or payload that is not what the App Store signs.
    public static var malformed: Self { Self(rawValue: "malformed") }
    /// The header's `alg` is not `ES256`.
    public static var unsupportedAlgorithm: Self { Self(rawValue: "unsupported_algorithm") }
    /// The `x5c` chain does not lead to a configured root under Apple's rules (``AppStoreVerificationError/reason`` says which).
    public static var untrustedChain: Self { Self(rawValue: "untrusted_chain") }
    /// The signature does not verify with the leaf certificate's key (the payload or header was changed).
    public static var invalidSignature: Self { Self(rawValue: "invalid_signature") }
    /// Signed for another app's bundle id.
    public static var wrongBundle: Self { Self(rawValue: "wrong_bundle") }
    /// Signed for an environment the configuration does not accept (or one never accepted: `Xcode`, `LocalTesting`).
    public static var wrongEnvironment: Self { Self(rawValue: "wrong_environment") }
    /// A Production notification for another app id, or with none configured to compare with.
    public static var wrongApp: Self { Self(rawValue: "wrong_app") }
}
