import Crypto
import Foundation
import SwiftASN1
import X509

/// Verifies App Attest attestations and assertions as Apple's "Validating apps that connect to your server" says,
/// offline, before a key is trusted or a request believed.
///
/// An attestation (``verifyAttestation(_:keyId:challenge:at:)``) holds when every rule does: the object is CBOR with
/// `fmt` `apple-appattest`; `x5c` is the credential certificate and an intermediate chaining to a configured root (the
/// built-in Apple App Attestation Root CA unless tests give another) at the given time; the certificate's extension
/// 1.2.840.113635.100.8.2 holds SHA-256(authData ‖ SHA-256(challenge)); SHA-256 of its public key is the key id;
/// `rpIdHash` is SHA-256 of `teamId.bundleId`; the counter is 0; the AAGUID names the configured environment; the
/// credential id is the key id. An assertion (``verifyAssertion(_:clientData:publicKey:storedCounter:)``) holds when its
/// signature over SHA-256(authenticatorData ‖ SHA-256(clientData)) verifies with the stored key, its `rpIdHash` is the
/// app's and its counter is above the stored one. Each refusal is an ``AppAttestError`` naming the rule.
///
/// A value: the roots are parsed once, at init; any number of verifications may run at once.
public struct AppAttestVerifier: Sendable {
    /// The app's team id.
    public let teamId: String
    /// The app's bundle id.
    public let bundleId: String
    /// The environment whose AAGUID attestations must carry.
    public let environment: AppAttestEnvironment
    /// SHA-256 of `teamId.bundleId`: every object's `rpIdHash`.
    public let appIdHash: [UInt8]
    /// The trusted roots.
    public let rootCertificates: [Certificate]

