import Foundation

// App Store purchases as the stores take them: facts already verified (the route layer checks each signed payload
// and maps it to these types), and what the stores answer. The rules that turn facts into writes are
// ``PurchasePlanner``'s; the rows they write, ``StoredPurchase`` and ``StoredSubscription``.

/// What a product id of the configuration sells.
public enum PurchaseProduct: Sendable, Hashable {
    /// A consumable: this many tokens for each unit bought (credited × the transaction's quantity).
    case tokens(Int64)
    /// An auto-renewable subscription: premium while it is active.
    case premium

    /// Consumable or subscription.
    public var kind: PurchaseKind {
        switch self {
        case .tokens: return .consumable
        case .premium: return .subscription
        }
    }
}

/// The two kinds of App Store product Tally sells.
public enum PurchaseKind: String, Sendable, Hashable, CaseIterable {
    /// Credits tokens, once.
    case consumable
    /// Gives premium until it expires; renews under the same original transaction.
    case subscription
}

/// A StoreKit 2 transaction whose signature, chain, bundle and environment were verified.
public struct VerifiedTransaction: Sendable, Hashable {
    /// The transaction's id (a renewal has a new one).
    public var transactionId: String
    /// The id of the first transaction of its subscription (a consumable's own id).
    public var originalTransactionId: String
    /// The App Store product id.
    public var productId: String
    /// What the configuration says the product sells.
    public var product: PurchaseProduct
    /// Units bought (consumables; 1 for a subscription).
    public var quantity: Int
    /// The Tally user id the app set when it bought (lowercase), or `nil`.
    public var appAccountToken: String?
    /// `Production`, `Sandbox`, …, as signed.
    public var environment: String
    /// When it was bought (a renewal: when it renewed).
    public var purchaseDate: Date
    /// When its original transaction was bought (a subscription's first period); `nil`: ``purchaseDate`` stands for it.
    public var originalPurchaseDate: Date?
    /// A subscription transaction's end.
    public var expiresDate: Date?
    /// When the App Store refunded or revoked it, if it did.
    public var revocationDate: Date?
    /// The part refunded, in thousandths of a percent (100000: all of it); `nil` means all.
    public var revocationPercentage: Int?
    /// When the App Store signed this payload.
    public var signedDate: Date
    /// For a Sandbox transaction, the most tokens Sandbox consumables may credit one account in all (the configuration's
    /// `appStore.sandbox.tokensPerAccount`; 0: none); `nil`: no bound.
    public var sandboxLimit: Int64?

    /// The environment name of the App Store's test purchases (TestFlight, App Review, Xcode's sandbox accounts).
    public static let sandbox = "Sandbox"

    /// Creates a transaction.
    public init(
        transactionId: String, originalTransactionId: String, productId: String, product: PurchaseProduct, quantity: Int = 1,
        appAccountToken: String? = nil, environment: String, purchaseDate: Date, originalPurchaseDate: Date? = nil,
        expiresDate: Date? = nil, revocationDate: Date? = nil, revocationPercentage: Int? = nil, signedDate: Date,
        sandboxLimit: Int64? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.product = product
        self.quantity = quantity
        self.appAccountToken = appAccountToken
        self.environment = environment
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.revocationPercentage = revocationPercentage
        self.signedDate = signedDate
        self.sandboxLimit = sandboxLimit
    }
}

/// The `notificationType` of an App Store Server Notification V2, as far as Tally acts on it.
public enum NotificationType: Sendable, Hashable {
    /// A subscription bought (or bought again).
    case subscribed
    /// A subscription renewed.
    case didRenew
    /// Auto-renew turned on or off (the end stays its transaction's).
    case didChangeRenewalStatus
    /// A renewal failed: premium stays until the grace period's end (``RenewalState/gracePeriodExpiresDate``), if it has one.
    case didFailToRenew
    /// A subscription expired.
    case expired
    /// A grace period ended without a renewal.
    case gracePeriodExpired
    /// Family Sharing access revoked.
    case revoke
    /// A consumable bought.
    case oneTimeCharge
    /// A transaction refunded.
    case refund
    /// A refund undone.
    case refundReversed
    /// A test notification (App Store Connect's button).
    case test
    /// Any other type: recorded as seen, and for a transaction it carries, its state taken as it says.
    case other(String)

