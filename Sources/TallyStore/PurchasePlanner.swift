import Foundation

/// A row of the `purchases` table: a consumable's transaction, or a subscription in the list of one account that held it
/// (one row per original transaction and account, keyed by the original transaction; its state is its
/// ``StoredSubscription``'s).
public struct StoredPurchase: Sendable, Hashable {
    /// The consumable's transaction id; a subscription's original transaction id.
    public var transactionId: String
    /// Its original transaction's id.
    public var originalTransactionId: String
    /// The App Store product id.
    public var productId: String
    /// What it was recorded as (the stored kind and tokens stand, whatever the configuration says later).
    public var kind: PurchaseKind
    /// Units bought.
    public var quantity: Int
    /// A consumable's tokens (per unit × quantity).
    public var tokens: Int64?
    /// The environment it was signed in.
    public var environment: String
    /// A consumable's owner once credited; a subscription's account that held it (`nil`: no account has yet).
    public var userId: String?
    /// A consumable was credited (stays so after its owner's deletion: credited once, forever).
    public var claimed: Bool
    /// When it was bought (a subscription: its first period).
    public var purchasedAt: Date
    /// When a consumable was refunded, while that stands (its reversal clears it).
    public var revokedAt: Date?
    /// A consumable's tokens taken back by its latest refund (0 when it had credited no one); `nil` before any refund.
    public var refundedTokens: Int64?
    /// How many refunds a consumable had: each after the reversal of the one before, each its own ledger entry.
    public var refunds: Int
    /// When a consumable's latest refund was reversed.
    public var reversedAt: Date?
    /// The `signedDate` of the newest notification applied to a consumable (an older one changes nothing).
    public var signedAt: Date?
    /// When Tally first recorded it.
    public var recordedAt: Date

    /// Creates a row.
    public init(
        transactionId: String, originalTransactionId: String, productId: String, kind: PurchaseKind, quantity: Int, tokens: Int64?,
        environment: String, userId: String?, claimed: Bool, purchasedAt: Date, revokedAt: Date?, refundedTokens: Int64?,
        refunds: Int = 0, reversedAt: Date?, signedAt: Date?, recordedAt: Date
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.kind = kind
        self.quantity = quantity
        self.tokens = tokens
        self.environment = environment
        self.userId = userId
        self.claimed = claimed
        self.purchasedAt = purchasedAt
        self.revokedAt = revokedAt
        self.refundedTokens = refundedTokens
        self.refunds = refunds
        self.reversedAt = reversedAt
        self.signedAt = signedAt
        self.recordedAt = recordedAt
    }

    /// The row of a transaction seen for the first time (a subscription's: keyed by its original transaction, from its
    /// first period), owned by no one yet. A consumable's tokens must be between 1 and ``Limits/maxAmount`` (else
    /// `.invalidInput`).
    init(new transaction: VerifiedTransaction, now: Date) throws(StoreError) {
        var tokens: Int64?
        if case .tokens(let unit) = transaction.product {
            let (total, overflow) = unit.multipliedReportingOverflow(by: Int64(transaction.quantity))
            guard unit > 0, transaction.quantity > 0, !overflow, total <= Limits.maxAmount else { throw StoreError(.invalidInput) }
            tokens = total
        }
        let subscription = transaction.product.kind == .subscription
        self.init(
            transactionId: subscription ? transaction.originalTransactionId : transaction.transactionId,
            originalTransactionId: transaction.originalTransactionId, productId: transaction.productId, kind: transaction.product.kind,
            quantity: subscription ? 1 : max(transaction.quantity, 1), tokens: tokens, environment: transaction.environment,
            userId: nil, claimed: false,
            purchasedAt: subscription ? transaction.originalPurchaseDate ?? transaction.purchaseDate : transaction.purchaseDate,
            revokedAt: nil, refundedTokens: nil, reversedAt: nil, signedAt: nil, recordedAt: Date(millis: now.millis))
    }

