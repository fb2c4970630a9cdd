import Foundation

/// `POST /v1/purchases/apple`: a StoreKit 2 transaction to redeem, as the device received it.
public struct RedeemPurchaseRequest: Codable, Hashable, Sendable {
    /// `Transaction.jwsRepresentation`: the App Store's signed transaction (a JWS), verified by the server.
    public var signedTransaction: String

    /// Creates the request.
    public init(signedTransaction: String) { self.signedTransaction = signedTransaction }
}

/// `POST /v1/webhooks/appstore`: an App Store Server Notification V2, as Apple sends it.
public struct AppStoreNotificationRequest: Codable, Hashable, Sendable {
    /// The notification, signed by the App Store (a JWS).
    public var signedPayload: String

    /// Creates the request.
    public init(signedPayload: String) { self.signedPayload = signedPayload }
}

/// What kind of product a purchase was.
public struct PurchaseKind: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    /// The kind as it appears on the wire.
    public let rawValue: String
    /// Wraps a wire value (unknown kinds are kept).
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The wire value.
    public var description: String { rawValue }

    /// A consumable: tokens credited to the wallet.
    public static let consumable = PurchaseKind(rawValue: "consumable")
    /// An auto-renewable subscription: premium while it is active.
    public static let subscription = PurchaseKind(rawValue: "subscription")

    /// Decodes a kind from its string; unknown values are kept, not rejected.
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    /// Encodes the kind as its string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Where a purchase stands.
public struct PurchaseStatus: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    /// The status as it appears on the wire.
    public let rawValue: String
    /// Wraps a wire value (unknown statuses are kept).
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The wire value.
    public var description: String { rawValue }

    /// A consumable whose tokens are in the wallet.
    public static let credited = PurchaseStatus(rawValue: "credited")
    /// Refunded by Apple: its tokens were taken back (the balance may be below zero), or its premium ended.
    public static let refunded = PurchaseStatus(rawValue: "refunded")
    /// A subscription giving premium now (renewing, or in its billing grace period).
    public static let active = PurchaseStatus(rawValue: "active")
    /// A subscription that ended (expired, or its grace period ran out): `premiumUntil` is in the past, as `/v1/me` says.
    public static let expired = PurchaseStatus(rawValue: "expired")
    /// A subscription Apple revoked (Family Sharing ended).
    public static let revoked = PurchaseStatus(rawValue: "revoked")
    /// A subscription now held by another account (restored there, or bought without an app account token): it gives
    /// this account nothing.
    public static let movedAway = PurchaseStatus(rawValue: "moved_away")
    /// Known from a notification whose app account token names no account (or a Sandbox purchase past the server's
    /// bound): credited when an account redeems it.
    public static let unclaimed = PurchaseStatus(rawValue: "unclaimed")

    /// Decodes a status from its string; unknown values are kept, not rejected.
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    /// Encodes the status as its string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// One App Store purchase as the server keeps it: `GET /v1/purchases` lists them (a subscription once, its renewals
/// inside it), `POST /v1/purchases/apple` answers with the one redeemed.
public struct Purchase: Codable, Hashable, Sendable {
    /// The App Store's transaction id (a subscription's: its latest transaction's).
    public var transactionId: String
    /// The first transaction of the purchase (a subscription's renewals share it).
    public var originalTransactionId: String
    /// The App Store product id.
    public var productId: String
    /// Consumable or subscription.
    public var kind: PurchaseKind
    /// The tokens a consumable credited (its product's tokens × quantity).
    public var tokens: Int64?
    /// When the premium a subscription gives ends (its expiry, the end of its grace period, or its refund or
    /// revocation); nil when it moved away.
    public var premiumUntil: Date?
    /// `Production` or `Sandbox` (App Review's and testers' purchases: the server credits them up to a bound).
    public var environment: String
    /// Where it stands.
    public var status: PurchaseStatus
    /// When it was bought.
    public var purchasedAt: Date

    /// Creates a purchase view.
    public init(
        transactionId: String, originalTransactionId: String, productId: String, kind: PurchaseKind, tokens: Int64?,
        premiumUntil: Date?, environment: String, status: PurchaseStatus, purchasedAt: Date
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.kind = kind
        self.tokens = tokens
        self.premiumUntil = premiumUntil
        self.environment = environment
        self.status = status
        self.purchasedAt = purchasedAt
    }
}

/// The answer of `POST /v1/purchases/apple`: the purchase, and the account after it — the wallet and premium an app
/// shows at once, with no second request.
public struct PurchaseResponse: Codable, Hashable, Sendable {
    /// The purchase redeemed (the same one again for a transaction redeemed before: nothing was credited twice).
    public var purchase: Purchase
    /// The wallet after it.
    public var wallet: Wallet
    /// When the account's premium ends (purchases and the admin's, the later one); nil: no premium.
    public var premiumUntil: Date?

    /// Creates the answer.
    public init(purchase: Purchase, wallet: Wallet, premiumUntil: Date?) {
        self.purchase = purchase
        self.wallet = wallet
        self.premiumUntil = premiumUntil
    }
}

