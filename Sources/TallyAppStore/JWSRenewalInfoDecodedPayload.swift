import Foundation

/// A subscription's signed renewal information (`JWSRenewalInfoDecodedPayload`): what a notification's
/// `signedRenewalInfo` carries. Field names are Apple's; dates are milliseconds since 1970 on the wire. Obtain one
/// through ``AppStoreVerifier/verifyRenewalInfo(_:)`` or ``AppStoreVerifier/verifyNotification(_:)``.
public struct JWSRenewalInfoDecodedPayload: Codable, Hashable, Sendable {
    /// The subscription's original transaction id.
    public var originalTransactionId: String
    /// The product of the current period.
    public var productId: String
    /// The product the subscription renews to.
    public var autoRenewProductId: String
    /// 1: renews at the end of the period; 0: the user turned auto-renew off. See ``autoRenews``.
    public var autoRenewStatus: Int
    /// Why a subscription expired: 1 the customer cancelled, 2 a billing error, 3 a price increase not accepted,
    /// 4 the product not for sale at renewal, 5 another reason.
    public var expirationIntent: Int?
    /// When the billing grace period ends: until then the user keeps the service while billing is retried.
    public var gracePeriodExpiresDate: Date?
    /// Whether the App Store is still trying to renew after a billing failure.
    public var isInBillingRetryPeriod: Bool?
    /// When the App Store signed this payload.
    public var signedDate: Date
    /// `Production` or `Sandbox` (or an environment a verifier never accepts); see ``appStoreEnvironment``.
    public var environment: String
    /// When the next renewal happens.
    public var renewalDate: Date?
    /// The start of the latest run of uninterrupted periods.
    public var recentSubscriptionStartDate: Date?
    /// The price of the next period, in milliunits of ``currency``.
    public var renewalPrice: Int64?
    /// The ISO 4217 currency of ``renewalPrice``.
    public var currency: String?
    /// 0: a price increase not yet accepted; 1: accepted or not needed.
    public var priceIncreaseStatus: Int?
    /// The kind of offer at renewal: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public var offerType: Int?
    /// The offer's identifier.
    public var offerIdentifier: String?
    /// How the offer is paid.
    public var offerDiscountType: String?
    /// The offer's duration (ISO 8601).
    public var offerPeriod: String?
    /// The win-back offers the user can redeem.
    public var eligibleWinBackOfferIds: [String]?
    /// The UUID the app set at purchase; a value that is not a UUID decodes as nil.
    public var appAccountToken: UUID?
    /// The app transaction's id.
    public var appTransactionId: String?

    /// Whether the subscription renews at the end of its period (``autoRenewStatus`` is 1).
    public var autoRenews: Bool { autoRenewStatus == 1 }
    /// The signed ``environment``, if it is one a server can accept.
    public var appStoreEnvironment: AppStoreEnvironment? { AppStoreEnvironment(rawValue: environment) }

    /// Renewal information with the fields Tally reads; the others are nil.
    public init(
        originalTransactionId: String, productId: String, autoRenewProductId: String, autoRenewStatus: Int,
        expirationIntent: Int? = nil, gracePeriodExpiresDate: Date? = nil, isInBillingRetryPeriod: Bool? = nil,
        signedDate: Date, environment: String, renewalDate: Date? = nil, recentSubscriptionStartDate: Date? = nil,
        appAccountToken: UUID? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.autoRenewProductId = autoRenewProductId
        self.autoRenewStatus = autoRenewStatus
        self.expirationIntent = expirationIntent
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.signedDate = signedDate
        self.environment = environment
        self.renewalDate = renewalDate
        self.recentSubscriptionStartDate = recentSubscriptionStartDate
        self.appAccountToken = appAccountToken
    }
}
