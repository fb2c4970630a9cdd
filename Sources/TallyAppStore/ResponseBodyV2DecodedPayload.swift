import Foundation

/// An App Store Server Notification V2's payload (`ResponseBodyV2DecodedPayload`): what the `signedPayload` of the
/// webhook's body `{"signedPayload": "<JWS>"}` carries. Obtain one through ``AppStoreVerifier/verifyNotification(_:)``,
/// which also verifies the transaction and renewal information it embeds.
///
/// A notification has one of ``data`` (about an app's transactions), ``summary`` (a mass renewal extension) or
/// ``externalPurchaseToken``; the app it is for is read from whichever it has (``app``).
public struct ResponseBodyV2DecodedPayload: Codable, Hashable, Sendable {
    /// What happened. A type Apple adds later decodes and keeps its raw string.
    public var notificationType: AppStoreNotificationType
    /// The detail of what happened, for the types that have one.
    public var subtype: AppStoreNotificationSubtype?
    /// The notification's id: the same for every retry of one notification (deduplicate on it).
    public var notificationUUID: String
    /// The notification format's version (`"2.0"`).
    public var version: String?
    /// When the App Store signed this notification.
    public var signedDate: Date
    /// The app, its environment and the signed transaction and renewal information.
    public var data: AppStoreNotificationData?
    /// A mass renewal extension's result (`RENEWAL_EXTENSION` / `SUMMARY`).
    public var summary: AppStoreNotificationSummary?
    /// An external purchase token (`EXTERNAL_PURCHASE_TOKEN`).
    public var externalPurchaseToken: AppStoreExternalPurchaseToken?

    /// The app the notification is for, from ``data``, ``summary`` or ``externalPurchaseToken`` (the first present);
    /// nil when it has none of them.
    public var app: (bundleId: String, environment: String, appAppleId: Int64?)? {
        if let data { return (data.bundleId, data.environment, data.appAppleId) }
        if let summary { return (summary.bundleId, summary.environment, summary.appAppleId) }
        if let token = externalPurchaseToken { return (token.bundleId, token.environment, token.appAppleId) }
        return nil
    }

    /// A notification about an app's transactions.
    public init(
        notificationType: AppStoreNotificationType, subtype: AppStoreNotificationSubtype? = nil, notificationUUID: String,
        version: String? = "2.0", signedDate: Date, data: AppStoreNotificationData?
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = version
        self.signedDate = signedDate
        self.data = data
    }
}

/// A notification's `data`: the app and the signed information about the transaction concerned.
public struct AppStoreNotificationData: Codable, Hashable, Sendable {
    /// The app's Apple id in App Store Connect (absent in the sandbox).
    public var appAppleId: Int64?
    /// The app's bundle id.
    public var bundleId: String
    /// The app's build version.
    public var bundleVersion: String?
    /// `Production` or `Sandbox` (or an environment a verifier never accepts).
    public var environment: String
    /// The transaction, signed by the App Store (a JWS of ``JWSTransactionDecodedPayload``).
    public var signedTransactionInfo: String?
    /// A subscription's renewal information, signed (a JWS of ``JWSRenewalInfoDecodedPayload``).
    public var signedRenewalInfo: String?
    /// A subscription's status: 1 active, 2 expired, 3 in billing retry, 4 in a billing grace period, 5 revoked.
    public var status: Int?
    /// Why the customer asked for a refund (`CONSUMPTION_REQUEST`).
    public var consumptionRequestReason: String?

    /// The data of a notification.
    public init(
        appAppleId: Int64? = nil, bundleId: String, bundleVersion: String? = nil, environment: String,
        signedTransactionInfo: String? = nil, signedRenewalInfo: String? = nil, status: Int? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.bundleVersion = bundleVersion
        self.environment = environment
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
        self.status = status
    }
}

/// A notification's `summary`: the result of a renewal-date extension for many subscribers.
public struct AppStoreNotificationSummary: Codable, Hashable, Sendable {
    /// The extension request's id.
    public var requestIdentifier: String?
    /// `Production` or `Sandbox`.
    public var environment: String
    /// The app's Apple id.
    public var appAppleId: Int64?
    /// The app's bundle id.
    public var bundleId: String
    /// The subscription's product id.
    public var productId: String?
    /// The storefronts the extension covered.
    public var storefrontCountryCodes: [String]?
    /// Subscriptions extended.
    public var succeededCount: Int64?
    /// Subscriptions not extended.
    public var failedCount: Int64?
}

/// A notification's `externalPurchaseToken`.
public struct AppStoreExternalPurchaseToken: Codable, Hashable, Sendable {
    /// The token's id; sandbox ones begin with `SANDBOX`.
    public var externalPurchaseId: String?
    /// When the token was created.
    public var tokenCreationDate: Date?
    /// The app's Apple id.
    public var appAppleId: Int64?
    /// The app's bundle id.
    public var bundleId: String

    /// `Sandbox` when ``externalPurchaseId`` begins with `SANDBOX`, else `Production` (the token has no environment field).
    public var environment: String {
        externalPurchaseId?.hasPrefix("SANDBOX") == true ? AppStoreEnvironment.sandbox.rawValue : AppStoreEnvironment.production.rawValue
    }
}
