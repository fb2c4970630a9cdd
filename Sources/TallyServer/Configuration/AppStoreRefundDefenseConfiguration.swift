import Foundation
import Logging
import TallyAPI
import TallyAppStore
import TallyStore

/// `appStore.serverAPI`: the App Store Server API, called with an In-App Purchase key (docs/purchases.md, "Refund
/// defense"):
/// ```yaml
/// appStore:
///   serverAPI:
///     issuerId: 57246542-96fe-1a63-e053-0824d011072a
///     keyId: 2X9R4HXF34
///     privateKeyEnv: TALLY_APPSTORE_KEY      # the .p8 file's PEM, from the environment; never logged
///     # productionURL / sandboxURL: Apple's unless set (tally-dev dev-appstore's in tests)
///   consumption:
///     consentedByTerms: false                 # true when the app's terms cover sharing consumption with Apple
///     sampleContentProvided: true             # default: whether the configuration gives anything free
///     refundPreferences:                      # first match wins
///       - {when: {consumedAtLeast: 50000}, prefer: DECLINE}
///       - {when: {firstPurchase: true, consumedAtMost: 5000}, prefer: GRANT_FULL}
///       - {prefer: none}
/// ```
public struct AppStoreServerAPISettings: Sendable {
    /// Signs the requests with the key (parsed once, never kept as text).
    public let signer: AppStoreServerAPIToken
    /// Apple's URLs (or a stand-in's) and the client's patience.
    public var configuration: AppStoreServerAPIClient.Configuration
    /// The variable the key was read from (for the effective configuration).
    public var privateKeyEnv: String

    /// Settings signing with `signer`, calling Apple (or a stand-in) as `configuration` says; `privateKeyEnv` names the
    /// variable the key came from, for the effective configuration.
    public init(signer: AppStoreServerAPIToken, configuration: AppStoreServerAPIClient.Configuration, privateKeyEnv: String) {
        self.signer = signer
        self.configuration = configuration
        self.privateKeyEnv = privateKeyEnv
    }

    /// A client on `clock` (its waits between retries too).
    public func client(clock: any TallyClock, logger: Logger) -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(
            signer: signer, configuration: configuration, now: { clock.now }, sleep: { try await clock.sleep(for: $0) }, logger: logger)
    }

    /// `serverAPI:` as written.
    struct File: Codable, Equatable {
        var issuerId: String
        var keyId: String
        var privateKeyEnv: String
        var productionURL: String?
        var sandboxURL: String?

        init(effective settings: AppStoreServerAPISettings) {
            let credentials = settings.signer.credentials
            (issuerId, keyId, privateKeyEnv) = (credentials.issuerId, credentials.keyId, settings.privateKeyEnv)
            (productionURL, sandboxURL) = (settings.configuration.productionURL, settings.configuration.sandboxURL)
        }

        /// The settings for `bundleId`, the key read from `environment`.
        func settings(bundleId: String, environment: [String: String]) throws -> AppStoreServerAPISettings {
            for (name, url) in [("productionURL", productionURL), ("sandboxURL", sandboxURL)] {
                if let url { try ConfigurationChecks.requireHTTPS(url, place: "appStore.serverAPI.\(name)") }
            }
            let pem = try ConfigurationChecks.environmentValue(privateKeyEnv, namedBy: "appStore.serverAPI.privateKeyEnv", in: environment)
            let signer: AppStoreServerAPIToken
            do {
                signer = try AppStoreServerAPIToken(
                    credentials: .init(keyId: keyId, issuerId: issuerId, bundleId: bundleId), privateKeyPEM: pem)
            } catch {
                throw ConfigurationError("appStore.serverAPI: \(error.message)")
            }
            var configuration = AppStoreServerAPIClient.Configuration()
            if let productionURL { configuration.productionURL = productionURL }
            if let sandboxURL { configuration.sandboxURL = sandboxURL }
            return AppStoreServerAPISettings(signer: signer, configuration: configuration, privateKeyEnv: privateKeyEnv)
        }
    }
}

/// `appStore.consumption` as written (see ``AppStoreServerAPISettings``).
struct ConsumptionPolicyFile: Codable, Equatable {
    var consentedByTerms: Bool?
    var sampleContentProvided: Bool?
    var refundPreferences: [Rule]?

    /// `{when: {...}, prefer: DECLINE | GRANT_FULL | GRANT_PRORATED | none}`.
    struct Rule: Codable, Equatable {
        var when: Condition?
        var prefer: String
    }

    /// `{consumedAtLeast, consumedAtMost, firstPurchase, reasons}` (milliunits, 0–100000).
    struct Condition: Codable, Equatable {
        var consumedAtLeast: Int?
        var consumedAtMost: Int?
        var firstPurchase: Bool?
        var reasons: [String]?
    }

    static let preferences = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED", "none"]

    init(effective policy: ConsumptionPolicy, sampleContentProvided: Bool?) {
        consentedByTerms = policy.consentedByTerms
        self.sampleContentProvided = sampleContentProvided
        refundPreferences = policy.rules.map { rule in
            let when = rule.when
            return Rule(
                when: when == ConsumptionPolicy.Condition()
                    ? nil
                    : Condition(
                        consumedAtLeast: when.consumedAtLeast, consumedAtMost: when.consumedAtMost, firstPurchase: when.firstPurchase,
                        reasons: when.reasons),
                prefer: rule.prefer ?? "none")
        }
    }

