import Foundation
import JWTKit
import SwiftASN1
import X509

/// Verifies App Store signed data — StoreKit 2 transactions, renewal information and App Store Server Notifications
/// V2 — as Apple's rules say, offline, before anything in it is believed.
///
/// Every rule must hold, and each refusal is an ``AppStoreVerificationError`` with a stable code:
/// 1. the JWS has three parts and a readable header (`malformed`), whose `alg` is `ES256` (`unsupported_algorithm`);
/// 2. `x5c` holds exactly three certificates; the chain is built from the header's leaf and intermediate to a
///    configured root (the header's third certificate is never trusted by itself); the leaf carries
///    1.2.840.113635.100.6.11.1 and the intermediate 1.2.840.113635.100.6.2.1; every certificate is valid at the
///    payload's `signedDate` (``AppStoreChainRules``; jwt-kit's `X5CVerifier` with `X5CValidationTime.fixed`) —
///    `untrusted_chain`, whose ``AppStoreVerificationError/reason`` names the rule;
/// 3. the signature verifies with the leaf's key (`invalid_signature`) and the payload decodes as its type (`malformed`);
/// 4. the payload's `bundleId` is the configured one (`wrong_bundle`), its `environment` an accepted one
///    (`wrong_environment`; `Xcode` and `LocalTesting` never are), and a Production notification's `appAppleId` the
///    configured one (`wrong_app`; refused when none is configured).
///
/// The payload's `signedDate` chooses the validation time, as Apple's own library does offline: a payload signed while
/// its certificate was valid stays verifiable after the certificate expires. Revocation (OCSP) is not checked.
///
/// A value: the roots are parsed once, at ``init(rootCertificates:bundleId:appAppleId:environments:)``, and shared by
/// every verification; any number of verifications may run at once. The transactions it has accepted are kept by the
/// SHA-256 of their exact bytes (``VerifiedPayloadCache``, shared by its copies, which have the same rules): the same
/// signed transaction submitted again is answered from there, without a second chain build and signature check.
public struct AppStoreVerifier: Sendable {
    /// The app's bundle id every payload must name.
    public let bundleId: String
    /// The app's Apple id, which Production notifications must name (nil: Production notifications are refused).
    public let appAppleId: Int64?
    /// The environments accepted.
    public let environments: Set<AppStoreEnvironment>
    /// The configured roots (the built-in Apple Root CA - G3 unless others were given).
    public let rootCertificates: [Certificate]

    private let x5c: X5CVerifier
    private let decoder: JSONDecoder
    /// The transactions accepted, by the digest of their bytes.
    let transactions = VerifiedPayloadCache<JWSTransactionDecodedPayload>(capacity: 8_192)

    /// A verifier trusting `rootCertificates` — each DER, or PEM with one or more certificates; nil: the built-in Apple
    /// Root CA - G3 (``AppleRootCertificate``) — for the app `bundleId`, accepting `environments`.
    /// Throws ``AppStoreConfigurationError`` when a root is not a certificate or none is given.
    public init(
        rootCertificates: [[UInt8]]? = nil, bundleId: String, appAppleId: Int64? = nil,
        environments: Set<AppStoreEnvironment> = [.production, .sandbox]
    ) throws(AppStoreConfigurationError) {
        let roots: [Certificate]
        if let rootCertificates {
            var parsed: [Certificate] = []
            for bytes in rootCertificates { parsed += try Self.certificates(in: bytes) }
            roots = parsed
        } else {
            roots = [try AppleRootCertificate.load()]
        }
        guard !roots.isEmpty else { throw AppStoreConfigurationError("no root certificate is configured") }
        guard !bundleId.isEmpty else { throw AppStoreConfigurationError("the bundle id is empty") }
        do {
            x5c = try X5CVerifier(rootCertificates: roots)
        } catch {
            throw AppStoreConfigurationError("the root certificates cannot be trusted: \(error)")
        }
        self.rootCertificates = roots
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
        decoder = AppStoreJSON.decoder()
    }

    /// Verifies a signed transaction (`Transaction.jwsRepresentation`, a notification's `signedTransactionInfo`).
    /// The same bytes accepted before are answered from ``transactions`` (a refusal is never kept: it is verified again).
    public func verifyTransaction(_ signedTransaction: String) async throws(AppStoreVerificationError) -> JWSTransactionDecodedPayload {
        let key = VerifiedPayloadCache<JWSTransactionDecodedPayload>.key(signedTransaction)
        if let transaction = transactions.payload(for: key) { return transaction }
        let transaction = try await verifySignature(signedTransaction, as: JWSTransactionDecodedPayload.self)
        try checkApp(bundleId: transaction.bundleId, environment: transaction.environment)
        transactions.insert(transaction, for: key)
        return transaction
    }

    /// Verifies a subscription's signed renewal information. Renewal information names no bundle id: its environment is
    /// checked; a notification ties it to the app (``verifyNotification(_:)``).
    public func verifyRenewalInfo(_ signedRenewalInfo: String) async throws(AppStoreVerificationError) -> JWSRenewalInfoDecodedPayload {
        let renewal = try await verifySignature(signedRenewalInfo, as: JWSRenewalInfoDecodedPayload.self)
        try checkEnvironment(renewal.environment)
        return renewal
    }