/// `POST /v1/purchases/consumption-consent`: whether the user lets the server tell Apple how much of a purchase they
/// used when they ask Apple for a refund (Apple accepts that information only with the customer's consent).
public struct ConsumptionConsentRequest: Codable, Hashable, Sendable {
    /// Whether the user consents (false withdraws an earlier consent).
    public var consented: Bool

    /// A consent, or its withdrawal.
    public init(consented: Bool) { self.consented = consented }
}

/// The answer of `POST /v1/purchases/consumption-consent`: what the server recorded, and when.
public struct ConsumptionConsent: Codable, Hashable, Sendable {
    /// Whether the user consents.
    public var consented: Bool
    /// When the server recorded it.
    public var changedAt: Date

    /// Creates the answer.
    public init(consented: Bool, changedAt: Date) {
        self.consented = consented
        self.changedAt = changedAt
    }
}

/// `POST /admin/v1/users/{id}/purchases/reconcile`: credit what Apple's transaction history shows and the server missed.
public struct ReconcileRequest: Codable, Hashable, Sendable {
    /// An order id from the customer's receipt email (`MQ…`), for a user the server knows no transaction of.
    public var orderId: String?

    /// A request, with the customer's order id if known.
    public init(orderId: String? = nil) { self.orderId = orderId }
}

/// What a reconciliation found in Apple's records.
public struct ReconcileReport: Codable, Hashable, Sendable {
    /// The transactions credited (or whose premium was applied) now.
    public var credited: [String]
    /// The user's transactions the server already had.
    public var alreadyApplied: Int
    /// Transactions of the same customer whose `appAccountToken` names another account or none: left alone.
    public var otherAccounts: Int
    /// Transactions of products the configuration does not sell, or that were refused (their codes).
    public var refused: [String]

    /// Creates a report.
    public init(credited: [String], alreadyApplied: Int, otherAccounts: Int, refused: [String]) {
        self.credited = credited
        self.alreadyApplied = alreadyApplied
        self.otherAccounts = otherAccounts
        self.refused = refused
    }
}

/// `POST /admin/v1/appstore/replay-notifications`: apply what Apple's notification history holds (after an outage).
public struct ReplayNotificationsRequest: Codable, Hashable, Sendable {
    /// The earliest sending time (Apple keeps 180 days).
    public var since: Date
    /// The latest (default: now).
    public var until: Date?
    /// Only those Apple could not deliver (default true).
    public var onlyFailures: Bool?

    /// A request for the notifications sent from `since`.
    public init(since: Date, until: Date? = nil, onlyFailures: Bool? = nil) {
        self.since = since
        self.until = until
        self.onlyFailures = onlyFailures
    }
}

/// What a replay of Apple's notification history did.
public struct ReplayReport: Codable, Hashable, Sendable {
    /// Notifications read from Apple, per environment.
    public var read: Int
    /// Taken as each disposition (`applied`, `duplicate`, `stale`, `ignored`), counted.
    public var dispositions: [String: Int]
    /// Notifications that did not verify (their codes).
    public var refused: [String]

    /// Creates a report.
    public init(read: Int, dispositions: [String: Int], refused: [String]) {
        self.read = read
        self.dispositions = dispositions
        self.refused = refused
    }
}

/// `POST /v1/purchases/apple/offers`: a server-signed offer for StoreKit (the app cannot hold the key that signs it).
public struct OfferSignatureRequest: Codable, Hashable, Sendable {
    /// The subscription.
    public var productId: String
    /// The promotional offer's id in App Store Connect (a promotional offer only).
    public var offerIdentifier: String?
    /// `promotional` (the default) or `introductoryEligibility`.
    public var kind: String?
    /// StoreKit's `AppTransaction.appTransactionID`: the customer's transaction for a user who never bought anything
    /// (introductory eligibility needs one; the server otherwise uses the user's latest).
    public var appTransactionId: String?

    /// A request for `productId`'s promotional offer `offerIdentifier`, or its introductory offer eligibility.
    public init(productId: String, offerIdentifier: String? = nil, kind: String? = nil, appTransactionId: String? = nil) {
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.kind = kind
        self.appTransactionId = appTransactionId
    }
}

/// A signed offer: pass `compactJWS` to StoreKit (`.promotionalOffer(offerIdentifier, compactJWS:)` or
/// `.introductoryOfferEligibility(compactJWS:)`); it is good for one purchase.
public struct OfferSignature: Codable, Hashable, Sendable {
    /// `promotional` or `introductoryEligibility`.
    public var kind: String
    /// The subscription.
    public var productId: String
    /// The promotional offer's id.
    public var offerIdentifier: String?
    /// Whether the user may have the introductory offer (introductory eligibility only).
    public var allowIntroductoryOffer: Bool?
    /// The signature StoreKit takes.
    public var compactJWS: String

    /// Creates a signed offer.
    public init(kind: String, productId: String, offerIdentifier: String?, allowIntroductoryOffer: Bool?, compactJWS: String) {
        self.kind = kind
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.allowIntroductoryOffer = allowIntroductoryOffer
        self.compactJWS = compactJWS
    }
}
