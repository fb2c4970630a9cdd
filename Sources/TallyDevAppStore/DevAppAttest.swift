import Crypto
import Foundation
import SwiftASN1
import Synchronization
import TallyAPI
import TallyAppAttest
import X509

/// A local stand-in for Apple's App Attest service: an App Attestation CA of its own and the simulated devices' keys,
/// writing attestation and assertion objects byte for byte in Apple's layout ("Validating apps that connect to your
/// server"), so a server's App Attest verifier can be tested end to end without an iPhone. A server under test trusts
/// ``rootCertificateDER`` in place of Apple's App Attestation root; nothing else ever should.
///
/// The CA is shaped like Apple's: a self-signed P-384 root (ECDSA-SHA384), a P-384 intermediate it issues, and for
/// each attestation a P-256 credential certificate the intermediate issues (ECDSA-SHA256) for the device key, carrying
/// the nonce extension (1.2.840.113635.100.8.2). Keys live in the instance, by key id, as on a device.
///
/// ``AttestationFaults`` and ``generateAssertion(_:clientDataHash:counter:)``'s `counter` make the bad objects a
/// verifier must refuse.
public final class DevAppAttest: Sendable {
    /// The App Attest environment a key is attested in, named by the authenticator data's AAGUID (the verifier's own
    /// type: one definition of each AAGUID).
    public typealias Environment = AppAttestEnvironment

    /// What to get wrong in an attestation (all off by default), for tests of what a verifier refuses.
    public struct AttestationFaults: Sendable, Hashable {
        /// The authenticator data's counter in place of 0.
        public var counter: UInt32?
        /// The AAGUID in place of the environment's (16 bytes; other lengths shift the credential, as a corrupt
        /// object would).
        public var aaguid: [UInt8]?
        /// Certificates from a second CA (the same names, other keys), which the server does not trust.
        public var untrustedCA: Bool

        /// Faults as given; none by default.
        public init(counter: UInt32? = nil, aaguid: [UInt8]? = nil, untrustedCA: Bool = false) {
            self.counter = counter
            self.aaguid = aaguid
            self.untrustedCA = untrustedCA
        }
    }

    /// Why a key cannot be attested or assert.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// No key has this id (``generateKey()`` never made it here).
        case unknownKey(String)
        /// The key was never attested, so no app id is known for its assertions (a device refuses too).
        case notAttested(String)