    /// Verifies a notification's `signedPayload`, then the transaction and renewal information it embeds, each under the
    /// same rules; both must be of the notification's environment (`wrong_environment`).
    public func verifyNotification(_ signedPayload: String) async throws(AppStoreVerificationError) -> AppStoreNotification {
        let payload = try await verifySignature(signedPayload, as: ResponseBodyV2DecodedPayload.self)
        guard let app = payload.app else {
            throw AppStoreVerificationError.malformed("the notification has neither data, summary nor externalPurchaseToken")
        }
        try checkApp(bundleId: app.bundleId, environment: app.environment, notificationAppAppleId: .some(app.appAppleId))
        var transaction: JWSTransactionDecodedPayload?
        var renewalInfo: JWSRenewalInfoDecodedPayload?
        if let signed = payload.data?.signedTransactionInfo {
            let verified = try await verifyTransaction(signed)
            guard verified.environment == app.environment else {
                throw AppStoreVerificationError(.wrongEnvironment, "the embedded transaction is of another environment than the notification")
            }
            transaction = verified
        }
        if let signed = payload.data?.signedRenewalInfo {
            let verified = try await verifyRenewalInfo(signed)
            guard verified.environment == app.environment else {
                throw AppStoreVerificationError(.wrongEnvironment, "the embedded renewal information is of another environment than the notification")
            }
            renewalInfo = verified
        }
        return AppStoreNotification(payload: payload, transaction: transaction, renewalInfo: renewalInfo)
    }

    /// The rules of step 4 (the payload's app) as a function of the fields: `bundleId` must be ``bundleId``,
    /// `environment` one of ``environments``; for a notification (`notificationAppAppleId` given, even as nil) of
    /// Production, its `appAppleId` must be ``appAppleId``, which must be configured.
    public func checkApp(
        bundleId: String, environment: String, notificationAppAppleId: Int64?? = nil
    ) throws(AppStoreVerificationError) {
        guard bundleId == self.bundleId else {
            throw AppStoreVerificationError(.wrongBundle, "the signed data is for another app's bundle id")
        }
        try checkEnvironment(environment)
        if case .some(let named) = notificationAppAppleId, environment == AppStoreEnvironment.production.rawValue {
            guard let appAppleId else {
                throw AppStoreVerificationError(.wrongApp, "a Production notification needs appStore.appAppleId to be configured")
            }
            guard named == appAppleId else {
                throw AppStoreVerificationError(.wrongApp, "the notification is for another app id")
            }
        }
    }

    private func checkEnvironment(_ environment: String) throws(AppStoreVerificationError) {
        guard let accepted = AppStoreEnvironment(rawValue: environment), environments.contains(accepted) else {
            throw AppStoreVerificationError(.wrongEnvironment, "the signed data is of an environment that is not accepted")
        }
    }

    /// Steps 1 to 3: the header, the chain at the payload's signed date, the signature, the payload's type.
    private func verifySignature<Payload: Codable & Sendable>(
        _ jws: String, as _: Payload.Type
    ) async throws(AppStoreVerificationError) -> Payload {
        let header = try SignedDataHeader(jws)
        let signedDate = try header.signedDate(decoder: decoder)
        let intermediate = header.intermediate
        do {
            let verified = try await x5c.verifyJWS(
                Array(jws.utf8), as: SignedPayload<Payload>.self, jsonDecoder: decoder, validationTime: .fixed(signedDate)
            ) { AppStoreChainRules.ChainPolicy(intermediate: intermediate) }
            return verified.value
        } catch let error as JWTError {
            switch error.errorType {
            case .invalidX5CChain, .missingX5CHeader:
                throw header.chainRefusal(at: signedDate)
            case .malformedToken:
                throw AppStoreVerificationError.malformed("the payload is not a \(Payload.self)")
            case .unsupportedAlgorithm:
                throw AppStoreVerificationError(.unsupportedAlgorithm, "only ES256 is accepted")
            default:
                throw AppStoreVerificationError(.invalidSignature, "the signature does not verify with the leaf certificate's key")
            }
        } catch {
            throw AppStoreVerificationError(.invalidSignature, "the signature does not verify with the leaf certificate's key")
        }
    }

    /// The certificates in a configured root's bytes: PEM (one or more `CERTIFICATE` blocks) or DER.
    static func certificates(in bytes: [UInt8]) throws(AppStoreConfigurationError) -> [Certificate] {
        do {
            if let text = String(validating: bytes, as: UTF8.self), text.contains("-----BEGIN") {
                let certificates = try PEMDocument.parseMultiple(pemString: text)
                    .filter { $0.discriminator == "CERTIFICATE" }
                    .map { try Certificate(pemDocument: $0) }
                guard !certificates.isEmpty else { throw AppStoreConfigurationError("the PEM holds no CERTIFICATE") }
                return certificates
            }
            return [try Certificate(derEncoded: bytes)]
        } catch let error as AppStoreConfigurationError {
            throw error
        } catch {
            throw AppStoreConfigurationError("a root certificate is neither DER nor PEM")
        }
    }
}

/// A verified notification with what it embeds, each verified under the same rules.
public struct AppStoreNotification: Hashable, Sendable {
    /// The notification.
    public let payload: ResponseBodyV2DecodedPayload
    /// Its `data.signedTransactionInfo`, verified (nil when it has none).
    public let transaction: JWSTransactionDecodedPayload?
    /// Its `data.signedRenewalInfo`, verified (nil when it has none).
    public let renewalInfo: JWSRenewalInfoDecodedPayload?

    /// A verified notification (the verifier makes these; tests may too).
    public init(payload: ResponseBodyV2DecodedPayload, transaction: JWSTransactionDecodedPayload?, renewalInfo: JWSRenewalInfoDecodedPayload?) {
        self.payload = payload
        self.transaction = transaction
        self.renewalInfo = renewalInfo
    }
}

/// A payload type as jwt-kit decodes it: the App Store's payloads carry no JWT claims to check (their rules are the
/// verifier's), so the public types stay free of JWTKit.
struct SignedPayload<Value: Codable & Sendable>: JWTPayload {
    var value: Value
    init(from decoder: any Decoder) throws { value = try Value(from: decoder) }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
