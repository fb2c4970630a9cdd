import Crypto
import Foundation
import TallyAppStore
import TallyDevAppStore
import Testing
import X509

/// `AppStoreVerifier` against payloads the stand-in signs, good and bad: every rule's refusal has its own code (and,
/// for chains, the rule broken), acceptance returns exactly what was signed.
@Suite("App Store verification", .timeLimit(.minutes(2)))
struct AppStoreVerifierTests {
    // MARK: Acceptance

    @Test("A consumable's signed transaction verifies and decodes to exactly what the stand-in signed")
    func acceptsTransaction() async throws {
        let fixture = try AppStoreFixture()
        let token = UUID()
        let purchase = try fixture.store.purchase(productId: "com.example.tokens.100", appAccountToken: token, quantity: 3)
        let transaction = try await fixture.verifier.verifyTransaction(purchase.signedTransaction)
        #expect(transaction == purchase.transaction)
        #expect(transaction.appAccountToken == token && transaction.quantity == 3 && transaction.type == .consumable)
        #expect(transaction.signedDate == fixture.clock.now && transaction.environment == "Sandbox")
    }

    @Test("A subscription's notification verifies with its embedded transaction and renewal information")
    func acceptsNotificationWithEmbeddedPayloads() async throws {
        let fixture = try AppStoreFixture()
        let purchase = try fixture.store.purchase(productId: "com.example.premium.monthly", appAccountToken: UUID())
        fixture.clock.advance(by: 60)
        let renewal = try fixture.store.renew(purchase.transaction.transactionId)
        let verified = try await fixture.verifier.verifyNotification(renewal.notification.signedPayload)
        #expect(verified.payload == renewal.notification.payload)
        #expect(verified.payload.notificationType == .didRenew)
        #expect(verified.transaction == renewal.transaction)
        #expect(verified.transaction?.originalTransactionId == purchase.transaction.transactionId)
        #expect(verified.transaction?.transactionId != purchase.transaction.transactionId)
        #expect(verified.renewalInfo == renewal.renewalInfo)
        #expect(verified.renewalInfo?.autoRenews == true)
        #expect(try await fixture.verifier.verifyRenewalInfo(#require(renewal.signedRenewalInfo)) == renewal.renewalInfo)
    }

    @Test("A TEST notification (no transaction) verifies")
    func acceptsTestNotification() async throws {
        let fixture = try AppStoreFixture()
        let notification = try fixture.store.test()
        let verified = try await fixture.verifier.verifyNotification(notification.signedPayload)
        #expect(verified.payload.notificationType == .test && verified.transaction == nil && verified.renewalInfo == nil)
    }

    // MARK: The chain, the algorithm, the signature

    /// Every defect the stand-in can sign with, and the refusal it must get — on a transaction and on a notification.
    static let defects: [(DevSigningDefect, Outcome)] = {
        let signedAt = Date(timeIntervalSince1970: 1_800_000_000)
        return [
            (.leafWithoutAppleOID, .refused(.untrustedChain, .leafMissingAppleOID)),
            (.intermediateWithoutAppleOID, .refused(.untrustedChain, .intermediateMissingAppleOID)),
            (.otherRoot, .refused(.untrustedChain, .noPathToConfiguredRoot)),
            (.twoCertificates, .refused(.untrustedChain, .certificateCount)),
            (.leafValidity(notBefore: signedAt.addingTimeInterval(-86_400 * 30), notAfter: signedAt.addingTimeInterval(-60)),
             .refused(.untrustedChain, .notValidAtSignedDate)),
            (.leafValidity(notBefore: signedAt.addingTimeInterval(60), notAfter: signedAt.addingTimeInterval(86_400 * 30)),
             .refused(.untrustedChain, .notValidAtSignedDate)),
            (.algorithm("HS256"), .refused(.unsupportedAlgorithm, nil)),
            (.algorithm("RS256"), .refused(.unsupportedAlgorithm, nil)),
            (.algorithm("ES384"), .refused(.unsupportedAlgorithm, nil)),
            (.algorithm("none"), .refused(.unsupportedAlgorithm, nil)),
            (.algorithm("es256"), .refused(.unsupportedAlgorithm, nil)),
            (.tamperedPayload, .refused(.invalidSignature, nil)),
        ]
    }()