        /// What is wrong.
        public var description: String {
            switch self {
            case .unknownKey(let keyId): "no App Attest key \(keyId)"
            case .notAttested(let keyId): "the App Attest key \(keyId) has not been attested"
            }
        }
    }

    /// The credential certificate's extension holding the nonce: DER `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }`.
    public static let nonceExtensionOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 8, 2]

    /// The root: self-signed, the trust anchor a server is configured with in place of Apple's.
    public var rootCertificate: Certificate { authority.root }
    /// The root certificate's DER bytes.
    public let rootCertificateDER: [UInt8]
    /// The root certificate as PEM (`-----BEGIN CERTIFICATE-----`), as Apple publishes its App Attestation root.
    public let rootCertificatePEM: String

    private let authority: Authority
    private let clock: any TallyClock
    private let keys = Mutex<[String: DeviceKey]>([:])

    /// A device's key: its private half, the app id it was last attested for, its last assertion's counter.
    private struct DeviceKey {
        let privateKey: P256.Signing.PrivateKey
        var appId: String?
        var counter: UInt32 = 0
    }

    /// A new CA whose root and intermediate are valid from a year before the clock's now, for 20 and 10 years (wide,
    /// so a test clock standing anywhere near now is inside them). Making fixed certificates from fresh keys cannot
    /// fail but by a bug, which traps.
    public init(clock: any TallyClock = DevSystemClock()) {
        self.clock = clock
        do {
            authority = try Authority.generate(now: clock.now)
            rootCertificateDER = try DevCertificateAuthority.der(authority.root)
            rootCertificatePEM = try authority.root.serializeAsPEM().pemString
        } catch {
            preconditionFailure("DevAppAttest could not make its certificates: \(error)")
        }
    }

    // MARK: Keys

    /// A new simulated device key (P-256), as `DCAppAttestService.generateKey` makes one: its id is the standard
    /// base64 of SHA-256 of the public key's uncompressed X9.63 form (`04 ‖ X ‖ Y`, 65 bytes).
    public func generateKey() -> String {
        let privateKey = P256.Signing.PrivateKey()
        let keyId = Data(Self.keyIdBytes(of: privateKey.publicKey)).base64EncodedString()
        keys.withLock { $0[keyId] = DeviceKey(privateKey: privateKey) }
        return keyId
    }

    /// The public key of the key `keyId` (nil for an unknown id).
    public func publicKey(_ keyId: String) -> P256.Signing.PublicKey? {
        keys.withLock { $0[keyId]?.privateKey.publicKey }
    }

    /// The attestation object for the key `keyId`, as `DCAppAttestService.attestKey` gives it: the CBOR map
    /// `{"fmt": "apple-appattest", "attStmt": {"x5c": [credential certificate, intermediate], "receipt": …},
    /// "authData": …}`. The authenticator data is SHA-256 of `teamId.bundleId`, flags 0x40, counter 0, the
    /// environment's AAGUID, the 32-byte key id and the public key as a COSE key; the credential certificate's nonce
    /// extension holds SHA-256(authData ‖ `clientDataHash`). `receipt` is nil for random bytes (Apple's is a signed
    /// receipt for its fraud service, which no verifier here checks). The key's assertions then name this app id.
    public func attestKey(
        _ keyId: String, clientDataHash: [UInt8], teamId: String, bundleId: String, environment: Environment,
        receipt: [UInt8]? = nil, faults: AttestationFaults = AttestationFaults()
    ) throws -> [UInt8] {
        let appId = "\(teamId).\(bundleId)"
        let publicKey = try keys.withLock { keys throws(Failure) -> P256.Signing.PublicKey in
            guard var key = keys[keyId] else { throw .unknownKey(keyId) }
            key.appId = appId
            keys[keyId] = key
            return key.privateKey.publicKey
        }
        let x963 = Array(publicKey.x963Representation)
        let coseKey: CBOR = .map([
            (.unsigned(1), .unsigned(2)),  // kty: EC2
            (.unsigned(3), .negative(6)),  // alg: -7, ES256
            (.negative(0), .unsigned(1)),  // crv (-1): P-256
            (.negative(1), .bytes(Array(x963[1..<33]))),  // x (-2)
            (.negative(2), .bytes(Array(x963[33..<65]))),  // y (-3)
        ])
        let credentialId = Self.keyIdBytes(of: publicKey)
        let authData =
            Self.sha256(Array(appId.utf8)) + [0x40] + Self.bigEndian(faults.counter ?? 0) + (faults.aaguid ?? environment.aaguid)
            + [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xFF)] + credentialId + coseKey.encoded
        let now = clock.now
        let issuing = faults.untrustedCA ? try Authority.generate(now: now) : authority
        let credential = try issuing.credentialCertificate(
            for: publicKey, keyId: credentialId, nonce: Self.sha256(authData + clientDataHash), now: now)
        let x5c = [try DevCertificateAuthority.der(credential), try DevCertificateAuthority.der(issuing.intermediate)]
        let statement: CBOR = .map([
            (.text("x5c"), .array(x5c.map(CBOR.bytes))),
            (.text("receipt"), .bytes(receipt ?? (0..<256).map { _ in UInt8.random(in: 0...255) })),
        ])
        let attestation: CBOR = .map([
            (.text("fmt"), .text("apple-appattest")), (.text("attStmt"), statement), (.text("authData"), .bytes(authData)),
        ])
        return attestation.encoded
    }

    /// An assertion by the key `keyId`, as `DCAppAttestService.generateAssertion` gives it: the CBOR map
    /// `{"signature": …, "authenticatorData": …}`. The authenticator data is SHA-256 of the app id the key was attested
    /// for, flags 0x40 (as Apple's devices write them) and the counter (big-endian): 1 at the first assertion, one more
    /// at each. The signature is ECDSA P-256 in DER over SHA-256 of nonce = SHA-256(authenticatorData ‖
    /// `clientDataHash`), which `publicKey.isValidSignature(signature, for: nonce)` verifies.
    ///
    /// With `counter`, that counter is written instead (to replay one, or go backwards) and the key's own is left as it
    /// was, so the next assertion without one goes on from there.
    public func generateAssertion(_ keyId: String, clientDataHash: [UInt8], counter: UInt32? = nil) throws -> [UInt8] {
        let (privateKey, appId, written) = try keys.withLock { keys throws(Failure) -> (P256.Signing.PrivateKey, String, UInt32) in
            guard var key = keys[keyId] else { throw .unknownKey(keyId) }
            guard let appId = key.appId else { throw .notAttested(keyId) }
            if let counter { return (key.privateKey, appId, counter) }
            key.counter &+= 1
            keys[keyId] = key
            return (key.privateKey, appId, key.counter)
        }
        let authenticatorData = Self.sha256(Array(appId.utf8)) + [0x40] + Self.bigEndian(written)
        let nonce = Self.sha256(authenticatorData + clientDataHash)
        let signature = try privateKey.signature(for: nonce)
        let assertion: CBOR = .map([
            (.text("signature"), .bytes(Array(signature.derRepresentation))), (.text("authenticatorData"), .bytes(authenticatorData)),
        ])
        return assertion.encoded
    }

    // MARK: Bytes

    /// The raw key id: SHA-256 of the public key's X9.63 form.
    static func keyIdBytes(of publicKey: P256.Signing.PublicKey) -> [UInt8] { sha256(Array(publicKey.x963Representation)) }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    static func bigEndian(_ value: UInt32) -> [UInt8] { (0..<4).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

    // MARK: The CA

    /// A root and the intermediate that issues credential certificates.
    private struct Authority: Sendable {
        let root: Certificate
        let intermediate: Certificate
        let intermediateKey: P384.Signing.PrivateKey

        static let day: TimeInterval = 24 * 3600

        /// A new root and intermediate (P-384, signed with `ecdsaWithSHA384`), valid from a year before `now` (20 and 10 years).
        static func generate(now: Date) throws -> Authority {
            let rootKey = Certificate.PrivateKey(P384.Signing.PrivateKey())
            let root = try DevCertificateAuthority.makeRoot(
                key: rootKey, now: now, name: "Tally Dev App Attestation Root CA", signatureAlgorithm: .ecdsaWithSHA384)
            let intermediateKey = P384.Signing.PrivateKey()
            let intermediate = try DevCertificateAuthority.makeIntermediate(
                publicKey: Certificate.PublicKey(intermediateKey.publicKey), name: "Tally Dev App Attestation CA 1", issuer: root,
                issuerKey: rootKey, now: now, signatureAlgorithm: .ecdsaWithSHA384)
            return Authority(root: root, intermediate: intermediate, intermediateKey: intermediateKey)
        }

        /// A credential certificate for `publicKey` as Apple's: CN the key id in hex, OU `AAA Certification`, valid
        /// from a day before `now` (as Apple backdates) to three days after, the key usages Apple writes, and the nonce
        /// extension (non-critical).
        func credentialCertificate(for publicKey: P256.Signing.PublicKey, keyId: [UInt8], nonce: [UInt8], now: Date) throws -> Certificate {
            let hex = keyId.map { String($0 >> 4, radix: 16) + String($0 & 0x0F, radix: 16) }.joined()
            var extensions = try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, nonRepudiation: true, keyEncipherment: true, dataEncipherment: true))
            }
            let value = try Self.nonceValue(nonce)
            try extensions.append(Certificate.Extension(oid: DevAppAttest.nonceExtensionOID, critical: false, value: value[...]))
            return try Certificate(
                version: .v3, serialNumber: .init(), publicKey: Certificate.PublicKey(publicKey),
                notValidBefore: now.addingTimeInterval(-Self.day), notValidAfter: now.addingTimeInterval(3 * Self.day), issuer: intermediate.subject,
                subject: try DevCertificateAuthority.name(hex, unit: "AAA Certification"), signatureAlgorithm: .ecdsaWithSHA256,
                extensions: extensions, issuerPrivateKey: .init(intermediateKey))
        }

        /// The nonce extension's value: DER `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }` (`30 24 A1 22 04 20 …`).
        static func nonceValue(_ nonce: [UInt8]) throws -> [UInt8] {
            var serializer = DER.Serializer()
            try serializer.appendConstructedNode(identifier: .sequence) { sequence in
                try sequence.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 1, tagClass: .contextSpecific)) { tagged in
                    try tagged.serialize(ASN1OctetString(contentBytes: nonce[...]))
                }
            }
            return serializer.serializedBytes
        }
    }
}