    /// The purchase as listed at `now`; a subscription's row with its `subscription` (a consumable's without).
    public func record(at now: Date, subscription: StoredSubscription? = nil) -> PurchaseRecord {
        var (status, shown, premiumUntil, refundedAt) = (PurchaseStatus.expired, transactionId, Date?.none, revokedAt)
        switch (kind, subscription) {
        case (.consumable, _):
            status = revokedAt != nil ? .refunded : claimed ? .credited : .unclaimed
        case (.subscription, let subscription?):
            shown = subscription.transactionId
            if let userId, subscription.userId != userId {
                status = .movedAway
            } else {
                (premiumUntil, refundedAt) = (subscription.premiumUntil, subscription.revokedAt)
                switch subscription.revocation {
                case .refund?: status = .refunded
                case .revoke?: status = .revoked
                case nil: status = subscription.premiumUntil > now ? .active : .expired
                }
            }
        case (.subscription, nil):
            break
        }
        return PurchaseRecord(
            transactionId: shown, originalTransactionId: originalTransactionId, productId: productId, kind: kind,
            quantity: quantity, tokens: tokens, premiumUntil: premiumUntil, environment: environment, status: status, userId: userId,
            purchasedAt: purchasedAt, refundedAt: refundedAt, refundedTokens: refundedTokens, recordedAt: recordedAt)
    }
}

/// Why a subscription's premium ended early.
public enum SubscriptionRevocation: String, Sendable, Hashable {
    /// Apple refunded it (`REFUND`, or a transaction signed with its `revocationDate`).
    case refund
    /// Apple revoked it (`REVOKE`: Family Sharing ended).
    case revoke
}

/// A subscription (an original transaction) as the `subscriptions` table stores it: the account that holds it and the
/// state its newest fact gave it.
public struct StoredSubscription: Sendable, Hashable {
    /// Its first transaction's id.
    public var originalTransactionId: String
    /// The transaction of the newest fact applied to it (its latest renewal, as a rule).
    public var transactionId: String
    /// The App Store product id.
    public var productId: String
    /// The environment it was signed in.
    public var environment: String
    /// The account its premium goes to (``PurchasePlanner`` says who); `nil` while no one holds it.
    public var userId: String?
    /// The end of its latest period.
    public var expiresAt: Date
    /// The end of the grace period of a failed renewal, while one runs.
    public var graceUntil: Date?
    /// When it was refunded or revoked, while that stands.
    public var revokedAt: Date?
    /// Why it was, while ``revokedAt`` stands.
    public var revocation: SubscriptionRevocation?
    /// The `signedDate` of the newest fact applied to it: an older notification changes nothing.
    public var signedAt: Date

    /// Creates a row.
    public init(
        originalTransactionId: String, transactionId: String? = nil, productId: String, environment: String, userId: String?,
        expiresAt: Date, graceUntil: Date?, revokedAt: Date?, revocation: SubscriptionRevocation? = nil, signedAt: Date
    ) {
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId ?? originalTransactionId
        self.productId = productId
        self.environment = environment
        self.userId = userId
        self.expiresAt = expiresAt
        self.graceUntil = graceUntil
        self.revokedAt = revokedAt
        self.revocation = revokedAt == nil ? nil : revocation ?? .refund
        self.signedAt = signedAt
    }

    /// When the premium it gives ends: its period's end, or its grace period's if later, but never after its refund or revocation.
    public var premiumUntil: Date {
        let end = max(expiresAt, graceUntil ?? expiresAt)
        return revokedAt.map { min($0, end) } ?? end
    }
}

/// An account a purchase may move, as read under its wallet's lock.
public struct PurchaseAccount: Sendable, Hashable {
    /// The account (its bought premium: ``UserRecord/purchasedPremiumUntil``).
    public var user: UserRecord
    /// Its wallet.
    public var wallet: WalletState
    /// The latest premium end of the subscriptions it holds other than the one the fact is about.
    public var otherPremiumUntil: Date?
    /// The tokens Sandbox consumables credited it, in all (read for a Sandbox consumable's fact; 0 otherwise).
    public var sandboxTokens: Int64

    /// Creates an account.
    public init(user: UserRecord, wallet: WalletState, otherPremiumUntil: Date?, sandboxTokens: Int64 = 0) {
        self.user = user
        self.wallet = wallet
        self.otherPremiumUntil = otherPremiumUntil
        self.sandboxTokens = sandboxTokens
    }
}

/// A verified fact about a purchase.
public enum PurchaseFact: Sendable, Hashable {
    /// A user submitted a transaction (from StoreKit on their device).
    case redemption(VerifiedTransaction, userId: String)
    /// The App Store sent a notification.
    case notification(VerifiedNotification)

