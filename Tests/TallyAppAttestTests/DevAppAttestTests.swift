import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import SwiftASN1
import TallyAPI
import TallyAppAttest
import TallyDevAppStore
import Testing
@_spi(FixedExpiryValidationTime) import X509

/// ``DevAppAttest``, the stand-in's App Attest: its objects read as Apple's are read (CBOR, authenticator data, the
/// credential certificate chained to its root, the nonce extension, the key id), shaped as Apple's real ones are, its
/// faults, and its HTTP routes.
@Suite("The stand-in's App Attest", .timeLimit(.minutes(2)))
struct DevAppAttestTests {
    /// 2027-01-15T08:00:00Z: far from the real now, so validity that follows the system clock would show.
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let teamId = "ABCDE12345"
    static let bundleId = "com.example.oracle"
    static let appId = "\(teamId).\(bundleId)"

    /// An attestation object, read.
    struct Read {
        let object: CBOR
        let authData: [UInt8]
        let parsed: AuthenticatorData
        let credential: Certificate
        let intermediate: Certificate
        let receipt: [UInt8]
    }

    static func read(_ bytes: [UInt8]) throws -> Read {
        let object = try CBOR.decode(bytes)
        #expect(object["fmt"] == .text("apple-appattest"))
        let x5c = try #require(object["attStmt"]?["x5c"]?.arrayItems)
        #expect(x5c.count == 2)
        let authData = try #require(object["authData"]?.byteString)
        return Read(
            object: object, authData: authData, parsed: try AuthenticatorData(authData),
            credential: try Certificate(derEncoded: try #require(x5c.first?.byteString)),
            intermediate: try Certificate(derEncoded: try #require(x5c.last?.byteString)),
            receipt: try #require(object["attStmt"]?["receipt"]?.byteString))
    }

    /// The nonce extension's octet string, read as its layout says: `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
    static func nonce(of certificate: Certificate) throws -> [UInt8] {
        let found = try #require(certificate.extensions[oid: DevAppAttest.nonceExtensionOID])
        #expect(!found.critical)
        let octets = try DER.sequence(try DER.parse(found.value), identifier: .sequence) { nodes in
            try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { try ASN1OctetString(derEncoded: $0) }
        }
        return Array(octets.bytes)
    }

    /// The chain [credential, intermediate] validated against `root` at `time`.
    static func validate(_ read: Read, root: Certificate, at time: Date) async -> CertificateValidationResult {
        var verifier = Verifier(rootCertificates: CertificateStore([root])) { RFC5280Policy(fixedExpiryValidationTime: time) }
        return await verifier.validate(leaf: read.credential, intermediates: CertificateStore([read.intermediate]))
    }

    static func isValid(_ result: CertificateValidationResult) -> Bool {
        if case .validCertificate(let chain) = result { chain.count == 3 } else { false }
    }

    static func sha256(_ bytes: some DataProtocol) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    static func base64(_ text: String?) throws -> [UInt8] { Array(try #require(text.flatMap { Data(base64Encoded: $0) })) }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test("the CA: a P-384 root and intermediate, valid around the injected clock's now")
    func authority() throws {
        let attest = DevAppAttest(clock: FixedClock(now: Self.now))
        let root = try Certificate(derEncoded: attest.rootCertificateDER)
        #expect(try Certificate(pemEncoded: attest.rootCertificatePEM) == root)
        #expect(attest.rootCertificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(root == attest.rootCertificate && root.issuer == root.subject)
        #expect(root.subject.description.contains("CN=Tally Dev App Attestation Root CA"))
        #expect(root.signatureAlgorithm == .ecdsaWithSHA384 && P384.Signing.PublicKey(root.publicKey) != nil)
        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: nil))
        #expect(try root.extensions.keyUsage?.keyCertSign == true)
        #expect(root.notValidBefore < Self.now && root.notValidAfter > Self.now.addingTimeInterval(5 * 365 * 86_400))
    }

    @Test("an attestation reads as Apple's: CBOR, authenticator data, the chain, the nonce, the key id")
    func attestation() async throws {
        let clock = FixedClock(now: Self.now)
        let attest = DevAppAttest(clock: clock)
        let keyId = attest.generateKey()
        let keyIdBytes = Array(try #require(Data(base64Encoded: keyId)))
        let clientDataHash = Self.sha256(Data("challenge".utf8))
        let read = try Self.read(
            try attest.attestKey(keyId, clientDataHash: clientDataHash, teamId: Self.teamId, bundleId: Self.bundleId, environment: .development))

        #expect(read.parsed.rpIdHash == Self.sha256(Data(Self.appId.utf8)))
        #expect(read.parsed.flags == 0x40 && read.parsed.counter == 0)
        let credential = try #require(read.parsed.attestedCredential)
        #expect(credential.aaguid == Array("appattestdevelop".utf8))
        #expect(credential.credentialId == keyIdBytes && keyIdBytes.count == 32)
        let publicKey = try #require(attest.publicKey(keyId))
        let x963 = Array(publicKey.x963Representation)
        #expect(Self.sha256(x963) == keyIdBytes, "key id = SHA-256 of the X9.63 public key")
        #expect(credential.publicKey[int: 1] == .unsigned(2) && credential.publicKey[int: 3] == .negative(6))
        #expect(credential.publicKey[int: -1] == .unsigned(1))
        #expect(credential.publicKey[int: -2] == .bytes(Array(x963[1..<33])) && credential.publicKey[int: -3] == .bytes(Array(x963[33...])))
        #expect(!read.receipt.isEmpty)

        // The credential certificate: the device key, chained to the root, the nonce in its extension.
        let certificateKey = try #require(P256.Signing.PublicKey(read.credential.publicKey))
        #expect(Self.sha256(certificateKey.x963Representation) == keyIdBytes)
        #expect(read.credential.subject.description.contains("CN=\(Self.hex(keyIdBytes))"))
        #expect(read.credential.signatureAlgorithm == .ecdsaWithSHA256)
        #expect(read.intermediate.subject.description.contains("CN=Tally Dev App Attestation CA 1"))
        #expect(read.credential.notValidAfter == Self.now.addingTimeInterval(3 * 86_400))
        #expect(try Self.nonce(of: read.credential) == Self.sha256(read.authData + clientDataHash))
        #expect(Self.isValid(await Self.validate(read, root: attest.rootCertificate, at: Self.now)))
        #expect(!Self.isValid(await Self.validate(read, root: attest.rootCertificate, at: Self.now.addingTimeInterval(4 * 86_400))))

        // Production: the other AAGUID.
        let production = try Self.read(
            try attest.attestKey(keyId, clientDataHash: clientDataHash, teamId: Self.teamId, bundleId: Self.bundleId, environment: .production))
        #expect(production.parsed.attestedCredential?.aaguid == Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 0])
    }

    @Test("assertions verify with the key, their counters increasing from 1; a chosen counter replays or goes back")
    func assertions() throws {
        let attest = DevAppAttest(clock: FixedClock(now: Self.now))
        let keyId = attest.generateKey()
        let publicKey = try #require(attest.publicKey(keyId))
        #expect(throws: DevAppAttest.Failure.notAttested(keyId)) { try attest.generateAssertion(keyId, clientDataHash: [1]) }
        _ = try attest.attestKey(keyId, clientDataHash: [0], teamId: Self.teamId, bundleId: Self.bundleId, environment: .production)

        func assert(_ clientData: String, counter: UInt32? = nil) throws -> UInt32 {
            let clientDataHash = Self.sha256(Data(clientData.utf8))
            let object = try CBOR.decode(try attest.generateAssertion(keyId, clientDataHash: clientDataHash, counter: counter))
            guard case .map(let pairs) = object else { throw CBORError.unsupported }
            #expect(pairs.map(\.0) == [.text("signature"), .text("authenticatorData")])
            let authenticatorData = try #require(object["authenticatorData"]?.byteString)
            try #require(authenticatorData.count == 37)
            #expect(Array(authenticatorData[0..<32]) == Self.sha256(Data(Self.appId.utf8)) && authenticatorData[32] == 0x40)
            let signature = try P256.Signing.ECDSASignature(derRepresentation: try #require(object["signature"]?.byteString))
            let nonce = Self.sha256(authenticatorData + clientDataHash)
            #expect(publicKey.isValidSignature(signature, for: nonce))
            #expect(!publicKey.isValidSignature(signature, for: Self.sha256(authenticatorData + Self.sha256(Data("other".utf8)))))
            return authenticatorData[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        }
        #expect(try [assert("a"), assert("b"), assert("c")] == [1, 2, 3])
        #expect(try assert("replay", counter: 2) == 2)
        #expect(try assert("backwards", counter: 0) == 0)
        #expect(try assert("d") == 4, "a chosen counter leaves the key's own as it was")
        let other = attest.generateKey()
        _ = try attest.attestKey(other, clientDataHash: [0], teamId: Self.teamId, bundleId: Self.bundleId, environment: .production)
        let first = try CBOR.decode(try attest.generateAssertion(other, clientDataHash: [2]))["authenticatorData"]?.byteString
        #expect(first?.last == 1, "each key counts on its own")
    }

    @Test("faults: a counter, an AAGUID, an untrusted CA; an unknown key")
    func faults() async throws {
        let attest = DevAppAttest(clock: FixedClock(now: Self.now))
        let keyId = attest.generateKey()
        func attestation(_ faults: DevAppAttest.AttestationFaults) throws -> Read {
            try Self.read(
                try attest.attestKey(
                    keyId, clientDataHash: [7], teamId: Self.teamId, bundleId: Self.bundleId, environment: .development, receipt: [1, 2, 3],
                    faults: faults))
        }
        let counted = try attestation(.init(counter: 5))
        #expect(counted.parsed.counter == 5 && counted.receipt == [1, 2, 3])
        #expect(Self.isValid(await Self.validate(counted, root: attest.rootCertificate, at: Self.now)), "only the counter is wrong")
        let aaguid = Array("appattestXXXXXXX".utf8)
        #expect(try attestation(.init(aaguid: aaguid)).parsed.attestedCredential?.aaguid == aaguid)
        let untrusted = try attestation(.init(untrustedCA: true))
        #expect(untrusted.intermediate.issuer == attest.rootCertificate.subject, "the same names")
        #expect(!Self.isValid(await Self.validate(untrusted, root: attest.rootCertificate, at: Self.now)))
        #expect(try Self.nonce(of: untrusted.credential) == Self.sha256(untrusted.authData + [7]))

        #expect(throws: DevAppAttest.Failure.unknownKey("nope")) {
            try attest.attestKey("nope", clientDataHash: [], teamId: Self.teamId, bundleId: Self.bundleId, environment: .development)
        }
        #expect(throws: DevAppAttest.Failure.unknownKey("nope")) { try attest.generateAssertion("nope", clientDataHash: []) }
    }

    @Test("shaped as Apple's real objects: the same maps, extension layout, flags and COSE key")
    func shapedAsApple() throws {
        let attest = DevAppAttest(clock: FixedClock(now: Self.now))
        let keyId = attest.generateKey()
        let ours = try Self.read(
            try attest.attestKey(keyId, clientDataHash: [9], teamId: Self.teamId, bundleId: Self.bundleId, environment: .development))
        _ = try attest.generateAssertion(keyId, clientDataHash: [9])
        let ourAssertion = try CBOR.decode(try attest.generateAssertion(keyId, clientDataHash: [9]))
        let appleClientDataHash = Self.sha256(Data(AppleSamples.clientData.utf8))
        func keys(_ item: CBOR?) -> [CBOR] { if case .map(let pairs)? = item { pairs.map(\.0) } else { [] } }
        func extensionValue(_ certificate: Certificate) -> [UInt8] {
            Array(certificate.extensions[oid: DevAppAttest.nonceExtensionOID]?.value ?? [])
        }

        for sample in AppleSamples.attestations {
            let bytes = Array(try #require(Data(base64Encoded: sample.object)))
            let apple = try Self.read(bytes)
            #expect(apple.object.encoded == bytes, "Apple's object re-encodes byte for byte (\(sample.name))")
            #expect(keys(apple.object) == keys(ours.object) && keys(apple.object["attStmt"]) == keys(ours.object["attStmt"]))
            #expect(apple.parsed.flags == ours.parsed.flags && apple.parsed.counter == ours.parsed.counter)
            #expect(apple.authData.count == ours.authData.count)
            #expect(keys(apple.parsed.attestedCredential?.publicKey) == keys(ours.parsed.attestedCredential?.publicKey))
            #expect(apple.parsed.attestedCredential?.publicKey[int: 3] == ours.parsed.attestedCredential?.publicKey[int: 3])
            // The nonce extension: the same layout (`30 24 A1 22 04 20`), the same definition of the nonce.
            #expect(extensionValue(apple.credential).prefix(6) == extensionValue(ours.credential).prefix(6))
            #expect(extensionValue(apple.credential).count == extensionValue(ours.credential).count)
            #expect(try Self.nonce(of: apple.credential) == Self.sha256(apple.authData + appleClientDataHash))
            // The key id: SHA-256 of the X9.63 key, the credential id, the subject's CN in hex.
            let appleKeyId = Array(try #require(Data(base64Encoded: sample.keyId)))
            let appleKey = try #require(P256.Signing.PublicKey(apple.credential.publicKey))
            #expect(Self.sha256(appleKey.x963Representation) == appleKeyId)
            #expect(apple.parsed.attestedCredential?.credentialId == appleKeyId)
            #expect(apple.credential.subject.description.contains("CN=\(Self.hex(appleKeyId))"))
            #expect(apple.credential.signatureAlgorithm == ours.credential.signatureAlgorithm)
            #expect(apple.intermediate.signatureAlgorithm == ours.intermediate.signatureAlgorithm)
        }
        for sample in AppleSamples.assertions {
            let bytes = Array(try #require(Data(base64Encoded: sample.object)))
            let apple = try CBOR.decode(bytes)
            #expect(apple.encoded == bytes)
            #expect(keys(apple) == keys(ourAssertion))
            let appleData = try #require(apple["authenticatorData"]?.byteString)
            let ourData = try #require(ourAssertion["authenticatorData"]?.byteString)
            #expect(appleData.count == ourData.count && appleData[32] == ourData[32])
            #expect(Array(appleData[0..<32]) == Self.sha256(Data("\(AppleSamples.teamId).\(AppleSamples.bundleId)".utf8)))
        }
    }

    @Test("the HTTP routes: root.pem, keys, attest, assert; an unknown key is 404")
    func routes() async throws {
        let clock = FixedClock(now: Self.now)
        let store = DevAppStore(authority: try DevCertificateAuthority.generate(now: Self.now), clock: clock)
        var logger = Logger(label: "dev-appattest-tests")
        // Cancelling a Hummingbird server logs its channels' cancellation as errors: nothing a test needs to see.
        logger.logLevel = .critical
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildDevAppStoreApplication(store: store, port: 0, logger: logger) { continuation.yield($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            let base = "http://127.0.0.1:\(try #require(await iterator.next()))/appattest"

            let pem = try await Self.call(base + "/root.pem")
            #expect(pem.status == 200 && pem.text == store.appAttest.rootCertificatePEM)
            let keyId = try #require(try await Self.call(base + "/keys", post: "{}").json["keyId"])
            #expect(store.appAttest.publicKey(keyId) != nil)

            let clientDataHash = Self.sha256(Data("over http".utf8))
            let hash = Data(clientDataHash).base64EncodedString()
            let attest = try await Self.call(
                base + "/attest",
                post: #"{"keyId":"\#(keyId)","clientDataHash":"\#(hash)","teamId":"\#(Self.teamId)","bundleId":"\#(Self.bundleId)","environment":"production"}"#)
            #expect(attest.status == 200)
            let read = try Self.read(try Self.base64(attest.json["attestation"]))
            #expect(read.parsed.attestedCredential?.aaguid == DevAppAttest.Environment.production.aaguid)
            #expect(try Self.nonce(of: read.credential) == Self.sha256(read.authData + clientDataHash))
            let root = try Certificate(pemEncoded: pem.text)
            #expect(Self.isValid(await Self.validate(read, root: root, at: Self.now)))

            let assert = try await Self.call(base + "/assert", post: #"{"keyId":"\#(keyId)","clientDataHash":"\#(hash)"}"#)
            let assertion = try CBOR.decode(try Self.base64(assert.json["assertion"]))
            #expect(assertion["authenticatorData"]?.byteString?.last == 1)

            let unknown = try await Self.call(base + "/assert", post: #"{"keyId":"nope","clientDataHash":"AAAA"}"#)
            #expect(unknown.status == 404 && unknown.text.contains(#""code":"unknown_key""#))
            let unknownAttest = try await Self.call(
                base + "/attest", post: #"{"keyId":"nope","clientDataHash":"AAAA","teamId":"T","bundleId":"B","environment":"development"}"#)
            #expect(unknownAttest.status == 404)
            let badEnvironment = try await Self.call(
                base + "/attest", post: #"{"keyId":"\#(keyId)","clientDataHash":"AAAA","teamId":"T","bundleId":"B","environment":"staging"}"#)
            #expect(badEnvironment.status == 400)
        }
    }

    /// A GET, or a POST of the JSON `post`; the status, the text and the text as a JSON object of strings (empty when
    /// it is not one).
    static func call(_ url: String, post json: String? = nil) async throws -> (status: Int, text: String, json: [String: String]) {
        var request = HTTPClientRequest(url: url)
        if let json {
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let text = String(buffer: bytes)
        let json = (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
        return (Int(response.status.code), text, json)
    }
}

/// A clock standing still at `now`.
private struct FixedClock: TallyClock {
    let now: Date
    func sleep(for seconds: TimeInterval) async throws {}
}
