/// A string of App Store signed payloads from an open set: a value Apple adds later decodes and keeps its raw string
/// (a switch over one needs a `default`), so a new notification type or transaction reason never makes a signed
/// payload unreadable. Codable as the bare string. `Kind`, an empty enum of ``AppStoreValueKind``, tells one set from
/// another: a product type is never taken for a notification type. Each set's known values are static members
/// (``AppStoreProductType/consumable``, ``AppStoreNotificationType/refund``, …).
public struct AppStoreValue<Kind>: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    /// The string as signed, e.g. `"Consumable"` or `"DID_RENEW"`.
    public let rawValue: String
    /// Wraps a signed string, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The raw string.
    public var description: String { rawValue }
}

/// The sets of ``AppStoreValue``: one empty enum each, never instantiated.
public enum AppStoreValueKind {
    /// ``AppStoreProductType``.
    public enum ProductType {}
    /// ``AppStoreOwnershipType``.
    public enum OwnershipType {}
    /// ``AppStoreTransactionReason``.
    public enum TransactionReason {}
    /// ``AppStoreRevocationType``.
    public enum RevocationType {}
    /// ``AppStoreNotificationType``.
    public enum NotificationType {}
    /// ``AppStoreNotificationSubtype``.
    public enum NotificationSubtype {}
    /// ``AppStoreVerificationError/Code``.
    public enum VerificationFailure {}
}

/// A transaction's `type`: what kind of in-app purchase it is.
public typealias AppStoreProductType = AppStoreValue<AppStoreValueKind.ProductType>

extension AppStoreValue where Kind == AppStoreValueKind.ProductType {
    /// Used up once bought (token packs): may be bought again.
    public static var consumable: Self { Self(rawValue: "Consumable") }
    /// Bought once, kept forever.
    public static var nonConsumable: Self { Self(rawValue: "Non-Consumable") }
    /// Renews by itself each period until cancelled (premium plans).
    public static var autoRenewableSubscription: Self { Self(rawValue: "Auto-Renewable Subscription") }
    /// A subscription the user buys again by hand.
    public static var nonRenewingSubscription: Self { Self(rawValue: "Non-Renewing Subscription") }
}

/// A transaction's `inAppOwnershipType`: bought by this user or shared by a family member.
public typealias AppStoreOwnershipType = AppStoreValue<AppStoreValueKind.OwnershipType>

extension AppStoreValue where Kind == AppStoreValueKind.OwnershipType {
    /// The user bought it.
    public static var purchased: Self { Self(rawValue: "PURCHASED") }
    /// A family member's purchase shared through Family Sharing.
    public static var familyShared: Self { Self(rawValue: "FAMILY_SHARED") }
}

/// A transaction's `transactionReason`: the user bought it, or a subscription renewed.
public typealias AppStoreTransactionReason = AppStoreValue<AppStoreValueKind.TransactionReason>

extension AppStoreValue where Kind == AppStoreValueKind.TransactionReason {
    /// A purchase the user made (or an upgrade, an offer).
    public static var purchase: Self { Self(rawValue: "PURCHASE") }
    /// An automatic renewal of a subscription.
    public static var renewal: Self { Self(rawValue: "RENEWAL") }
}

/// A transaction's `revocationType`: how much of it the App Store took back, and why.
public typealias AppStoreRevocationType = AppStoreValue<AppStoreValueKind.RevocationType>

extension AppStoreValue where Kind == AppStoreValueKind.RevocationType {
    /// Refunded in full.
    public static var refundFull: Self { Self(rawValue: "REFUND_FULL") }
    /// Refunded in part: `revocationPercentage` says how much, in milliunits (50_000 is 50 %).
    public static var refundProrated: Self { Self(rawValue: "REFUND_PRORATED") }
    /// Family Sharing no longer shares it with this user.
    public static var familyRevoke: Self { Self(rawValue: "FAMILY_REVOKE") }
}

/// A notification's `notificationType` (App Store Server Notifications V2).
public typealias AppStoreNotificationType = AppStoreValue<AppStoreValueKind.NotificationType>