    /// The transaction it is about (none for a notification that carries none).
    public var transaction: VerifiedTransaction? {
        switch self {
        case .redemption(let transaction, _): return transaction
        case .notification(let notification): return notification.transaction
        }
    }
}

/// What a store reads, under the purchase's lock, before applying a fact: a consumable's row, or a subscription's row
/// and its rows in accounts' lists; and the accounts ``PurchasePlanner/accountsToRead(_:purchase:subscription:merged:)``
/// names that exist.
public struct PurchaseSnapshot: Sendable, Hashable {
    /// A consumable's row, if it was seen before (`nil` for a subscription's fact).
    public var purchase: StoredPurchase?
    /// Its original transaction's subscription row, if any.
    public var subscription: StoredSubscription?
    /// A subscription's rows in the `purchases` table: one per account that listed it, and those of no account.
    public var listings: [StoredPurchase]
    /// The accounts read, by id; an account missing here does not exist (a merged guest is never here).
    public var accounts: [String: PurchaseAccount]
    /// The guests among the ids the fact names that were merged, each with the account it went into (read with
    /// ``accounts``): a purchase naming one is the account's.
    public var merged: [String: String]

    /// Creates a snapshot.
    public init(
        purchase: StoredPurchase?, subscription: StoredSubscription?, listings: [StoredPurchase] = [],
        accounts: [String: PurchaseAccount], merged: [String: String] = [:]
    ) {
        self.purchase = purchase
        self.subscription = subscription
        self.listings = listings
        self.accounts = accounts
        self.merged = merged
    }

    /// The row `userId` lists the subscription in (`nil`: the one of no account), among ``listings`` and `added`.
    func listing(of userId: String?, added: StoredPurchase? = nil) -> StoredPurchase? {
        ([added].compactMap { $0 } + listings).first { $0.userId == userId }
    }
}

/// One ledger entry of a purchase plan and the account it goes to.
public struct PurchaseEntry: Sendable, Hashable {
    /// The account.
    public var userId: String
    /// The entry.
    public var entry: PlannedEntry
}

/// The writes a fact needs, decided by ``PurchasePlanner``. A store applies them in the transaction it read the
/// snapshot in, every entry through its ledger's one place, and nothing else.
public struct PurchasePlan: Sendable, Hashable {
    /// How a notification is taken (a redemption's plan says `.applied`).
    public var disposition: NotificationOutcome.Disposition = .applied
    /// The row to write: a consumable's (insert or replace), or a subscription's row in an account's list (inserted,
    /// unless that account has one); `nil`: none.
    public var purchase: StoredPurchase?
    /// The subscription's row to write (insert or replace); `nil`: unchanged.
    public var subscription: StoredSubscription?
    /// The subscription (its original transaction id) whose rows in no account's list are deleted: an account holds it
    /// now, and lists it (``purchase`` adds its row unless it had one).
    public var dropsUnownedListings: String?
    /// Ledger entries, in order.
    public var entries: [PurchaseEntry] = []
    /// The accounts whose bought premium end changes, and to what.
    public var premium: [String: Date?] = [:]
    /// A refusal to answer once the writes are committed (`.purchaseClaimed`, `.signInRequired`, `.sandboxLimit`).
    public var refusal: StoreError.Code?

    /// An empty plan.
    public init(disposition: NotificationOutcome.Disposition = .applied) {
        self.disposition = disposition
    }

    /// Whether the plan writes nothing (a repeated submission, a refusal, a stale or duplicate notification).
    public var writesNothing: Bool {
        purchase == nil && subscription == nil && dropsUnownedListings == nil && entries.isEmpty && premium.isEmpty
    }

    /// The accounts whose wallets the plan moves (every premium change comes with an entry), in id order: the order
    /// in which a store locks them.
    public var changedUsers: [String] { Set(entries.map(\.userId)).sorted() }

    /// The entries of one account, in order.
    public func entries(of userId: String) -> [PlannedEntry] { entries.filter { $0.userId == userId }.map(\.entry) }

    /// `account` as the plan leaves it: wallet moved by its entries, bought premium changed.
    public func applied(to account: PurchaseAccount) -> PurchaseAccount {
        var account = account
        for entry in entries(of: account.user.id) { account.wallet = account.wallet.applying(entry) }
        if let until = premium[account.user.id] { account.user.purchasedPremiumUntil = until }
        return account
    }
}