    /// The type named `rawValue` (`DID_RENEW`, …).
    public init(rawValue: String) {
        self = Self.named[rawValue] ?? .other(rawValue)
    }

    /// Apple's name of the type.
    public var rawValue: String {
        if case .other(let name) = self { return name }
        return Self.named.first { $0.value == self }?.key ?? ""
    }

    private static let named: [String: NotificationType] = [
        "SUBSCRIBED": .subscribed, "DID_RENEW": .didRenew, "DID_CHANGE_RENEWAL_STATUS": .didChangeRenewalStatus,
        "DID_FAIL_TO_RENEW": .didFailToRenew, "EXPIRED": .expired, "GRACE_PERIOD_EXPIRED": .gracePeriodExpired,
        "REVOKE": .revoke, "ONE_TIME_CHARGE": .oneTimeCharge, "REFUND": .refund, "REFUND_REVERSED": .refundReversed, "TEST": .test,
    ]
}

/// What a notification's signed renewal information says, as far as Tally acts on it.
public struct RenewalState: Sendable, Hashable {
    /// Whether the subscription renews by itself.
    public var autoRenews: Bool?
    /// The end of the grace period of a failed renewal, while one runs: premium lasts until then.
    public var gracePeriodExpiresDate: Date?

    /// Creates a renewal state.
    public init(autoRenews: Bool? = nil, gracePeriodExpiresDate: Date? = nil) {
        self.autoRenews = autoRenews
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
    }
}

/// An App Store Server Notification V2 whose signature, chain, bundle and environment were verified.
public struct VerifiedNotification: Sendable, Hashable {
    /// Apple's id of the notification: a retry has the same one.
    public var notificationUUID: String
    /// What happened.
    public var type: NotificationType
    /// Apple's subtype (`GRACE_PERIOD`, `VOLUNTARY`, …), if any.
    public var subtype: String?
    /// When the App Store signed it: a notification older than one applied to its original transaction changes nothing.
    public var signedDate: Date
    /// The transaction it is about; `nil` for a test, or for a product the configuration does not sell (the
    /// notification is then only recorded as seen).
    public var transaction: VerifiedTransaction?
    /// The subscription's renewal information, if it came with one.
    public var renewal: RenewalState?

    /// Creates a notification.
    public init(
        notificationUUID: String, type: NotificationType, subtype: String? = nil, signedDate: Date,
        transaction: VerifiedTransaction?, renewal: RenewalState? = nil
    ) {
        self.notificationUUID = notificationUUID
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.transaction = transaction
        self.renewal = renewal
    }
}

/// Where a purchase stands: a consumable as its newest fact leaves it, a subscription as the newest fact applied to it
/// does (and the time: its premium's end).
public enum PurchaseStatus: String, Sendable, Hashable, CaseIterable {
    /// A consumable no account has been credited for yet (its `appAccountToken` named no account, or its Sandbox
    /// credit was refused): the first to submit it gets it.
    case unclaimed
    /// A consumable credited.
    case credited
    /// Refunded: a consumable's tokens taken back (until its refund is reversed); a subscription's premium ended at the refund.
    case refunded
    /// A subscription giving premium now (its period, or its billing grace period, has not ended).
    case active
    /// A subscription whose premium has ended (its period ran out, or `EXPIRED` ended it).
    case expired
    /// A subscription Apple revoked (Family Sharing ended): its premium ended then.
    case revoked
    /// A subscription another account holds now (restored there): it gives this account nothing.
    case movedAway = "moved_away"
}

/// One App Store purchase, as `GET /v1/purchases` lists it: a consumable's transaction, or a subscription (one row per
/// original transaction in an account's list, its renewals inside it).
public struct PurchaseRecord: Sendable, Hashable {
    /// The transaction's id (a subscription's: its latest transaction's).
    public var transactionId: String
    /// Its subscription's first transaction (a consumable's own id).
    public var originalTransactionId: String
    /// The App Store product id.
    public var productId: String
    /// Consumable or subscription.
    public var kind: PurchaseKind
    /// Units bought.
    public var quantity: Int
    /// A consumable's tokens: what it credits (per unit × quantity).
    public var tokens: Int64?
    /// A subscription's end of premium (its latest period's end, its grace period's if later, its refund's or revocation's
    /// date if earlier); `nil` when it moved away.
    public var premiumUntil: Date?
    /// The environment it was signed in.
    public var environment: String
    /// Where it stands.
    public var status: PurchaseStatus
    /// The account whose list it is in (a consumable's: credited to; a subscription's: an account that held it); `nil`
    /// while unclaimed, or after that account's deletion.
    public var userId: String?
    /// When it was bought (a subscription: its first period).
    public var purchasedAt: Date
    /// When it was refunded or revoked, while that stands.
    public var refundedAt: Date?
    /// A consumable's tokens taken back by its latest refund (0 when there was nothing to take back), once it was refunded.
    public var refundedTokens: Int64?
    /// When Tally first recorded it.
    public var recordedAt: Date