    /// The extension of the credential certificate holding the nonce.
    public static let nonceExtension: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 8, 2]
    /// The largest attestation object read (Apple's are about 5.5 KB: two certificates and a receipt).
    public static let maxAttestationBytes = 32 * 1024
    /// The largest assertion object read (Apple's are about 120 bytes).
    public static let maxAssertionBytes = 1_024

    /// A verifier for the app `teamId`.`bundleId` in `environment`, trusting `rootCertificates` (each DER, or PEM with
    /// one or more certificates; nil: the built-in ``AppAttestRootCertificate``).
    public init(
        teamId: String, bundleId: String, environment: AppAttestEnvironment, rootCertificates: [[UInt8]]? = nil
    ) throws(AppAttestConfigurationError) {
        guard !teamId.isEmpty, !bundleId.isEmpty else { throw AppAttestConfigurationError("the team id or bundle id is empty") }
        var roots: [Certificate] = []
        if let rootCertificates {
            for bytes in rootCertificates { roots += try Self.certificates(in: bytes) }
        } else {
            roots = [try AppAttestRootCertificate.load()]
        }
        guard !roots.isEmpty else { throw AppAttestConfigurationError("no root certificate is configured") }
        self.teamId = teamId
        self.bundleId = bundleId
        self.environment = environment
        self.rootCertificates = roots
        appIdHash = Array(SHA256.hash(data: Array("\(teamId).\(bundleId)".utf8)))
    }

    /// Verifies the attestation `object` of the key `keyId` (its 32 raw bytes) made for `challenge` (whose SHA-256 was
    /// the client data hash), with the certificates' validity judged at `date`.
    public func verifyAttestation(
        _ object: [UInt8], keyId: [UInt8], challenge: [UInt8], at date: Date
    ) async throws(AppAttestError) -> AttestedKey {
        guard object.count <= Self.maxAttestationBytes else { throw AppAttestError(.malformed, "the attestation is too large") }
        let cbor: CBOR
        do { cbor = try CBOR.decode(object) } catch { throw AppAttestError(.malformed, "the attestation is not CBOR (\(error))") }
        guard let format = cbor["fmt"]?.textString else { throw AppAttestError(.malformed, "the attestation has no fmt") }
        guard format == "apple-appattest" else { throw AppAttestError(.wrongFormat, "fmt is not apple-appattest") }
        guard let statement = cbor["attStmt"], let authDataBytes = cbor["authData"]?.byteString,
            let x5c = statement["x5c"]?.arrayItems?.compactMap(\.byteString), let receipt = statement["receipt"]?.byteString
        else { throw AppAttestError(.malformed, "the attestation lacks attStmt.x5c, attStmt.receipt or authData") }
        guard x5c.count == 2 else { throw AppAttestError(.untrustedChain, "x5c holds \(x5c.count) certificates, not 2") }

        // 1. The credential certificate chains, through the intermediate, to a root.
        let credential: Certificate
        do {
            credential = try Certificate(derEncoded: x5c[0])
            let intermediate = try Certificate(derEncoded: x5c[1])
            var verifier = Verifier(rootCertificates: CertificateStore(rootCertificates)) { RFC5280Policy(validationTime: date) }
            guard case .validCertificate = await verifier.validate(
                leafCertificate: credential, intermediates: CertificateStore([intermediate]))
            else { throw AppAttestError(.untrustedChain, "the credential certificate does not chain to a trusted root") }
        } catch let error as AppAttestError {
            throw error
        } catch {
            throw AppAttestError(.untrustedChain, "x5c holds something that is not a certificate")
        }

        // 2–4. The nonce: SHA-256(authData ‖ SHA-256(challenge)) is what the certificate says.
        let nonce = Array(SHA256.hash(data: authDataBytes + Array(SHA256.hash(data: challenge))))
        guard try Self.certifiedNonce(credential) == nonce else {
            throw AppAttestError(.nonceMismatch, "the certificate's nonce is not the hash of authData and the challenge")
        }

        // 5. The key id is SHA-256 of the certified public key.
        guard let key = try? P256.Signing.PublicKey(credential.publicKey) else {
            throw AppAttestError(.malformed, "the credential's key is not a P-256 key")
        }
        let publicKey = Array(key.x963Representation)
        guard Array(SHA256.hash(data: publicKey)) == keyId else {
            throw AppAttestError(.keyIdMismatch, "SHA-256 of the credential's public key is not the key id")
        }

        // 6–9. The authenticator data: this app, counter 0, this environment, the key id as credential id.
        let authData: AuthenticatorData
        do { authData = try AuthenticatorData(authDataBytes) } catch {
            throw AppAttestError(.malformed, "authData is not authenticator data (\(error))")
        }
        guard authData.rpIdHash == appIdHash else { throw AppAttestError(.wrongApp, "rpIdHash is not this app's") }
        guard authData.counter == 0 else { throw AppAttestError(.nonzeroCounter, "the attestation's counter is not 0") }
        guard let attested = authData.attestedCredential else {
            throw AppAttestError(.malformed, "authData has no attested credential")
        }
        guard attested.aaguid == environment.aaguid else {
            throw AppAttestError(.wrongEnvironment, "the AAGUID is not \(environment.rawValue)'s")
        }
        guard attested.credentialId == keyId else { throw AppAttestError(.keyIdMismatch, "the credential id is not the key id") }
        return AttestedKey(keyId: keyId, publicKey: publicKey, receipt: receipt, environment: environment)
    }

    /// Verifies the assertion `object` over `clientData` by the attested key `publicKey` (x9.63, 65 bytes), whose last
    /// accepted counter is `storedCounter` (0 right after the attestation); returns the assertion's counter, which the
    /// caller stores — with compare-and-set, so that two processes cannot both accept it.
    public func verifyAssertion(
        _ object: [UInt8], clientData: [UInt8], publicKey: [UInt8], storedCounter: UInt32
    ) throws(AppAttestError) -> UInt32 {
        guard object.count <= Self.maxAssertionBytes else { throw AppAttestError(.malformed, "the assertion is too large") }
        let cbor: CBOR
        do { cbor = try CBOR.decode(object) } catch { throw AppAttestError(.malformed, "the assertion is not CBOR (\(error))") }
        guard let signatureBytes = cbor["signature"]?.byteString, let authDataBytes = cbor["authenticatorData"]?.byteString else {
            throw AppAttestError(.malformed, "the assertion lacks signature or authenticatorData")
        }
        let authData: AuthenticatorData
        do { authData = try AuthenticatorData(assertion: authDataBytes) } catch {
            throw AppAttestError(.malformed, "authenticatorData is not an assertion's (\(error))")
        }
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey) else {
            throw AppAttestError(.malformed, "the stored key is not a P-256 key")
        }
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes) else {
            throw AppAttestError(.invalidSignature, "the signature is not a DER ECDSA signature")
        }
        let nonce = Array(SHA256.hash(data: authDataBytes + Array(SHA256.hash(data: clientData))))
        guard key.isValidSignature(signature, for: nonce) else {
            throw AppAttestError(.invalidSignature, "the signature does not verify with the attested key")
        }
        guard authData.rpIdHash == appIdHash else { throw AppAttestError(.wrongApp, "rpIdHash is not this app's") }
        guard authData.counter > storedCounter else {
            throw AppAttestError(.counterNotIncreased, "the counter \(authData.counter) is not above \(storedCounter)")
        }
        return authData.counter
    }

    /// The nonce the credential certificate's extension 1.2.840.113635.100.8.2 holds:
    /// `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
    static func certifiedNonce(_ certificate: Certificate) throws(AppAttestError) -> [UInt8] {
        guard let value = certificate.extensions[oid: nonceExtension]?.value else {
            throw AppAttestError(.nonceMismatch, "the credential certificate has no nonce extension")
        }
        do {
            let root = try DER.parse(value)
            return try DER.sequence(root, identifier: .sequence) { nodes in
                guard let tagged = nodes.next() else { throw AppAttestError(.nonceMismatch, "the nonce extension is empty") }
                return try DER.explicitlyTagged(tagged, tagNumber: 1, tagClass: .contextSpecific) { inner in
                    Array(try ASN1OctetString(derEncoded: inner).bytes)
                }
            }
        } catch let error as AppAttestError {
            throw error
        } catch {
            throw AppAttestError(.nonceMismatch, "the nonce extension is not SEQUENCE { [1] OCTET STRING }")
        }
    }

    /// The certificates `bytes` hold: PEM with one or more, or one DER.
    static func certificates(in bytes: [UInt8]) throws(AppAttestConfigurationError) -> [Certificate] {
        do {
            if let text = String(validating: bytes, as: UTF8.self), text.contains("-----BEGIN") {
                return try PEMDocument.parseMultiple(pemString: text)
                    .filter { $0.discriminator == "CERTIFICATE" }
                    .map { try Certificate(pemDocument: $0) }
            }
            return [try Certificate(derEncoded: bytes)]
        } catch {
            throw AppAttestConfigurationError("a root certificate is neither DER nor PEM")
        }
    }
}

/// A key App Attest vouched for: what a server stores with the installation.
public struct AttestedKey: Sendable, Hashable {
    /// The key id (32 bytes: SHA-256 of ``publicKey``).
    public var keyId: [UInt8]
    /// The public key, x9.63 (65 bytes), which verifies the key's assertions.
    public var publicKey: [UInt8]
    /// Apple's receipt, for App Attest's fraud metric (exchanged at Apple for a risk count).
    public var receipt: [UInt8]
    /// The environment the key was attested in.
    public var environment: AppAttestEnvironment
}