/// The rules of purchases, refunds and subscriptions as a pure function from (fact, snapshot) to a plan; both
/// stores call it, so SQLite and PostgreSQL cannot disagree about money.
///
/// - A consumable credits its tokens once, forever: to the account its `appAccountToken` names if that account
///   exists, else to the first account to submit it. The same account submitting it again changes nothing; another
///   account is refused (`.purchaseClaimed`, after the named account was credited if no one had been). One refunded
///   before anyone was credited credits no one, but keeps the account it would have gone to as its owner: a
///   reversal of the refund credits that account (its app finished the transaction and will not submit it again).
/// - A Sandbox consumable whose transaction carries a ``VerifiedTransaction/sandboxLimit`` credits an account only while
///   its Sandbox credits stay within it: beyond, it stays unclaimed (its submitter refused with `.sandboxLimit`, a
///   notification credits nothing). Every entry of a Sandbox purchase says so: its reason starts with `Sandbox `.
/// - A subscription stays with the account its `appAccountToken` names, if that account exists: another account's
///   submission moves nothing and is refused — `.signInRequired` for a guest when the named account can be signed in
///   to, else `.purchaseClaimed` (after the named account took it, if no one held it). Without such an account, its
///   premium goes to the account that submitted one of its transactions last (a restore moves it; both ledgers get a
///   `premium` entry, and the account it left keeps its row, `moved_away`). Each account that held it lists it once,
///   whatever its renewals; a row of no account waits, unclaimed, for the first to hold it.
/// - A notification older (`signedDate`) than one applied to its original transaction changes nothing. A
///   subscription's notification sets its whole state, so the newest decides it whatever the order of delivery: its
///   transaction's `expiresDate`, kept to the grace period's end its renewal information names (`DID_FAIL_TO_RENEW`,
///   and any other while the grace period runs), ended at `signedDate` at the latest by `EXPIRED` and
///   `GRACE_PERIOD_EXPIRED`, at `revocationDate` by `REFUND` (refunded) and `REVOKE` (revoked); `SUBSCRIBED`,
///   `DID_RENEW` and `REFUND_REVERSED` end any grace period and revocation. A submitted transaction signed after the
///   newest fact, of the same or a later period, updates its period's end and revocation too (a grace period stays).
/// - A refund takes back what the consumable credited, spent or not (the balance may go below zero), prorated by
///   `revocationPercentage` rounded down: the user keeps the fraction of a token. A refund stands until its own
///   reversal, which credits back what it took; a refund after the reversal takes back again. The same refund told
///   again changes nothing; a later one (a later `revocationDate`) arriving while one stands means Apple reversed that
///   one meanwhile: it is reversed first, so the newest refund says what is taken, in whatever order they arrive. The
///   n-th refund and its reversal name the transaction as `<id>` (n = 1) or `<id>#n` in their entries' `reference`,
///   which the schema holds to one entry of each kind.
public enum PurchasePlanner {
    /// The accounts a store reads (and locks) for `fact`: the submitter, the account the `appAccountToken` names,
    /// the consumable's owner and the subscription's holder — sorted, as they are locked. Each of them that is a merged
    /// guest (`merged`: guest → account, as the store found them) stands for the account it went into: a store reads
    /// the ids first, learns which are merged guests, and reads (and locks) the accounts this names then.
    public static func accountsToRead(
        _ fact: PurchaseFact, purchase: StoredPurchase?, subscription: StoredSubscription?, merged: [String: String] = [:]
    ) -> [String] {
        var ids: Set<String> = []
        if case .redemption(_, let userId) = fact { ids.insert(userId) }
        if let token = fact.transaction?.appAccountToken { ids.insert(token) }
        if let owner = purchase?.userId { ids.insert(owner) }
        if let holder = subscription?.userId { ids.insert(holder) }
        return Set(ids.map { merged[$0] ?? $0 }).sorted()
    }

