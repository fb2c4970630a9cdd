/// A string enumeration of App Store signed payloads. Each is an open set: a value Apple adds later decodes and keeps
/// its raw string (a switch over one needs a `default`), so a new notification type or transaction reason never makes
/// a signed payload unreadable. Codable as the bare string.
public protocol AppStoreStringValue: RawRepresentable<String>, Codable, Hashable, Sendable, CustomStringConvertible {
    /// Wraps a signed string, known or not.
    init(rawValue: String)
}

extension AppStoreStringValue {
    /// The raw string.
    public var description: String { rawValue }
}

/// A transaction's `type`: what kind of in-app purchase it is.
public struct AppStoreProductType: AppStoreStringValue {
    /// The string as signed, e.g. `"Consumable"`.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Used up once bought (token packs): may be bought again.
    public static let consumable = Self(rawValue: "Consumable")
    /// Bought once, kept forever.
    public static let nonConsumable = Self(rawValue: "Non-Consumable")
    /// Renews by itself each period until cancelled (premium plans).
    public static let autoRenewableSubscription = Self(rawValue: "Auto-Renewable Subscription")
    /// A subscription the user buys again by hand.
    public static let nonRenewingSubscription = Self(rawValue: "Non-Renewing Subscription")
}

/// A transaction's `inAppOwnershipType`: bought by this user or shared by a family member.
public struct AppStoreOwnershipType: AppStoreStringValue {
    /// The string as signed.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The user bought it.
    public static let purchased = Self(rawValue: "PURCHASED")
    /// A family member's purchase shared through Family Sharing.
    public static let familyShared = Self(rawValue: "FAMILY_SHARED")
}

/// A transaction's `transactionReason`: the user bought it, or a subscription renewed.
public struct AppStoreTransactionReason: AppStoreStringValue {
    /// The string as signed.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A purchase the user made (or an upgrade, an offer).
    public static let purchase = Self(rawValue: "PURCHASE")
    /// An automatic renewal of a subscription.
    public static let renewal = Self(rawValue: "RENEWAL")
}

/// A transaction's `revocationType`: how much of it the App Store took back, and why.
public struct AppStoreRevocationType: AppStoreStringValue {
    /// The string as signed.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Refunded in full.
    public static let refundFull = Self(rawValue: "REFUND_FULL")
    /// Refunded in part: `revocationPercentage` says how much, in milliunits (50_000 is 50 %).
    public static let refundProrated = Self(rawValue: "REFUND_PRORATED")
    /// Family Sharing no longer shares it with this user.
    public static let familyRevoke = Self(rawValue: "FAMILY_REVOKE")
}

