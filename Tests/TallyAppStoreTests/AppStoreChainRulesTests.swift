import Crypto
import Foundation
import SwiftASN1
import TallyAppStore
import TallyDevAppStore
import Testing
import X509

/// The chain rules as values, the built-in Apple root, configured roots, and the payloads' decoding.
@Suite("App Store chain rules and payloads", .timeLimit(.minutes(1)))
struct AppStoreChainRulesTests {
    @Test("The rules name the first broken one: leaf extension, intermediate extension, validity — nothing for a good chain")
    func firstBrokenRule() throws {
        let authority = try DevCertificateAuthority.generate(now: Date(timeIntervalSince1970: 1_800_000_000))
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        func rule(_ defect: DevSigningDefect?, at date: Date = at) throws -> AppStoreVerificationError.ChainReason? {
            let certificates = try authority.chain(defect).certificates
            return AppStoreChainRules.firstBrokenRule(leaf: certificates[0], intermediate: certificates[1], at: date)
        }
        #expect(try rule(nil) == nil)
        #expect(try rule(.leafWithoutAppleOID) == .leafMissingAppleOID)
        #expect(try rule(.intermediateWithoutAppleOID) == .intermediateMissingAppleOID)
        #expect(try rule(.leafValidity(notBefore: at.addingTimeInterval(10), notAfter: at.addingTimeInterval(100))) == .notValidAtSignedDate)
        #expect(try rule(nil, at: Date(timeIntervalSince1970: 4_000_000_000)) == .notValidAtSignedDate)
        #expect(try rule(.otherRoot) == nil, "another CA's chain breaks no rule the two certificates show: only its root is wrong")
    }

    @Test("Validity includes both ends, to the second")
    func validityBounds() throws {
        let leaf = try DevCertificateAuthority.generate(now: Date(timeIntervalSince1970: 1_800_000_000)).leaf
        #expect(AppStoreChainRules.isValid(leaf, at: leaf.notValidBefore))
        #expect(AppStoreChainRules.isValid(leaf, at: leaf.notValidAfter))
        #expect(!AppStoreChainRules.isValid(leaf, at: leaf.notValidBefore.addingTimeInterval(-1)))
        #expect(!AppStoreChainRules.isValid(leaf, at: leaf.notValidAfter.addingTimeInterval(1)))
    }

    @Test("The stand-in writes Apple's extensions as Apple does: non-critical, DER NULL, on the leaf and the intermediate only")
    func appleExtensions() throws {
        let authority = try DevCertificateAuthority.generate(now: Date(timeIntervalSince1970: 1_800_000_000))
        let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
        let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
        let onLeaf = try #require(authority.leaf.extensions[oid: leafOID])
        let onIntermediate = try #require(authority.intermediate.extensions[oid: intermediateOID])
        #expect(Array(onLeaf.value) == [0x05, 0x00] && !onLeaf.critical)
        #expect(Array(onIntermediate.value) == [0x05, 0x00] && !onIntermediate.critical)
        #expect(authority.leaf.extensions[oid: intermediateOID] == nil && authority.intermediate.extensions[oid: leafOID] == nil)
        #expect(authority.root.extensions[oid: leafOID] == nil && authority.root.extensions[oid: intermediateOID] == nil)
    }

    @Test("The built-in root is Apple Root CA - G3 with its published SHA-256 fingerprint, and the default verifier trusts it alone")
    func appleRoot() throws {
        let der = try #require(Data(base64Encoded: AppleRootCertificate.base64DER))
        // The fingerprint Apple publishes for Apple Root CA - G3, computed here with SHA-256 directly.
        let published = "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"
        #expect(SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined() == published)
        #expect(AppleRootCertificate.sha256Fingerprint.replacingOccurrences(of: ":", with: "").lowercased() == published)
        let root = try AppleRootCertificate.load()
        #expect(root.subject.description.contains("CN=Apple Root CA - G3"))
        #expect(root.notValidBefore == Date(timeIntervalSince1970: 1_398_881_946))  // 2014-04-30 18:19:06 UTC
        #expect(root.notValidAfter == Date(timeIntervalSince1970: 2_187_800_346))  // 2039-04-30 18:19:06 UTC
        let verifier = try AppStoreVerifier(bundleId: "com.example.oracle")
        #expect(verifier.rootCertificates == [root])
    }

    @Test("The default verifier refuses the stand-in's chain: only Apple's root is trusted in production")
    func appleRootRefusesStandIn() async throws {
        let fixture = try AppStoreFixture()
        let signed = try fixture.store.purchase(productId: "com.example.tokens.100").signedTransaction
        let production = try AppStoreVerifier(bundleId: AppStoreFixture.bundleId)
        #expect(await Outcome.of { _ = try await production.verifyTransaction(signed) } == .refused(.untrustedChain, .noPathToConfiguredRoot))
    }