    /// Plans `fact` against `snapshot`; throws `.userNotFound` for a submitter that does not exist, `.invalidInput` for
    /// a consumable whose tokens are out of range.
    public static func plan(_ fact: PurchaseFact, snapshot: PurchaseSnapshot, now: Date) throws(StoreError) -> PurchasePlan {
        guard let transaction = fact.transaction?.inWholeMilliseconds else { return PurchasePlan(disposition: .ignored) }
        var planning = try Planning(transaction, snapshot: snapshot, now: now)
        let consumable = transaction.product.kind == .consumable
        switch fact {
        case .redemption(_, let userId):
            guard snapshot.accounts[userId] != nil else { throw StoreError(.userNotFound) }
            if consumable { planning.redeemConsumable(by: userId) } else { planning.redeemSubscription(by: userId) }
        case .notification(let notification):
            let notification = notification.inWholeMilliseconds
            let lastSigned = consumable ? snapshot.purchase?.signedAt : snapshot.subscription?.signedAt
            if let lastSigned, notification.signedDate < lastSigned { return PurchasePlan(disposition: .stale) }
            if consumable { planning.notifyConsumable(notification) } else { planning.notifySubscription(notification) }
        }
        return planning.finish()
    }

    /// What a refund takes back of `tokens` credited: `tokens × percentage / 100000`, rounded down (in the user's
    /// favour); all of them when the percentage is `nil`.
    public static func refundedTokens(of tokens: Int64, percentage: Int?) -> Int64 {
        let part = Int64(min(max(percentage ?? 100_000, 0), 100_000))
        // tokens = q × 100000 + r, so tokens × part / 100000 = q × part + ⌊r × part / 100000⌋, exactly and without overflow.
        return tokens / 100_000 * part + tokens % 100_000 * part / 100_000
    }
}

/// One plan being made: the rows as the fact leaves them, and the plan's entries.
private struct Planning {
    let transaction: VerifiedTransaction
    let snapshot: PurchaseSnapshot
    /// A consumable's row; a subscription's row for an account's list, as a new one would be.
    var purchase: StoredPurchase
    var subscription: StoredSubscription?
    var plan = PurchasePlan()

    init(_ transaction: VerifiedTransaction, snapshot: PurchaseSnapshot, now: Date) throws(StoreError) {
        self.transaction = transaction
        self.snapshot = snapshot
        if let stored = snapshot.purchase { purchase = stored } else { purchase = try StoredPurchase(new: transaction, now: now) }
        subscription = snapshot.subscription
    }

    /// The account the transaction's `appAccountToken` names (the account a merged guest went into), if it exists.
    var namedAccount: String? {
        transaction.appAccountToken.map { snapshot.merged[$0] ?? $0 }.flatMap { snapshot.accounts[$0] == nil ? nil : $0 }
    }

    /// Whether its entries are Sandbox's (the environment it was first recorded in).
    var sandbox: Bool { (subscription?.environment ?? purchase.environment) == VerifiedTransaction.sandbox }

    // MARK: Consumables

    mutating func redeemConsumable(by userId: String) {
        if purchase.claimed {
            if purchase.userId != userId { plan.refusal = .purchaseClaimed }
            return
        }
        if purchase.revokedAt == nil, let revoked = transaction.revocationDate, purchase.refunds == 0 {
            (purchase.revokedAt, purchase.refundedTokens, purchase.refunds) = (revoked, 0, 1)
        }
        let owner = purchase.userId ?? namedAccount ?? userId
        if owner != userId { plan.refusal = .purchaseClaimed }
        // Refunded before anyone was credited: nothing to credit, but the owner is recorded: a reversal credits it.
        if purchase.revokedAt != nil {
            purchase.userId = owner
            return
        }
        if !credit(owner), owner == userId { plan.refusal = .sandboxLimit }
    }

    mutating func notifyConsumable(_ notification: VerifiedNotification) {
        purchase.signedAt = notification.signedDate
        switch notification.type {
        case .refund: refundConsumable(at: transaction.revocationDate ?? notification.signedDate)
        case .refundReversed:
            // The owner a refund made before any credit recorded, if it still exists.
            let recorded = purchase.claimed ? nil : purchase.userId.flatMap { snapshot.accounts[$0] == nil ? nil : $0 }
            reverseConsumableRefund(at: notification.signedDate)
            if let owner = recorded ?? namedAccount { creditUnclaimed(owner) }
        case .revoke: break
        default: if let owner = namedAccount { creditUnclaimed(owner) }
        }
    }

    private mutating func creditUnclaimed(_ owner: String) {
        guard !purchase.claimed, purchase.revokedAt == nil else { return }
        credit(owner)
    }

