import Foundation

/// A signed transaction's payload (`JWSTransactionDecodedPayload`): what StoreKit 2's `Transaction.jwsRepresentation`
/// and a notification's `signedTransactionInfo` carry. Field names are Apple's; dates are milliseconds since 1970 on
/// the wire (``AppStoreJSON``). Obtain one through ``AppStoreVerifier/verifyTransaction(_:)``, never by decoding
/// unverified bytes.
public struct JWSTransactionDecodedPayload: Codable, Hashable, Sendable {
    /// The transaction's id: unique per purchase and per renewal.
    public var transactionId: String
    /// The id of the original purchase: a subscription's renewals and restores share it.
    public var originalTransactionId: String
    /// The app's bundle id.
    public var bundleId: String
    /// The product's id as configured in App Store Connect.
    public var productId: String
    /// When the App Store charged the user (a renewal's start).
    public var purchaseDate: Date
    /// When the original transaction was bought.
    public var originalPurchaseDate: Date
    /// When a subscription period ends (subscriptions only).
    public var expiresDate: Date?
    /// How many of a consumable were bought.
    public var quantity: Int
    /// What kind of product.
    public var type: AppStoreProductType
    /// The UUID the app set at purchase (`Product.PurchaseOption.appAccountToken`); Tally's SDK sets the user's id.
    /// A value that is not a UUID (some payloads carry `""`) decodes as nil.
    public var appAccountToken: UUID?
    /// Bought by the user, or shared with them by a family member.
    public var inAppOwnershipType: AppStoreOwnershipType
    /// When the App Store signed this payload: the instant its certificate chain is checked at.
    public var signedDate: Date
    /// `Production` or `Sandbox` (or `Xcode`, `LocalTesting`, which a verifier never accepts); see ``appStoreEnvironment``.
    public var environment: String
    /// When the App Store refunded or revoked the transaction.
    public var revocationDate: Date?
    /// Why: 1 an issue in the app, 0 another reason.
    public var revocationReason: Int?
    /// Full refund, prorated refund or Family Sharing revocation.
    public var revocationType: AppStoreRevocationType?
    /// The part refunded or revoked, in milliunits: 100_000 is all of it.
    public var revocationPercentage: Int?
    /// A purchase or a renewal.
    public var transactionReason: AppStoreTransactionReason?
    /// The id of a subscription purchase across devices (subscriptions only).
    public var webOrderLineItemId: String?
    /// The subscription group (subscriptions only).
    public var subscriptionGroupIdentifier: String?
    /// Whether the user upgraded to another subscription (this one then ended).
    public var isUpgraded: Bool?
    /// The storefront's three-letter country code.
    public var storefront: String?
    /// The storefront's Apple id.
    public var storefrontId: String?
    /// The price in milliunits of ``currency`` (1_990 is 1.99).
    public var price: Int64?
    /// The ISO 4217 currency of ``price``.
    public var currency: String?
    /// The kind of offer redeemed: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public var offerType: Int?
    /// The offer's identifier.
    public var offerIdentifier: String?
    /// How the offer is paid: `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`.
    public var offerDiscountType: String?
    /// The offer's duration (ISO 8601, e.g. `P1M`).
    public var offerPeriod: String?
    /// The app transaction's id: one per app download and Apple Account.
    public var appTransactionId: String?

    /// The signed ``environment``, if it is one a server can accept.
    public var appStoreEnvironment: AppStoreEnvironment? { AppStoreEnvironment(rawValue: environment) }

    /// A payload with the fields Tally reads; the others are nil.
    public init(
        transactionId: String, originalTransactionId: String, bundleId: String, productId: String, purchaseDate: Date,
        originalPurchaseDate: Date, expiresDate: Date? = nil, quantity: Int = 1, type: AppStoreProductType,
        appAccountToken: UUID? = nil, inAppOwnershipType: AppStoreOwnershipType = .purchased, signedDate: Date,
        environment: String, revocationDate: Date? = nil, revocationReason: Int? = nil,
        revocationType: AppStoreRevocationType? = nil, revocationPercentage: Int? = nil,
        transactionReason: AppStoreTransactionReason? = nil, webOrderLineItemId: String? = nil,
        subscriptionGroupIdentifier: String? = nil, storefront: String? = nil, storefrontId: String? = nil,
        price: Int64? = nil, currency: String? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.bundleId = bundleId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.type = type
        self.appAccountToken = appAccountToken
        self.inAppOwnershipType = inAppOwnershipType
        self.signedDate = signedDate
        self.environment = environment
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.transactionReason = transactionReason
        self.webOrderLineItemId = webOrderLineItemId
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.price = price
        self.currency = currency
    }
}

extension KeyedDecodingContainer {
    /// An `appAccountToken` (the only optional UUID in the signed payloads, whose synthesized decoding picks this
    /// overload): a string that is not a UUID, such as `""`, is nil instead of making the whole payload unreadable.
    func decodeIfPresent(_ type: UUID.Type, forKey key: Key) throws -> UUID? {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        return UUID(uuidString: text)
    }
}

extension KeyedEncodingContainer {
    /// An `appAccountToken` as Apple writes it: the UUID in lowercase.
    mutating func encodeIfPresent(_ value: UUID?, forKey key: Key) throws {
        guard let value else { return }
        try encode(value.uuidString.lowercased(), forKey: key)
    }
}