    @Test("Configured roots are read as DER or PEM (one or several certificates); anything else is a configuration error")
    func configuredRoots() throws {
        let one = try DevCertificateAuthority.generate(now: Date(timeIntervalSince1970: 1_800_000_000))
        let two = try DevCertificateAuthority.generate(now: Date(timeIntervalSince1970: 1_800_000_000))
        let pem = try one.root.serializeAsPEM().pemString + "\n" + two.root.serializeAsPEM().pemString
        #expect(try AppStoreVerifier(rootCertificates: [one.rootDER], bundleId: "b").rootCertificates == [one.root])
        #expect(try AppStoreVerifier(rootCertificates: [Array(pem.utf8)], bundleId: "b").rootCertificates == [one.root, two.root])
        #expect(throws: AppStoreConfigurationError.self) { try AppStoreVerifier(rootCertificates: [Array("not a certificate".utf8)], bundleId: "b") }
        #expect(throws: AppStoreConfigurationError.self) { try AppStoreVerifier(rootCertificates: [], bundleId: "b") }
        #expect(throws: AppStoreConfigurationError.self) {
            try AppStoreVerifier(rootCertificates: [Array("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8)], bundleId: "b")
        }
        #expect(throws: AppStoreConfigurationError.self) { try AppStoreVerifier(rootCertificates: [one.rootDER], bundleId: "") }
    }

    @Test("A notification of a type Apple adds later verifies and keeps its raw type and subtype")
    func unknownNotificationType() async throws {
        let fixture = try AppStoreFixture()
        var payload = try fixture.store.test().payload
        payload.notificationType = AppStoreNotificationType(rawValue: "SOMETHING_NEW_IN_2030")
        payload.subtype = AppStoreNotificationSubtype(rawValue: "ALSO_NEW")
        let signed = try DevJWS.sign(payload, chain: fixture.authority.chain())
        let verified = try await fixture.verifier.verifyNotification(signed)
        #expect(verified.payload.notificationType.rawValue == "SOMETHING_NEW_IN_2030")
        #expect(verified.payload.subtype?.rawValue == "ALSO_NEW")
        #expect(verified.payload.notificationType != .test)
    }

    @Test("Payloads decode from Apple's JSON: millisecond dates, open enumerations, a non-UUID appAccountToken as nil, unknown keys ignored")
    func decoding() throws {
        let json = """
            {"transactionId":"2000000123","originalTransactionId":"2000000100","webOrderLineItemId":"2000000050",
             "bundleId":"com.example.oracle","productId":"com.example.premium.monthly","subscriptionGroupIdentifier":"21000000",
             "purchaseDate":1712345678901,"originalPurchaseDate":1712000000000,"expiresDate":1714937678901,"quantity":1,
             "type":"Some Future Type","inAppOwnershipType":"FAMILY_SHARED","signedDate":1712345679000,
             "environment":"Sandbox","transactionReason":"RENEWAL","storefront":"USA","storefrontId":"143441",
             "price":9990,"currency":"USD","appAccountToken":"","revocationPercentage":25000,"revocationType":"REFUND_PRORATED",
             "someFieldApplesAddsLater":{"nested":[1,2,3]}}
            """
        let transaction = try AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: Data(json.utf8))
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_712_345_678.901))
        #expect(AppStoreJSON.milliseconds(transaction.purchaseDate) == 1_712_345_678_901)
        #expect(transaction.type.rawValue == "Some Future Type" && transaction.inAppOwnershipType == .familyShared)
        #expect(transaction.transactionReason == .renewal && transaction.revocationType == .refundProrated)
        #expect(transaction.revocationPercentage == 25_000 && transaction.price == 9_990)
        #expect(transaction.appAccountToken == nil)
        #expect(transaction.appStoreEnvironment == .sandbox)

        let token = "7E3FB20B-4CDB-47CC-936D-99D65F608138"
        let withToken = json.replacingOccurrences(of: #""appAccountToken":"""#, with: #""appAccountToken":"\#(token)""#)
        let decoded = try AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: Data(withToken.utf8))
        #expect(decoded.appAccountToken == UUID(uuidString: token))
        let encoded = String(decoding: try AppStoreJSON.encoder().encode(decoded), as: UTF8.self)
        #expect(encoded.contains(#""appAccountToken":"\#(token.lowercased())""#), "written in lowercase, as Apple does")
        #expect(encoded.contains(#""purchaseDate":1712345678901"#), "dates written as whole milliseconds")
        #expect(try AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: Data(encoded.utf8)) == decoded)

        let notification = """
            {"notificationType":"DID_FAIL_TO_RENEW","subtype":"GRACE_PERIOD","notificationUUID":"n-1","version":"2.0",
             "signedDate":1712345679000,"data":{"appAppleId":1234567890,"bundleId":"com.example.oracle","bundleVersion":"7",
             "environment":"Production","status":4,"signedTransactionInfo":"x.y.z","signedRenewalInfo":"x.y.z"}}
            """
        let payload = try AppStoreJSON.decoder().decode(ResponseBodyV2DecodedPayload.self, from: Data(notification.utf8))
        #expect(payload.notificationType == .didFailToRenew && payload.subtype == .gracePeriod && payload.data?.status == 4)
        #expect(payload.app?.bundleId == "com.example.oracle" && payload.app?.appAppleId == 1_234_567_890)
        let summary = """
            {"notificationType":"RENEWAL_EXTENSION","subtype":"SUMMARY","notificationUUID":"n-2","signedDate":1712345679000,
             "summary":{"requestIdentifier":"r","environment":"Sandbox","appAppleId":1,"bundleId":"com.example.oracle",
             "productId":"p","succeededCount":5,"failedCount":0}}
            """
        let summarized = try AppStoreJSON.decoder().decode(ResponseBodyV2DecodedPayload.self, from: Data(summary.utf8))
        #expect(summarized.data == nil && summarized.app?.environment == "Sandbox" && summarized.app?.bundleId == "com.example.oracle")
    }

    @Test("Only Production and Sandbox are environments a server can accept; Xcode and LocalTesting are not")
    func environmentNames() {
        #expect(AppStoreEnvironment(rawValue: "Production") == .production)
        #expect(AppStoreEnvironment(rawValue: "Sandbox") == .sandbox)
        #expect(AppStoreEnvironment(rawValue: "Xcode") == nil && AppStoreEnvironment(rawValue: "LocalTesting") == nil)
    }
}