    /// Credits the tokens to `owner`; `false` when a Sandbox bound refuses it (nothing changes then).
    @discardableResult
    private mutating func credit(_ owner: String) -> Bool {
        guard let tokens = purchase.tokens else { return true }
        if let limit = transaction.sandboxLimit, purchase.environment == VerifiedTransaction.sandbox,
            (snapshot.accounts[owner]?.sandboxTokens ?? 0) > limit - tokens
        {
            return false
        }
        (purchase.claimed, purchase.userId) = (true, owner)
        let units = purchase.quantity > 1 ? " x\(purchase.quantity)" : ""
        append(owner, .purchase, tokens, "\(purchase.transactionId) \(purchase.productId)\(units)")
        return true
    }

    /// The `reference` of the consumable's latest refund and of its reversal: the transaction, `#n` after it from the second.
    private var refundReference: String {
        purchase.refunds > 1 ? "\(purchase.transactionId)#\(purchase.refunds)" : purchase.transactionId
    }

    /// A refund: what the consumable credited taken back, if its owner still exists. The refund standing (not reversed),
    /// told again, changes nothing; a later one (another revocation date, signed later) means Apple reversed the one
    /// standing meanwhile — its REFUND_REVERSED, signed before, comes stale if at all —: reversed first, so that the
    /// newest refund says what is taken, whatever the order of delivery.
    private mutating func refundConsumable(at date: Date) {
        if let standing = purchase.revokedAt {
            guard date > standing else { return }
            reverseConsumableRefund(at: date)
        }
        (purchase.revokedAt, purchase.reversedAt, purchase.refunds) = (date, nil, purchase.refunds + 1)
        guard purchase.claimed, let owner = purchase.userId, snapshot.accounts[owner] != nil, let tokens = purchase.tokens else {
            purchase.refundedTokens = 0
            // Before any credit: the account it names is its owner, should the refund be reversed.
            if !purchase.claimed, purchase.userId == nil { purchase.userId = namedAccount }
            return
        }
        let taken = PurchasePlanner.refundedTokens(of: tokens, percentage: transaction.revocationPercentage)
        purchase.refundedTokens = taken
        append(owner, .refund, -taken, "\(purchase.transactionId) \(purchase.productId) \(taken) of \(tokens)", reference: refundReference)
    }

    /// The reversal of the refund standing: what it took credited again (a refund made before anyone was credited took
    /// nothing, and leaves the transaction to be credited).
    private mutating func reverseConsumableRefund(at date: Date) {
        guard purchase.revokedAt != nil else { return }
        (purchase.revokedAt, purchase.reversedAt) = (nil, date)
        guard purchase.claimed, let owner = purchase.userId, snapshot.accounts[owner] != nil else { return }
        append(owner, .refundReversed, purchase.refundedTokens ?? 0, "\(purchase.transactionId) \(purchase.productId)", reference: refundReference)
    }

    // MARK: Subscriptions

    mutating func redeemSubscription(by userId: String) {
        let expiry = transaction.expiry
        var current = subscription ?? newSubscription(signedAt: transaction.signedDate)
        // A transaction signed after the newest fact, of the same or a later period, says where the subscription stands.
        if subscription != nil, transaction.signedDate > current.signedAt, expiry >= current.expiresAt {
            (current.expiresAt, current.revokedAt, current.signedAt) = (expiry, transaction.revocationDate, transaction.signedDate)
            current.transactionId = transaction.transactionId
            current.revocation = transaction.revocationDate == nil ? nil : current.revocation ?? .refund
        }
        subscription = current
        // The account its appAccountToken names keeps it: another account's submission moves nothing.
        if let named = namedAccount, named != userId {
            if current.userId == nil { hold(by: named) }
            let guest = snapshot.accounts[userId]?.user.isGuest == true
            plan.refusal = guest && snapshot.accounts[named]?.user.isGuest == false ? .signInRequired : .purchaseClaimed
            return
        }
        hold(by: userId)
    }