    @Test("Each bad chain, algorithm and tampering is refused with its own code, on transactions and notifications", arguments: defects)
    func refusals(defect: DevSigningDefect, expected: Outcome) async throws {
        let fixture = try AppStoreFixture()
        let purchase = try fixture.store.purchase(productId: "com.example.tokens.100", quantity: 2, defect: defect)
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(purchase.signedTransaction) } == expected)
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(purchase.notification.signedPayload) } == expected)
        // The same purchase signed well is accepted: the defect alone made the difference.
        let good = try fixture.store.signedTransaction(purchase.transaction.transactionId)
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(good) } == .accepted)
    }

    @Test("Validity is checked at signedDate: a leaf expired now but valid then is accepted; one valid now but not then is refused")
    func validityAtSignedDate() async throws {
        // Signed on 2021-06-01, a date both the wall clock and the certificates' windows are far from.
        let signedAt = Date(timeIntervalSince1970: 1_622_505_600)
        let fixture = try AppStoreFixture(start: signedAt)
        let expiredSince = DevSigningDefect.leafValidity(
            notBefore: signedAt.addingTimeInterval(-86_400), notAfter: signedAt.addingTimeInterval(86_400 * 200))
        let validOnlyLater = DevSigningDefect.leafValidity(
            notBefore: signedAt.addingTimeInterval(3_600), notAfter: Date(timeIntervalSince1970: 2_200_000_000))
        let old = try fixture.store.purchase(productId: "com.example.tokens.100", defect: expiredSince)
        let early = try fixture.store.purchase(productId: "com.example.tokens.100", defect: validOnlyLater)
        fixture.clock.advance(by: 86_400 * 365 * 3)  // the stand-in's clock moves on: the verifier does not read it
        #expect(Date() > signedAt.addingTimeInterval(86_400 * 200), "the first leaf has expired by the wall clock")
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(old.signedTransaction) } == .accepted)
        #expect(
            await Outcome.of { _ = try await fixture.verifier.verifyTransaction(early.signedTransaction) }
                == .refused(.untrustedChain, .notValidAtSignedDate))
    }

    @Test("The header's third certificate plays no part: another root there changes nothing, and the configured root there does not rescue another CA's chain")
    func thirdCertificateIsNeverTrusted() async throws {
        let fixture = try AppStoreFixture()
        let other = try DevCertificateAuthority.generate(now: fixture.clock.now)
        let payload = try fixture.store.purchase(productId: "com.example.tokens.100").transaction
        let goodWithOtherRoot = try DevJWS.sign(
            payload, chain: .init(certificates: [fixture.authority.leaf, fixture.authority.intermediate, other.root], key: fixture.authority.chain().key))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(goodWithOtherRoot) } == .accepted)
        let otherWithConfiguredRoot = try DevJWS.sign(
            payload, chain: .init(certificates: [other.leaf, other.intermediate, fixture.authority.root], key: other.chain().key))
        #expect(
            await Outcome.of { _ = try await fixture.verifier.verifyTransaction(otherWithConfiguredRoot) }
                == .refused(.untrustedChain, .noPathToConfiguredRoot))
        // A verifier that trusts only the other CA's root accepts the other CA's chain: the refusal above was the root's.
        let trustingOther = try AppStoreVerifier(rootCertificates: [other.rootDER], bundleId: AppStoreFixture.bundleId)
        #expect(await Outcome.of { _ = try await trustingOther.verifyTransaction(otherWithConfiguredRoot) } == .accepted)
    }

    @Test("The chain is built from the header's second certificate: a valid intermediate placed third is not used")
    func intermediateMustBeSecond() async throws {
        let fixture = try AppStoreFixture()
        let unrelated = try DevCertificateAuthority.generate(now: fixture.clock.now).intermediate
        let payload = try fixture.store.purchase(productId: "com.example.tokens.100").transaction
        let key = try fixture.authority.chain().key
        let swapped = try DevJWS.sign(payload, chain: .init(certificates: [fixture.authority.leaf, unrelated, fixture.authority.intermediate], key: key))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(swapped) } == .refused(.untrustedChain, .noPathToConfiguredRoot))
        let four = try DevJWS.sign(
            payload, chain: .init(certificates: [fixture.authority.leaf, fixture.authority.intermediate, fixture.authority.root, unrelated], key: key))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(four) } == .refused(.untrustedChain, .certificateCount))
    }

    @Test("A notification verifies what it embeds: a tampered or foreign-chained transaction inside a good notification is refused")
    func embeddedPayloadsAreVerified() async throws {
        let fixture = try AppStoreFixture()
        let purchase = try fixture.store.purchase(productId: "com.example.premium.monthly")
        let chain = try fixture.authority.chain()
        func notification(transaction: String?, renewal: String?) throws -> String {
            var payload = purchase.notification.payload
            payload.data?.signedTransactionInfo = transaction
            payload.data?.signedRenewalInfo = renewal
            return try DevJWS.sign(payload, chain: chain)
        }
        let tampered = try fixture.store.signedTransaction(purchase.transaction.transactionId, defect: .tamperedPayload)
        let foreign = try fixture.store.signedTransaction(purchase.transaction.transactionId, defect: .otherRoot)
        let badRenewal = try DevJWS.sign(#require(purchase.renewalInfo), chain: try fixture.authority.chain(.leafWithoutAppleOID))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(try! notification(transaction: tampered, renewal: purchase.signedRenewalInfo)) }
            == .refused(.invalidSignature, nil))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(try! notification(transaction: foreign, renewal: nil)) }
            == .refused(.untrustedChain, .noPathToConfiguredRoot))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(try! notification(transaction: purchase.signedTransaction, renewal: badRenewal)) }
            == .refused(.untrustedChain, .leafMissingAppleOID))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(try! notification(transaction: purchase.signedTransaction, renewal: purchase.signedRenewalInfo)) }
            == .accepted)
    }

    // MARK: The app: bundle, environment, app id

    @Test("Another app's bundle id is refused, on transactions, notifications and a notification's embedded transaction")
    func wrongBundle() async throws {
        let fixture = try AppStoreFixture()
        let purchase = try fixture.store.purchase(productId: "com.example.tokens.100")
        let other = try fixture.verifier(bundleId: "com.example.other")
        #expect(await Outcome.of { _ = try await other.verifyTransaction(purchase.signedTransaction) } == .refused(.wrongBundle, nil))
        #expect(await Outcome.of { _ = try await other.verifyNotification(purchase.notification.signedPayload) } == .refused(.wrongBundle, nil))
        var foreign = purchase.transaction
        foreign.bundleId = "com.example.other"
        var payload = purchase.notification.payload
        payload.data?.signedTransactionInfo = try DevJWS.sign(foreign, chain: fixture.authority.chain())
        let mixed = try DevJWS.sign(payload, chain: fixture.authority.chain())
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(mixed) } == .refused(.wrongBundle, nil))
    }

    @Test("Only accepted environments pass; Xcode and LocalTesting never do, and an embedded transaction must share the notification's")
    func environments() async throws {
        let fixture = try AppStoreFixture()
        let purchase = try fixture.store.purchase(productId: "com.example.tokens.100")
        let productionOnly = try fixture.verifier(environments: [.production])
        #expect(await Outcome.of { _ = try await productionOnly.verifyTransaction(purchase.signedTransaction) } == .refused(.wrongEnvironment, nil))
        #expect(await Outcome.of { _ = try await productionOnly.verifyNotification(purchase.notification.signedPayload) } == .refused(.wrongEnvironment, nil))
        let chain = try fixture.authority.chain()
        for name in ["Xcode", "LocalTesting", "sandbox", ""] {
            var transaction = purchase.transaction
            transaction.environment = name
            let signed = try DevJWS.sign(transaction, chain: chain)
            #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(signed) } == .refused(.wrongEnvironment, nil), "\(name)")
        }
        var production = purchase.transaction
        production.environment = "Production"
        var payload = purchase.notification.payload
        payload.data?.signedTransactionInfo = try DevJWS.sign(production, chain: chain)
        let mixed = try DevJWS.sign(payload, chain: chain)
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(mixed) } == .refused(.wrongEnvironment, nil))
    }

    @Test("A Production notification must name the configured appAppleId, and one must be configured; Sandbox needs none")
    func appAppleId() async throws {
        let production = try AppStoreFixture(environment: .production)
        let notification = try production.store.purchase(productId: "com.example.tokens.100").notification.signedPayload
        #expect(await Outcome.of { _ = try await production.verifier.verifyNotification(notification) } == .accepted)
        #expect(await Outcome.of { _ = try await production.verifier(appAppleId: 42).verifyNotification(notification) } == .refused(.wrongApp, nil))
        #expect(await Outcome.of { _ = try await production.verifier(appAppleId: nil).verifyNotification(notification) } == .refused(.wrongApp, nil))
        let unnamed = try AppStoreFixture(environment: .production, storeAppAppleId: nil)
        let withoutId = try unnamed.store.test().signedPayload
        #expect(await Outcome.of { _ = try await unnamed.verifier.verifyNotification(withoutId) } == .refused(.wrongApp, nil))
        // Transactions carry no app id: a Production transaction is checked for bundle and environment only.
        let transaction = try production.store.purchase(productId: "com.example.tokens.100").signedTransaction
        #expect(await Outcome.of { _ = try await production.verifier(appAppleId: nil).verifyTransaction(transaction) } == .accepted)
        let sandbox = try AppStoreFixture(storeAppAppleId: nil)
        let sandboxNotification = try sandbox.store.test().signedPayload
        #expect(await Outcome.of { _ = try await sandbox.verifier(appAppleId: nil).verifyNotification(sandboxNotification) } == .accepted)
    }

    // MARK: Any shape

    @Test("Payloads of any shape get a named error, never a crash: not a JWS, bad headers, payloads of the wrong type")
    func malformedShapes() async throws {
        let fixture = try AppStoreFixture()
        let chain = try fixture.authority.chain()
        let b64 = { (text: String) in DevJWS.base64URL(Data(text.utf8)) }
        let purchase = try fixture.store.purchase(productId: "com.example.tokens.100")
        let parts = purchase.signedTransaction.split(separator: ".").map(String.init)
        let cases: [(String, String, Outcome)] = [
            ("empty", "", .refused(.malformed, nil)),
            ("two parts", "a.b", .refused(.malformed, nil)),
            ("four parts", purchase.signedTransaction + ".x", .refused(.malformed, nil)),
            ("not base64", "!!.??.##", .refused(.malformed, nil)),
            ("header not JSON", b64("nope") + "." + parts[1] + "." + parts[2], .refused(.malformed, nil)),
            ("header an array", b64("[1]") + "." + parts[1] + "." + parts[2], .refused(.malformed, nil)),
            ("alg a number", b64(#"{"alg":256,"x5c":[]}"#) + "." + parts[1] + "." + parts[2], .refused(.malformed, nil)),
            ("no alg", b64(#"{"x5c":[]}"#) + "." + parts[1] + "." + parts[2], .refused(.unsupportedAlgorithm, nil)),
            ("no x5c", b64(#"{"alg":"ES256"}"#) + "." + parts[1] + "." + parts[2], .refused(.untrustedChain, .certificateCount)),
            ("x5c not base64", b64(#"{"alg":"ES256","x5c":["%","%","%"]}"#) + "." + parts[1] + "." + parts[2],
             .refused(.untrustedChain, .unreadableCertificate)),
            ("x5c not DER", b64(#"{"alg":"ES256","x5c":["AAAA","AAAA","AAAA"]}"#) + "." + parts[1] + "." + parts[2],
             .refused(.untrustedChain, .unreadableCertificate)),
            ("signature cut", parts[0] + "." + parts[1] + "." + String(parts[2].prefix(10)), .refused(.invalidSignature, nil)),
            ("no signature", parts[0] + "." + parts[1] + ".", .refused(.invalidSignature, nil)),
        ]
        for (name, jws, expected) in cases {
            #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(jws) } == expected, "\(name)")
        }
        // Well signed, but not a transaction: each payload is signed by the stand-in's good chain.
        let payloads: [(String, String, Outcome)] = [
            ("array", "[]", .refused(.malformed, nil)),
            ("string", #""x""#, .refused(.malformed, nil)),
            ("no signedDate", #"{"transactionId":"1"}"#, .refused(.malformed, nil)),
            ("signedDate a string", #"{"signedDate":"2026-01-01"}"#, .refused(.malformed, nil)),
            ("signedDate only", #"{"signedDate":1800000000000}"#, .refused(.malformed, nil)),
        ]
        // A whole transaction whose signedDate is absurd: beyond the years 2000 to 9999 no date is read (malformed);
        // within them the chain is checked at that instant, and is not valid then.
        let transactionJSON = String(decoding: try AppStoreJSON.encoder().encode(purchase.transaction), as: UTF8.self)
        let signedDate = #""signedDate":\#(AppStoreJSON.milliseconds(purchase.transaction.signedDate))"#
        #expect(transactionJSON.contains(signedDate))
        let absurd: [(String, String, Outcome)] = [
            ("signedDate far past", "-1000000000000000", .refused(.malformed, nil)),
            ("signedDate huge", "1e300", .refused(.malformed, nil)),
            ("signedDate zero", "0", .refused(.malformed, nil)),
            ("signedDate fractional", "\(AppStoreJSON.milliseconds(purchase.transaction.signedDate)).5", .accepted),
            ("signedDate null", "null", .refused(.malformed, nil)),
            // Past the year 9999 (and before the year 1) swift-certificates traps on the validation time: refused before it.
            ("signedDate year 10000", "253402300800000", .refused(.malformed, nil)),
            ("signedDate year 0", "-62135596801000", .refused(.malformed, nil)),
            ("signedDate the last millisecond of 1999", "946684799999", .refused(.malformed, nil)),
            ("signedDate 2000-01-01", "946684800000", .refused(.untrustedChain, .notValidAtSignedDate)),
            ("signedDate last second of 9999", "253402300799000", .refused(.untrustedChain, .notValidAtSignedDate)),
        ]
        for (name, value, expected) in absurd {
            let json = transactionJSON.replacingOccurrences(of: signedDate, with: #""signedDate":\#(value)"#)
            let signed = try DevJWS.sign(payloadJSON: Array(json.utf8), chain: chain)
            let outcome = await Outcome.of { _ = try await fixture.verifier.verifyTransaction(signed) }
            #expect(outcome == expected, "\(name): \(outcome)")
        }
        for (name, json, expected) in payloads {
            let signed = try DevJWS.sign(payloadJSON: Array(json.utf8), chain: chain)
            let outcome = await Outcome.of { _ = try await fixture.verifier.verifyTransaction(signed) }
            #expect(outcome == expected, "\(name): \(outcome)")
        }
        // A notification presented as a transaction, and the reverse.
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyTransaction(purchase.notification.signedPayload) } == .refused(.malformed, nil))
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(purchase.signedTransaction) } == .refused(.malformed, nil))
    }

    @Test("Every date of a transaction, renewal information and notification is read only within the years 2000 to 9999")
    func datesAreBounded() async throws {
        let fixture = try AppStoreFixture()
        let chain = try fixture.authority.chain()
        let purchase = try fixture.store.purchase(productId: "com.example.premium.monthly", appAccountToken: UUID())
        fixture.clock.advance(by: 60)
        let failed = try fixture.store.failRenewal(purchase.transaction.transactionId)
        /// `jws`'s payload with `field` written as `value`, signed again.
        func signed(_ jws: String, _ field: String, _ value: String) throws -> String {
            let json = String(decoding: try #require(DevJWS.payloadJSON(of: jws)), as: UTF8.self)
            let pattern = try Regex(#""\#(field)":-?[0-9.eE+]+"#)
            let changed = json.contains(pattern)
                ? json.replacing(pattern, with: #""\#(field)":\#(value)"#, maxReplacements: 1)
                : "{" + #""\#(field)":\#(value),"# + json.dropFirst()
            return try DevJWS.sign(payloadJSON: Array(changed.utf8), chain: chain)
        }
        let refused = [
            "9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551616", "1e300", "-1e300", "1e400",
            "253402300800000", "946684799999", "0", "-1", "-0",
        ]
        let accepted = ["946684800000", "1800000000000", "1800000000000.5", "253402300799999"]
        for field in ["purchaseDate", "originalPurchaseDate", "expiresDate", "revocationDate"] {
            for value in refused {
                let outcome = await Outcome.of { _ = try await fixture.verifier.verifyTransaction(try signed(purchase.signedTransaction, field, value)) }
                #expect(outcome == .refused(.malformed, nil), "\(field) = \(value): \(outcome)")
            }
            for value in accepted {
                let outcome = await Outcome.of { _ = try await fixture.verifier.verifyTransaction(try signed(purchase.signedTransaction, field, value)) }
                #expect(outcome == .accepted, "\(field) = \(value): \(outcome)")
            }
        }
        let renewal = try #require(purchase.signedRenewalInfo)
        for field in ["gracePeriodExpiresDate", "renewalDate", "recentSubscriptionStartDate"] {
            for value in refused {
                let outcome = await Outcome.of { _ = try await fixture.verifier.verifyRenewalInfo(try signed(renewal, field, value)) }
                #expect(outcome == .refused(.malformed, nil), "renewal \(field) = \(value): \(outcome)")
            }
            let outcome = await Outcome.of { _ = try await fixture.verifier.verifyRenewalInfo(try signed(renewal, field, accepted[1])) }
            #expect(outcome == .accepted, "renewal \(field): \(outcome)")
        }
        // A notification whose embedded transaction carries such a date is refused whole.
        let notificationJSON = String(decoding: try #require(DevJWS.payloadJSON(of: failed.signedPayload)), as: UTF8.self)
        let transaction = try #require(failed.transaction)
        let embedded = try signed(try fixture.store.signedTransaction(transaction.transactionId), "expiresDate", "9223372036854775807")
        let original = try #require(try JSONSerialization.jsonObject(with: Data(notificationJSON.utf8)) as? [String: Any])
        var data = try #require(original["data"] as? [String: Any])
        data["signedTransactionInfo"] = embedded
        var changed = original
        changed["data"] = data
        let notification = try DevJWS.sign(payloadJSON: Array(try JSONSerialization.data(withJSONObject: changed)), chain: chain)
        #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(notification) } == .refused(.malformed, nil))
    }

    @Test("2,000 random corruptions of a signed transaction: each is refused with a named code or decodes to exactly what was signed")
    func corruptions() async throws {
        let fixture = try AppStoreFixture()
        let purchase = try fixture.store.purchase(productId: "com.example.tokens.100", quantity: 5)
        let original = Array(purchase.signedTransaction.utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}\"".utf8)
        var random = SeededGenerator(seed: 33)
        var codes: [String: Int] = [:]
        for _ in 0..<2_000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[Int.random(in: 0..<bytes.count, using: &random)] = alphabet.randomElement(using: &random)!
                case 1: bytes.remove(at: Int.random(in: 0..<bytes.count, using: &random))
                default: bytes.insert(alphabet.randomElement(using: &random)!, at: Int.random(in: 0...bytes.count, using: &random))
                }
            }
            do {
                let transaction = try await fixture.verifier.verifyTransaction(String(decoding: bytes, as: UTF8.self))
                #expect(transaction == purchase.transaction, "an accepted corruption must change nothing")
                codes["accepted", default: 0] += 1
            } catch {
                codes[error.code.rawValue, default: 0] += 1
            }
        }
        // The property saw every kind of refusal; the few accepted ones are corruptions that decode to the same bytes
        // (the unused low bits of a base64url part's last character).
        #expect(["malformed", "invalid_signature", "untrusted_chain"].allSatisfy { codes[$0, default: 0] > 10 }, "\(codes)")
        #expect(codes["accepted", default: 0] < 40, "\(codes)")
    }
}

/// Reproducible random choices: SHA-256 of a seed and a counter.
struct SeededGenerator: RandomNumberGenerator {
    private let seed: UInt64
    private var counter: UInt64 = 0
    init(seed: UInt64) { self.seed = seed }
    mutating func next() -> UInt64 {
        counter += 1
        let digest = SHA256.hash(data: withUnsafeBytes(of: (seed, counter)) { Array($0) })
        return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}