    /// The policy; `sampleContentProvided` stays as written (nil: decided from the configuration when the server starts).
    func policy() throws -> ConsumptionPolicy {
        let rules = try (refundPreferences ?? []).enumerated().map { index, rule -> ConsumptionPolicy.Rule in
            let place = "appStore.consumption.refundPreferences[\(index)]"
            guard Self.preferences.contains(rule.prefer) else {
                throw ConfigurationError("\(place).prefer must be DECLINE, GRANT_FULL, GRANT_PRORATED or none, found \"\(rule.prefer)\"")
            }
            let when = rule.when ?? Condition()
            for (name, value) in [("consumedAtLeast", when.consumedAtLeast), ("consumedAtMost", when.consumedAtMost)] {
                if let value, !(0...100_000).contains(value) {
                    throw ConfigurationError("\(place).when.\(name) is in milliunits: 0 to 100000 (50000 is half)")
                }
            }
            return ConsumptionPolicy.Rule(
                when: ConsumptionPolicy.Condition(
                    consumedAtLeast: when.consumedAtLeast, consumedAtMost: when.consumedAtMost, firstPurchase: when.firstPurchase,
                    reasons: when.reasons),
                prefer: rule.prefer == "none" ? nil : rule.prefer)
        }
        return ConsumptionPolicy(
            consentedByTerms: consentedByTerms ?? false, sampleContentProvided: sampleContentProvided ?? false, rules: rules)
    }
}

/// An offer the server signs (`appStore.offers[]`): a promotional offer of a subscription, or its introductory offer
/// eligibility, for the users `eligible` describes.
/// ```yaml
/// offers:
///   - {productId: com.example.premium.monthly, offerIdentifier: comeback50, eligible: {expiredSubscriber: true}}
///   - {productId: com.example.premium.monthly, kind: introductoryEligibility, eligible: {neverSubscribed: true}}
/// ```
public struct AppStoreOffer: Sendable, Hashable {
    /// Which signature.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A promotional offer (`aud: promotional-offer`).
        case promotional
        /// Introductory offer eligibility (`aud: introductory-offer-eligibility`).
        case introductoryEligibility
    }

    /// Who may have it; every condition given must hold, none given: everyone.
    public struct Eligibility: Sendable, Hashable, Codable {
        /// The user's subscriptions have all ended (and there was one).
        public var expiredSubscriber: Bool?
        /// The user never had a subscription.
        public var neverSubscribed: Bool?

        /// A rule: every condition given must hold.
        public init(expiredSubscriber: Bool? = nil, neverSubscribed: Bool? = nil) {
            self.expiredSubscriber = expiredSubscriber
            self.neverSubscribed = neverSubscribed
        }

        /// Whether a user whose subscriptions are `statuses` qualifies.
        func holds(subscriptions statuses: [TallyStore.PurchaseStatus]) -> Bool {
            let active = statuses.contains(.active)
            if let expiredSubscriber, expiredSubscriber != (!statuses.isEmpty && !active) { return false }
            if let neverSubscribed, neverSubscribed != statuses.isEmpty { return false }
            return true
        }
    }

    /// The subscription.
    public var productId: String
    /// The promotional offer's id (promotional offers only).
    public var offerIdentifier: String?
    /// Which signature.
    public var kind: Kind
    /// Who may have it.
    public var eligible: Eligibility

    /// An offer of `productId` (`offerIdentifier` for a promotional one) for the users `eligible` describes.
    public init(productId: String, offerIdentifier: String?, kind: Kind, eligible: Eligibility = Eligibility()) {
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.kind = kind
        self.eligible = eligible
    }

    /// `offers[]` as written.
    struct File: Codable, Equatable {
        var productId: String
        var offerIdentifier: String?
        var kind: String?
        var eligible: Eligibility?

        init(effective offer: AppStoreOffer) {
            (productId, offerIdentifier, kind, eligible) = (offer.productId, offer.offerIdentifier, offer.kind.rawValue, offer.eligible)
        }

        func offer(index: Int, products: [AppStoreProduct]) throws -> AppStoreOffer {
            let place = "appStore.offers[\(index)]"
            guard products.contains(where: { $0.productId == productId && $0.grant == .premium }) else {
                throw ConfigurationError("\(place).productId must be one of appStore.products' subscriptions (premium: true)")
            }
            guard let kind = Kind(rawValue: kind ?? Kind.promotional.rawValue) else {
                throw ConfigurationError("\(place).kind is promotional or introductoryEligibility")
            }
            switch (kind, offerIdentifier) {
            case (.promotional, let id?) where !id.isEmpty && id.utf8.count <= 255: break
            case (.promotional, _): throw ConfigurationError("\(place).offerIdentifier is required for a promotional offer (App Store Connect's offer id)")
            case (.introductoryEligibility, nil): break
            case (.introductoryEligibility, _?): throw ConfigurationError("\(place): an introductoryEligibility offer has no offerIdentifier")
            }
            return AppStoreOffer(productId: productId, offerIdentifier: offerIdentifier, kind: kind, eligible: eligible ?? Eligibility())
        }
    }
}