    mutating func notifySubscription(_ notification: VerifiedNotification) {
        let expiry = transaction.expiry
        var current = subscription ?? newSubscription(signedAt: notification.signedDate)
        // Each type sets the whole state from the notification alone, so the newest one applied decides it, whatever
        // order they came in.
        var (end, grace, revokedAt) = (expiry, notification.renewal?.gracePeriodExpiresDate, transaction.revocationDate)
        var revocation: SubscriptionRevocation? = .refund
        switch notification.type {
        case .subscribed, .didRenew: grace = nil
        case .expired, .gracePeriodExpired: (end, grace) = (min(expiry, notification.signedDate), nil)
        case .refund: (grace, revokedAt) = (nil, transaction.revocationDate ?? notification.signedDate)
        case .revoke: (grace, revokedAt, revocation) = (nil, transaction.revocationDate ?? notification.signedDate, .revoke)
        case .refundReversed: (grace, revokedAt) = (nil, nil)
        case .didFailToRenew, .didChangeRenewalStatus, .oneTimeCharge, .test, .other: break
        }
        (current.expiresAt, current.graceUntil, current.revokedAt, current.signedAt) = (end, grace, revokedAt, notification.signedDate)
        (current.transactionId, current.revocation) = (transaction.transactionId, revokedAt == nil ? nil : revocation)
        subscription = current
        if current.userId == nil, let owner = namedAccount { hold(by: owner) }
    }

    private func newSubscription(signedAt: Date) -> StoredSubscription {
        StoredSubscription(
            originalTransactionId: transaction.originalTransactionId, transactionId: transaction.transactionId,
            productId: transaction.productId, environment: transaction.environment, userId: nil, expiresAt: transaction.expiry,
            graceUntil: nil, revokedAt: transaction.revocationDate, signedAt: signedAt)
    }

    private mutating func hold(by userId: String) {
        guard var current = subscription else { return }
        current.userId = userId
        subscription = current
    }

    /// The rows of the subscription in accounts' lists: its holder has one (taking the place of those of no account);
    /// while no one holds it, one of no account waits for the first to.
    private mutating func settleListings() {
        guard let current = subscription else { return }
        let unowned = snapshot.listing(of: nil)
        if let holder = current.userId {
            if snapshot.listing(of: holder) == nil {
                var row = unowned ?? purchase
                row.userId = holder
                plan.purchase = row
            }
            if unowned != nil { plan.dropsUnownedListings = current.originalTransactionId }
        } else if snapshot.listings.isEmpty {
            plan.purchase = purchase
        }
    }

    /// Each account that held or holds the subscription gets the bought premium it now has (the latest end of its
    /// subscriptions) and a `premium` entry when that changed or the subscription moved.
    private mutating func settlePremium() {
        guard let current = subscription else { return }
        let before = snapshot.subscription?.userId
        let moved = before != current.userId
        for userId in Set([before, current.userId].compactMap { $0 }).sorted() {
            guard let account = snapshot.accounts[userId] else { continue }
            let holds = current.userId == userId
            let until = latest(account.otherPremiumUntil, holds ? current.premiumUntil : nil)
            guard until != account.user.purchasedPremiumUntil || moved else { continue }
            let what = "\(current.originalTransactionId) \(current.productId)"
            append(userId, .premium, 0, holds ? "\(what) until \(current.premiumUntil.formatted(.iso8601))" : "\(what) moved to another account")
            if until != account.user.purchasedPremiumUntil { plan.premium[userId] = until }
        }
    }

    // MARK: The plan

    /// Appends an entry naming the purchase (`reference`: the consumable's transaction, a premium change's original
    /// transaction, unless given), its reason marked `Sandbox ` for a Sandbox purchase.
    private mutating func append(_ userId: String, _ kind: EntryKind, _ amount: Int64, _ reason: String, reference: String? = nil) {
        let reference = reference ?? (kind == .premium ? transaction.originalTransactionId : purchase.transactionId)
        let reason = sandbox ? "Sandbox " + reason : reason
        plan.entries.append(
            PurchaseEntry(userId: userId, entry: PlannedEntry(kind: kind, amount: amount, heldChange: 0, reason: reason, reference: reference)))
    }

    mutating func finish() -> PurchasePlan {
        if transaction.product.kind == .subscription {
            settleListings()
            settlePremium()
        } else if purchase != snapshot.purchase {
            plan.purchase = purchase
        }
        if subscription != snapshot.subscription { plan.subscription = subscription }
        return plan
    }
}

private func latest(_ first: Date?, _ second: Date?) -> Date? {
    guard let first, let second else { return first ?? second }
    return max(first, second)
}

