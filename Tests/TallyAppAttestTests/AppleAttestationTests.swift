import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import TallyAppAttest

/// The verifier against real attestations and assertions made by iOS 14.2 and 14.3 devices (``AppleSamples``), checked
/// against Apple's real App Attestation root at their own dates, then each altered.
@Suite(.timeLimit(.minutes(1)))
struct AppleAttestationTests {
    let verifier: AppAttestVerifier

    init() throws {
        verifier = try AppAttestVerifier(teamId: AppleSamples.teamId, bundleId: AppleSamples.bundleId, environment: .development)
    }

    static func bytes(_ base64: String) -> [UInt8] { Array(Data(base64Encoded: base64)!) }
    static let challenge = Array(AppleSamples.clientData.utf8)

    func verify(_ sample: AppleSample, object: [UInt8]? = nil, keyId: [UInt8]? = nil, challenge: [UInt8] = challenge,
                date: Date? = nil, with verifier: AppAttestVerifier? = nil) async throws(AppAttestError) -> AttestedKey {
        try await (verifier ?? self.verifier).verifyAttestation(
            object ?? Self.bytes(sample.object), keyId: keyId ?? Self.bytes(sample.keyId), challenge: challenge,
            at: date ?? Date(timeIntervalSince1970: sample.timestamp))
    }