extension AppStoreValue where Kind == AppStoreValueKind.NotificationType {
    /// The App Store asks for consumption information about a refund request.
    public static var consumptionRequest: Self { Self(rawValue: "CONSUMPTION_REQUEST") }
    /// The user changed the plan their subscription renews to (subtype `UPGRADE`, `DOWNGRADE` or none).
    public static var didChangeRenewalPreference: Self { Self(rawValue: "DID_CHANGE_RENEWAL_PREF") }
    /// The user turned auto-renew on or off (subtype `AUTO_RENEW_ENABLED` / `AUTO_RENEW_DISABLED`).
    public static var didChangeRenewalStatus: Self { Self(rawValue: "DID_CHANGE_RENEWAL_STATUS") }
    /// A renewal's billing failed (subtype `GRACE_PERIOD`: service continues until `gracePeriodExpiresDate`).
    public static var didFailToRenew: Self { Self(rawValue: "DID_FAIL_TO_RENEW") }
    /// A subscription renewed (subtype `BILLING_RECOVERY` after a failed billing).
    public static var didRenew: Self { Self(rawValue: "DID_RENEW") }
    /// A subscription expired (subtype `VOLUNTARY`, `BILLING_RETRY`, `PRICE_INCREASE`, `PRODUCT_NOT_FOR_SALE`).
    public static var expired: Self { Self(rawValue: "EXPIRED") }
    /// An external purchase token was reported (or not) to Apple.
    public static var externalPurchaseToken: Self { Self(rawValue: "EXTERNAL_PURCHASE_TOKEN") }
    /// The billing grace period ended without a successful renewal.
    public static var gracePeriodExpired: Self { Self(rawValue: "GRACE_PERIOD_EXPIRED") }
    /// A metadata change of a subscription (Advanced Commerce).
    public static var metadataUpdate: Self { Self(rawValue: "METADATA_UPDATE") }
    /// A subscription migrated (Advanced Commerce).
    public static var migration: Self { Self(rawValue: "MIGRATION") }
    /// The user redeemed an offer.
    public static var offerRedeemed: Self { Self(rawValue: "OFFER_REDEEMED") }
    /// A one-time purchase: a consumable, non-consumable or non-renewing subscription.
    public static var oneTimeCharge: Self { Self(rawValue: "ONE_TIME_CHARGE") }
    /// A price change of a subscription (Advanced Commerce).
    public static var priceChange: Self { Self(rawValue: "PRICE_CHANGE") }
    /// The system told the user of a price increase (subtype `PENDING` / `ACCEPTED`).
    public static var priceIncrease: Self { Self(rawValue: "PRICE_INCREASE") }
    /// The App Store refunded a transaction (`revocationDate`, `revocationReason`, `revocationType`, `revocationPercentage`).
    public static var refund: Self { Self(rawValue: "REFUND") }
    /// The App Store declined a refund request.
    public static var refundDeclined: Self { Self(rawValue: "REFUND_DECLINED") }
    /// The App Store reversed a refund it had granted.
    public static var refundReversed: Self { Self(rawValue: "REFUND_REVERSED") }
    /// The App Store extended a subscription's renewal date for one subscriber.
    public static var renewalExtended: Self { Self(rawValue: "RENEWAL_EXTENDED") }
    /// A mass renewal-date extension (subtype `SUMMARY` or `FAILURE`).
    public static var renewalExtension: Self { Self(rawValue: "RENEWAL_EXTENSION") }
    /// The user's parent or guardian withdrew consent (Declared Age Range).
    public static var rescindConsent: Self { Self(rawValue: "RESCIND_CONSENT") }
    /// Family Sharing no longer gives the user the purchase.
    public static var revoke: Self { Self(rawValue: "REVOKE") }
    /// The user subscribed (subtype `INITIAL_BUY` or `RESUBSCRIBE`).
    public static var subscribed: Self { Self(rawValue: "SUBSCRIBED") }
    /// A test notification requested through the App Store Server API.
    public static var test: Self { Self(rawValue: "TEST") }
}

/// A notification's `subtype`: the detail of its type.
public typealias AppStoreNotificationSubtype = AppStoreValue<AppStoreValueKind.NotificationSubtype>

extension AppStoreValue where Kind == AppStoreValueKind.NotificationSubtype {
    /// `SUBSCRIBED`: the first purchase of a subscription group.
    public static var initialBuy: Self { Self(rawValue: "INITIAL_BUY") }
    /// `SUBSCRIBED`: a subscription bought again after it expired.
    public static var resubscribe: Self { Self(rawValue: "RESUBSCRIBE") }
    /// `DID_CHANGE_RENEWAL_PREF`: a downgrade at the next renewal.
    public static var downgrade: Self { Self(rawValue: "DOWNGRADE") }
    /// `DID_CHANGE_RENEWAL_PREF` / `OFFER_REDEEMED`: an upgrade, effective at once.
    public static var upgrade: Self { Self(rawValue: "UPGRADE") }
    /// `DID_CHANGE_RENEWAL_STATUS`: auto-renew turned on.
    public static var autoRenewEnabled: Self { Self(rawValue: "AUTO_RENEW_ENABLED") }
    /// `DID_CHANGE_RENEWAL_STATUS`: auto-renew turned off.
    public static var autoRenewDisabled: Self { Self(rawValue: "AUTO_RENEW_DISABLED") }
    /// `EXPIRED`: the user turned auto-renew off.
    public static var voluntary: Self { Self(rawValue: "VOLUNTARY") }
    /// `EXPIRED`: the billing retry period ended without a renewal.
    public static var billingRetry: Self { Self(rawValue: "BILLING_RETRY") }
    /// `EXPIRED` / `PRICE_INCREASE`: about a price increase.
    public static var priceIncrease: Self { Self(rawValue: "PRICE_INCREASE") }
    /// `DID_FAIL_TO_RENEW`: billing failed and a grace period keeps the service until `gracePeriodExpiresDate`.
    public static var gracePeriod: Self { Self(rawValue: "GRACE_PERIOD") }
    /// `PRICE_INCREASE`: the user has not answered yet.
    public static var pending: Self { Self(rawValue: "PENDING") }
    /// `PRICE_INCREASE`: the user accepted.
    public static var accepted: Self { Self(rawValue: "ACCEPTED") }
    /// `DID_RENEW`: a renewal after billing had failed.
    public static var billingRecovery: Self { Self(rawValue: "BILLING_RECOVERY") }
    /// `EXPIRED`: the product was not for sale at renewal.
    public static var productNotForSale: Self { Self(rawValue: "PRODUCT_NOT_FOR_SALE") }
    /// `RENEWAL_EXTENSION`: the extension finished.
    public static var summary: Self { Self(rawValue: "SUMMARY") }
    /// `RENEWAL_EXTENSION`: the extension failed for one subscription.
    public static var failure: Self { Self(rawValue: "FAILURE") }
    /// `EXTERNAL_PURCHASE_TOKEN`: a token not reported in time.
    public static var unreported: Self { Self(rawValue: "UNREPORTED") }
}