extension VerifiedTransaction {
    /// A subscription transaction's end (its purchase date when it has none: no premium).
    var expiry: Date { expiresDate ?? purchaseDate }

    /// Every instant in whole milliseconds, as the stores keep them, so that a fact compares equal to what it stored.
    var inWholeMilliseconds: VerifiedTransaction {
        var transaction = self
        transaction.purchaseDate = purchaseDate.wholeMilliseconds
        transaction.originalPurchaseDate = originalPurchaseDate?.wholeMilliseconds
        transaction.expiresDate = expiresDate?.wholeMilliseconds
        transaction.revocationDate = revocationDate?.wholeMilliseconds
        transaction.signedDate = signedDate.wholeMilliseconds
        return transaction
    }
}

extension VerifiedNotification {
    /// Every instant in whole milliseconds (``VerifiedTransaction/inWholeMilliseconds``).
    var inWholeMilliseconds: VerifiedNotification {
        var notification = self
        notification.signedDate = signedDate.wholeMilliseconds
        notification.transaction = transaction?.inWholeMilliseconds
        notification.renewal?.gracePeriodExpiresDate = renewal?.gracePeriodExpiresDate?.wholeMilliseconds
        return notification
    }
}

extension Date {
    fileprivate var wholeMilliseconds: Date { Date(millis: millis) }
}

extension PurchasePlan {
    /// What a submission answers once the plan is written (or, for a plan that writes nothing, as read): the
    /// purchase (a subscription: the submitter's row), and the submitter's account as the plan leaves it. Throws the
    /// plan's refusal.
    public func redemption(by userId: String, snapshot: PurchaseSnapshot, now: Date) throws(StoreError) -> Redemption {
        if let refusal { throw StoreError(refusal) }
        guard let account = snapshot.accounts[userId].map(applied(to:)), let purchase = row(for: userId, snapshot: snapshot, now: now)
        else {
            throw StoreError(.userNotFound)
        }
        return Redemption(purchase: purchase, user: account.user.stored, wallet: account.wallet, changedUsers: changedUsers)
    }

    /// What a notification's plan did, once written (a subscription's row: its holder's, else one of no account).
    public func outcome(snapshot: PurchaseSnapshot, now: Date) -> NotificationOutcome {
        let holder = (subscription ?? snapshot.subscription)?.userId
        return NotificationOutcome(
            disposition: disposition, purchase: row(for: holder, snapshot: snapshot, now: now) ?? row(for: nil, snapshot: snapshot, now: now),
            changedUsers: changedUsers)
    }

    /// The purchase as the plan leaves it: a consumable's row, or the subscription's row in `userId`'s list.
    private func row(for userId: String?, snapshot: PurchaseSnapshot, now: Date) -> PurchaseRecord? {
        guard let subscription = subscription ?? snapshot.subscription else { return (purchase ?? snapshot.purchase)?.record(at: now) }
        return snapshot.listing(of: userId, added: purchase)?.record(at: now, subscription: subscription)
    }
}

extension PurchasePlanner {
    /// The answer to `userId` submitting `transaction` again when its stored row (`purchase`) and the submitter's
    /// account are all the full path would read to answer it: a consumable already credited to `userId`, whose
    /// repeated submission writes nothing (whatever it says of a refund: a credited consumable's refunds come only
    /// from notifications). The answer is the full path's, planned by ``plan(_:snapshot:now:)`` from those two.
    /// `nil` for anything else — not yet credited, another account's (`.purchaseClaimed`), a subscription, a merged
    /// guest submitting — which the store answers on its full path.
    public static func replay(
        _ transaction: VerifiedTransaction, by userId: String, purchase: StoredPurchase, account: PurchaseAccount, now: Date
    ) -> Redemption? {
        guard purchase.transactionId == transaction.transactionId, purchase.kind == .consumable, purchase.claimed,
            purchase.userId == userId, account.user.id == userId, account.user.mergedInto == nil
        else { return nil }
        let snapshot = PurchaseSnapshot(purchase: purchase, subscription: nil, accounts: [userId: account])
        guard let plan = try? plan(.redemption(transaction, userId: userId), snapshot: snapshot, now: now),
            plan.writesNothing, plan.refusal == nil
        else { return nil }
        return try? plan.redemption(by: userId, snapshot: snapshot, now: now)
    }
}
