/// WebAuthn authenticator data as App Attest writes it ("Validating apps that connect to your server"): the relying
/// party id's hash, the flags, the signature counter and — in an attestation — the attested credential (the AAGUID
/// that names the environment, the key id, the COSE public key). Parsed within the bytes given, or refused.
public struct AuthenticatorData: Sendable, Hashable {
    /// The attested credential of an attestation's authenticator data.
    public struct AttestedCredential: Sendable, Hashable {
        /// `appattestdevelop` or `appattest` followed by seven zero bytes: the environment (16 bytes).
        public var aaguid: [UInt8]
        /// The credential id: App Attest's key id (SHA-256 of the public key, 32 bytes).
        public var credentialId: [UInt8]
        /// The credential's public key, a COSE key.
        public var publicKey: CBOR
    }

    /// SHA-256 of the app's id (`teamId.bundleId`).
    public var rpIdHash: [UInt8]
    /// The flags byte (0x40: an attested credential follows; 0x80: extensions follow).
    public var flags: UInt8
    /// The signature counter: 0 in an attestation, then each assertion's, increasing.
    public var counter: UInt32
    /// The attested credential, when the flags say one follows.
    public var attestedCredential: AttestedCredential?

    /// The longest credential id taken (App Attest's are 32 bytes).
    public static let maxCredentialId = 1_024

    /// Parses `bytes` entirely; extensions (flag 0x80), which App Attest never writes, are refused.
    public init(_ bytes: [UInt8]) throws(AuthenticatorDataError) {
        guard bytes.count >= 37 else { throw .truncated }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        guard flags & 0x80 == 0 else { throw .extensions }
        guard flags & 0x40 != 0 else {
            guard bytes.count == 37 else { throw .trailingBytes }
            attestedCredential = nil
            return
        }
        guard bytes.count >= 55 else { throw .truncated }
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard length <= Self.maxCredentialId, bytes.count >= 55 + length else { throw .truncated }
        let key: CBOR
        do {
            key = try CBOR.decode(Array(bytes[(55 + length)...]))
        } catch {
            throw .invalidKey(error)
        }
        attestedCredential = AttestedCredential(
            aaguid: Array(bytes[37..<53]), credentialId: Array(bytes[55..<(55 + length)]), publicKey: key)
    }
}

extension AuthenticatorData {
    /// Parses an assertion's authenticator data: exactly 37 bytes — rpIdHash, flags, counter — whatever the flags say
    /// (Apple's assertions keep the attested-credential flag 0x40 but carry no credential).
    public init(assertion bytes: [UInt8]) throws(AuthenticatorDataError) {
        guard bytes.count >= 37 else { throw .truncated }
        guard bytes.count == 37 else { throw .trailingBytes }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        attestedCredential = nil
    }
}

/// Why bytes are not authenticator data App Attest writes.
public enum AuthenticatorDataError: Error, Sendable, Hashable {
    /// Shorter than its parts say.
    case truncated
    /// Bytes after its last part.
    case trailingBytes
    /// Extensions follow (App Attest writes none).
    case extensions
    /// The credential's public key is not one CBOR item.
    case invalidKey(CBORError)
}