    func refusal(_ sample: AppleSample, object: [UInt8]? = nil, keyId: [UInt8]? = nil, challenge: [UInt8] = challenge,
                 date: Date? = nil, with verifier: AppAttestVerifier? = nil) async -> AppAttestError.Code? {
        do {
            _ = try await verify(sample, object: object, keyId: keyId, challenge: challenge, date: date, with: verifier)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("the built-in root is Apple's, by fingerprint")
    func builtInRoot() throws {
        let root = try AppAttestRootCertificate.load()
        #expect(root.subject.description.contains("Apple App Attestation Root CA"))
        #expect(verifier.rootCertificates == [root])
    }

    @Test("Apple's attestations from iOS 14.2 and 14.3 verify at their dates", arguments: AppleSamples.attestations)
    func realAttestationsVerify(sample: AppleSample) async throws {
        let key = try await verify(sample)
        #expect(key.keyId == Self.bytes(sample.keyId))
        #expect(key.publicKey.count == 65 && key.publicKey[0] == 4)
        #expect(Array(SHA256.hash(data: key.publicKey)) == key.keyId)
        #expect(key.environment == .development)
        #expect(key.receipt.count > 1_000)
        if let assertion = AppleSamples.assertions.first(where: { $0.keyId == sample.keyId }) {
            #expect(key.publicKey == Self.bytes(assertion.publicKey!))
        }
    }

    @Test("an attestation altered anywhere, or checked under other rules, is refused", arguments: AppleSamples.attestations)
    func alteredAttestationsRefused(sample: AppleSample) async throws {
        let object = Self.bytes(sample.object)
        let cbor = try CBOR.decode(object)
        let authData = try #require(cbor["authData"]?.byteString)
        let x5c = try #require(cbor["attStmt"]?["x5c"]?.arrayItems)
        func with(authData newAuthData: [UInt8]? = nil, x5c newX5C: [CBOR]? = nil, fmt: String = "apple-appattest") -> [UInt8] {
            var statement = cbor["attStmt"]!
            if let newX5C, case .map(var pairs) = statement {
                pairs = pairs.map { $0.0 == .text("x5c") ? ($0.0, .array(newX5C)) : $0 }
                statement = .map(pairs)
            }
            return CBOR.map([
                (.text("fmt"), .text(fmt)), (.text("attStmt"), statement), (.text("authData"), .bytes(newAuthData ?? authData)),
            ]).encoded
        }
        func flipped(_ offset: Int) -> [UInt8] {
            var bytes = authData
            bytes[offset] ^= 0x01
            return bytes
        }
        // Re-encoding the unaltered parts still verifies: the alterations below are the only difference.
        _ = try await verify(sample, object: with())

        // The nonce: another challenge, or authData changed in any field (rpIdHash, counter, AAGUID, credential id).
        #expect(await refusal(sample, challenge: Array("wurzelpfropF".utf8)) == .nonceMismatch)
        for (field, offset) in [("rpIdHash", 0), ("counter", 36), ("aaguid", 40), ("credentialId", 60)] {
            #expect(await refusal(sample, object: with(authData: flipped(offset))) == .nonceMismatch, "\(field)")
        }
        // The key id.
        var keyId = Self.bytes(sample.keyId)
        keyId[0] ^= 0x80
        #expect(await refusal(sample, keyId: keyId) == .keyIdMismatch)
        // The app and the environment.
        let otherTeam = try AppAttestVerifier(teamId: "ABCDE12345", bundleId: AppleSamples.bundleId, environment: .development)
        #expect(await refusal(sample, with: otherTeam) == .wrongApp)
        let production = try AppAttestVerifier(teamId: AppleSamples.teamId, bundleId: AppleSamples.bundleId, environment: .production)
        #expect(await refusal(sample, with: production) == .wrongEnvironment)
        // The chain: a day after the credential certificate expired, without the intermediate, swapped, another root.
        #expect(await refusal(sample, date: Date(timeIntervalSince1970: sample.timestamp + 4 * 86_400)) == .untrustedChain)
        #expect(await refusal(sample, object: with(x5c: [x5c[0]])) == .untrustedChain)
        // Swapped, the intermediate chains but carries no nonce.
        #expect(await refusal(sample, object: with(x5c: [x5c[1], x5c[0]])) == .nonceMismatch)
        let otherRoot = try AppAttestVerifier(
            teamId: AppleSamples.teamId, bundleId: AppleSamples.bundleId, environment: .development,
            rootCertificates: [try Self.selfSignedRoot()])
        #expect(await refusal(sample, with: otherRoot) == .untrustedChain)
        // The format.
        #expect(await refusal(sample, object: with(fmt: "packed")) == .wrongFormat)
        #expect(await refusal(sample, object: Array(object.dropLast())) == .malformed)
    }

    /// A P-384 root that is not Apple's.
    static func selfSignedRoot() throws -> [UInt8] {
        let key = P384.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Not Apple App Attestation Root CA") }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: 0), notValidAfter: Date(timeIntervalSince1970: 4_000_000_000),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA384,
            extensions: try Certificate.Extensions { Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil)) },
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    @Test("Apple's assertions verify with their keys, once per counter", arguments: AppleSamples.assertions)
    func realAssertions(sample: AppleSample) throws {
        let object = Self.bytes(sample.object)
        let key = Self.bytes(sample.publicKey!)
        let clientData = Self.challenge
        #expect(try verifier.verifyAssertion(object, clientData: clientData, publicKey: key, storedCounter: 0) == 1)
        func refusal(_ object: [UInt8], clientData: [UInt8] = clientData, key: [UInt8] = key, counter: UInt32 = 0,
                     with verifier: AppAttestVerifier? = nil) -> AppAttestError.Code? {
            do {
                _ = try (verifier ?? self.verifier).verifyAssertion(object, clientData: clientData, publicKey: key, storedCounter: counter)
                return nil
            } catch { return error.code }
        }
        #expect(refusal(object, counter: 1) == .counterNotIncreased)
        #expect(refusal(object, clientData: Array("wurzelpfropF".utf8)) == .invalidSignature)
        let otherKey = Array(P256.Signing.PrivateKey().publicKey.x963Representation)
        #expect(refusal(object, key: otherKey) == .invalidSignature)
        let otherApp = try AppAttestVerifier(teamId: AppleSamples.teamId, bundleId: "com.example.other", environment: .development)
        #expect(refusal(object, with: otherApp) == .wrongApp)
        // The signed authenticator data changed: the counter raised by a replayer.
        var cbor = try CBOR.decode(object)
        guard case .map(var pairs) = cbor else { Issue.record("not a map"); return }
        pairs = pairs.map { pair in
            guard pair.0 == .text("authenticatorData"), var bytes = pair.1.byteString else { return pair }
            bytes[36] = 9
            return (pair.0, .bytes(bytes))
        }
        cbor = .map(pairs)
        #expect(refusal(cbor.encoded) == .invalidSignature)
        #expect(refusal(Array(object.prefix(20))) == .malformed)
    }
}

extension AppleSample: CustomTestStringConvertible {
    var testDescription: String { name }
}