    /// Creates a record.
    public init(
        transactionId: String, originalTransactionId: String, productId: String, kind: PurchaseKind, quantity: Int, tokens: Int64?,
        premiumUntil: Date?, environment: String, status: PurchaseStatus, userId: String?, purchasedAt: Date, refundedAt: Date?,
        refundedTokens: Int64?, recordedAt: Date
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.kind = kind
        self.quantity = quantity
        self.tokens = tokens
        self.premiumUntil = premiumUntil
        self.environment = environment
        self.status = status
        self.userId = userId
        self.purchasedAt = purchasedAt
        self.refundedAt = refundedAt
        self.refundedTokens = refundedTokens
        self.recordedAt = recordedAt
    }
}

/// Where a page of purchases (newest first: by purchase date, then the id a row is kept under) continues: after this one.
public struct PurchaseCursor: Sendable, Hashable {
    /// The purchase date of the last purchase listed.
    public var purchasedAt: Date
    /// The id its row is kept under: a consumable's transaction id, a subscription's original transaction id.
    public var transactionId: String

    /// The cursor after `record`.
    public init(after record: PurchaseRecord) {
        purchasedAt = record.purchasedAt
        transactionId = record.kind == .subscription ? record.originalTransactionId : record.transactionId
    }

    /// The cursor a ``token`` stands for; `nil` for anything else (an instant beyond ``Date/writableMillis`` included).
    public init?(token: String) {
        guard let (purchasedAt, transactionId) = InstantCursor.parts(of: token) else { return nil }
        (self.purchasedAt, self.transactionId) = (purchasedAt, transactionId)
    }

    /// An opaque text form for an API's `cursor` parameter: `<purchase millis>.<transaction id>`.
    public var token: String { "\(purchasedAt.millis).\(transactionId)" }
}

/// What submitting a transaction did.
public struct Redemption: Sendable, Hashable {
    /// The purchase as it now stands.
    public var purchase: PurchaseRecord
    /// The submitter's account after the call (its premium: ``UserRecord/combinedPremiumUntil``).
    public var user: UserRecord
    /// The submitter's wallet after the call (as stored: a hold that expired and is not yet released still counts as held).
    public var wallet: WalletState
    /// Every account whose wallet or premium the call changed (none for a repeated submission), so their owners can be told.
    public var changedUsers: [String]

    /// Creates a redemption.
    public init(purchase: PurchaseRecord, user: UserRecord, wallet: WalletState, changedUsers: [String]) {
        self.purchase = purchase
        self.user = user
        self.wallet = wallet
        self.changedUsers = changedUsers
    }
}

/// What a notification did.
public struct NotificationOutcome: Sendable, Hashable {
    /// How it was taken.
    public enum Disposition: String, Sendable, Hashable {
        /// Its effect is in the books (which may be none: a purchase already credited, a refund standing already).
        case applied
        /// Its `notificationUUID` was seen before: nothing changed.
        case duplicate
        /// Older (`signedDate`) than a notification already applied to its original transaction: recorded as seen, nothing changed.
        case stale
        /// It carries no transaction Tally sells (a test): recorded as seen.
        case ignored
    }

    /// How it was taken.
    public var disposition: Disposition
    /// Its transaction as it now stands, when it carries one Tally sells (also for a stale one).
    public var purchase: PurchaseRecord?
    /// Every account whose wallet or premium it changed.
    public var changedUsers: [String]

    /// Creates an outcome.
    public init(disposition: Disposition, purchase: PurchaseRecord? = nil, changedUsers: [String] = []) {
        self.disposition = disposition
        self.purchase = purchase
        self.changedUsers = changedUsers
    }
}