/// A notification's `notificationType` (App Store Server Notifications V2).
public struct AppStoreNotificationType: AppStoreStringValue {
    /// The string as signed, e.g. `"DID_RENEW"`.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The App Store asks for consumption information about a refund request.
    public static let consumptionRequest = Self(rawValue: "CONSUMPTION_REQUEST")
    /// The user changed the plan their subscription renews to (subtype `UPGRADE`, `DOWNGRADE` or none).
    public static let didChangeRenewalPreference = Self(rawValue: "DID_CHANGE_RENEWAL_PREF")
    /// The user turned auto-renew on or off (subtype `AUTO_RENEW_ENABLED` / `AUTO_RENEW_DISABLED`).
    public static let didChangeRenewalStatus = Self(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    /// A renewal's billing failed (subtype `GRACE_PERIOD`: service continues until `gracePeriodExpiresDate`).
    public static let didFailToRenew = Self(rawValue: "DID_FAIL_TO_RENEW")
    /// A subscription renewed (subtype `BILLING_RECOVERY` after a failed billing).
    public static let didRenew = Self(rawValue: "DID_RENEW")
    /// A subscription expired (subtype `VOLUNTARY`, `BILLING_RETRY`, `PRICE_INCREASE`, `PRODUCT_NOT_FOR_SALE`).
    public static let expired = Self(rawValue: "EXPIRED")
    /// An external purchase token was reported (or not) to Apple.
    public static let externalPurchaseToken = Self(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    /// The billing grace period ended without a successful renewal.
    public static let gracePeriodExpired = Self(rawValue: "GRACE_PERIOD_EXPIRED")
    /// A metadata change of a subscription (Advanced Commerce).
    public static let metadataUpdate = Self(rawValue: "METADATA_UPDATE")
    /// A subscription migrated (Advanced Commerce).
    public static let migration = Self(rawValue: "MIGRATION")
    /// The user redeemed an offer.
    public static let offerRedeemed = Self(rawValue: "OFFER_REDEEMED")
    /// A one-time purchase: a consumable, non-consumable or non-renewing subscription.
    public static let oneTimeCharge = Self(rawValue: "ONE_TIME_CHARGE")
    /// A price change of a subscription (Advanced Commerce).
    public static let priceChange = Self(rawValue: "PRICE_CHANGE")
    /// The system told the user of a price increase (subtype `PENDING` / `ACCEPTED`).
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    /// The App Store refunded a transaction (`revocationDate`, `revocationReason`, `revocationType`, `revocationPercentage`).
    public static let refund = Self(rawValue: "REFUND")
    /// The App Store declined a refund request.
    public static let refundDeclined = Self(rawValue: "REFUND_DECLINED")
    /// The App Store reversed a refund it had granted.
    public static let refundReversed = Self(rawValue: "REFUND_REVERSED")
    /// The App Store extended a subscription's renewal date for one subscriber.
    public static let renewalExtended = Self(rawValue: "RENEWAL_EXTENDED")
    /// A mass renewal-date extension (subtype `SUMMARY` or `FAILURE`).
    public static let renewalExtension = Self(rawValue: "RENEWAL_EXTENSION")
    /// The user's parent or guardian withdrew consent (Declared Age Range).
    public static let rescindConsent = Self(rawValue: "RESCIND_CONSENT")
    /// Family Sharing no longer gives the user the purchase.
    public static let revoke = Self(rawValue: "REVOKE")
    /// The user subscribed (subtype `INITIAL_BUY` or `RESUBSCRIBE`).
    public static let subscribed = Self(rawValue: "SUBSCRIBED")
    /// A test notification requested through the App Store Server API.
    public static let test = Self(rawValue: "TEST")
}

/// A notification's `subtype`: the detail of its type.
public struct AppStoreNotificationSubtype: AppStoreStringValue {
    /// The string as signed, e.g. `"GRACE_PERIOD"`.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `SUBSCRIBED`: the first purchase of a subscription group.
    public static let initialBuy = Self(rawValue: "INITIAL_BUY")
    /// `SUBSCRIBED`: a subscription bought again after it expired.
    public static let resubscribe = Self(rawValue: "RESUBSCRIBE")
    /// `DID_CHANGE_RENEWAL_PREF`: a downgrade at the next renewal.
    public static let downgrade = Self(rawValue: "DOWNGRADE")
    /// `DID_CHANGE_RENEWAL_PREF` / `OFFER_REDEEMED`: an upgrade, effective at once.
    public static let upgrade = Self(rawValue: "UPGRADE")
    /// `DID_CHANGE_RENEWAL_STATUS`: auto-renew turned on.
    public static let autoRenewEnabled = Self(rawValue: "AUTO_RENEW_ENABLED")
    /// `DID_CHANGE_RENEWAL_STATUS`: auto-renew turned off.
    public static let autoRenewDisabled = Self(rawValue: "AUTO_RENEW_DISABLED")
    /// `EXPIRED`: the user turned auto-renew off.
    public static let voluntary = Self(rawValue: "VOLUNTARY")
    /// `EXPIRED`: the billing retry period ended without a renewal.
    public static let billingRetry = Self(rawValue: "BILLING_RETRY")
    /// `EXPIRED` / `PRICE_INCREASE`: about a price increase.
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    /// `DID_FAIL_TO_RENEW`: billing failed and a grace period keeps the service until `gracePeriodExpiresDate`.
    public static let gracePeriod = Self(rawValue: "GRACE_PERIOD")
    /// `PRICE_INCREASE`: the user has not answered yet.
    public static let pending = Self(rawValue: "PENDING")
    /// `PRICE_INCREASE`: the user accepted.
    public static let accepted = Self(rawValue: "ACCEPTED")
    /// `DID_RENEW`: a renewal after billing had failed.
    public static let billingRecovery = Self(rawValue: "BILLING_RECOVERY")
    /// `EXPIRED`: the product was not for sale at renewal.
    public static let productNotForSale = Self(rawValue: "PRODUCT_NOT_FOR_SALE")
    /// `RENEWAL_EXTENSION`: the extension finished.
    public static let summary = Self(rawValue: "SUMMARY")
    /// `RENEWAL_EXTENSION`: the extension failed for one subscription.
    public static let failure = Self(rawValue: "FAILURE")
    /// `EXTERNAL_PURCHASE_TOKEN`: a token not reported in time.
    public static let unreported = Self(rawValue: "UNREPORTED")
}
