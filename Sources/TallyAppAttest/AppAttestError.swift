/// The App Attest environment an app's keys are attested in: the App Attest entitlement's value
/// (`com.apple.developer.devicecheck.appattest-environment`), and the AAGUID Apple writes.
public enum AppAttestEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
    /// Keys of App Store and TestFlight builds.
    case production
    /// Keys of development builds.
    case development

    /// The 16-byte AAGUID of the attested credential: `appattest` followed by seven zero bytes, or `appattestdevelop`.
    public var aaguid: [UInt8] {
        switch self {
        case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        case .development: Array("appattestdevelop".utf8)
        }
    }
}

/// Why an attestation or an assertion was refused: ``code`` is stable (for metrics and tests), ``description`` says
/// which rule failed without repeating the object.
public struct AppAttestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A rule of "Validating apps that connect to your server".
    public enum Code: String, Sendable, Hashable {
        /// Not a CBOR attestation or assertion object with the expected fields.
        case malformed
        /// `fmt` is not `apple-appattest`.
        case wrongFormat = "wrong_format"
        /// The credential certificate does not chain to a trusted root at the given time (or `x5c` is not two certificates).
        case untrustedChain = "untrusted_chain"
        /// The credential certificate's nonce is not SHA-256(authData ‖ SHA-256(challenge)).
        case nonceMismatch = "nonce_mismatch"
        /// SHA-256 of the credential's public key, or the credential id, is not the key id.
        case keyIdMismatch = "key_id_mismatch"
        /// `rpIdHash` is not SHA-256 of `teamId.bundleId`.
        case wrongApp = "wrong_app"
        /// An attestation's counter is not 0.
        case nonzeroCounter = "nonzero_counter"
        /// The AAGUID names the other environment.
        case wrongEnvironment = "wrong_environment"
        /// The assertion's signature does not verify with the stored key.
        case invalidSignature = "invalid_signature"
        /// The assertion's counter is not above the stored one: a replay, or a clone of the key's state.
        case counterNotIncreased = "counter_not_increased"
    }

    /// The rule that failed.
    public var code: Code
    /// What failed, in words safe to log.
    public var description: String

    /// An error of `code` saying `description`.
    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
