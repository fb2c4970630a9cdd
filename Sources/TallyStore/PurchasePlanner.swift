import Foundation

/// A transaction as the `purchases` table stores it (consumables and each transaction of a subscription).
public struct StoredPurchase: Sendable, Hashable {
    /// The transaction's id.
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
    /// A consumable's owner once credited; a subscription transaction's account (its submitter, else the holder).
    public var userId: String?
    /// A consumable was credited (stays so after its owner's deletion: credited once, forever).
    public var claimed: Bool
    /// When it was bought.
    public var purchasedAt: Date
    /// A subscription transaction's end.
    public var expiresAt: Date?
    /// When it was refunded or revoked, while that stands (a reversal clears it).
    public var revokedAt: Date?
    /// A consumable's tokens taken back by its one refund (0 when it had credited no one); `nil` before any refund.
    public var refundedTokens: Int64?
    /// When a consumable's refund was reversed.
    public var reversedAt: Date?
    /// The `signedDate` of the newest fact applied to it: for a consumable, of the newest notification (an older one
    /// changes nothing).
    public var signedAt: Date?
    /// When Tally first recorded it.
    public var recordedAt: Date

    /// Creates a row.
    public init(
        transactionId: String, originalTransactionId: String, productId: String, kind: PurchaseKind, quantity: Int, tokens: Int64?,
        environment: String, userId: String?, claimed: Bool, purchasedAt: Date, expiresAt: Date?, revokedAt: Date?,
        refundedTokens: Int64?, reversedAt: Date?, signedAt: Date?, recordedAt: Date
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
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.refundedTokens = refundedTokens
        self.reversedAt = reversedAt
        self.signedAt = signedAt
        self.recordedAt = recordedAt
    }

    /// The row of a transaction seen for the first time, owned by no one yet. A consumable's tokens must be between 1
    /// and ``Limits/maxAmount`` (else `.invalidInput`).
    init(new transaction: VerifiedTransaction, now: Date) throws(StoreError) {
        var tokens: Int64?
        if case .tokens(let unit) = transaction.product {
            let (total, overflow) = unit.multipliedReportingOverflow(by: Int64(transaction.quantity))
            guard unit > 0, transaction.quantity > 0, !overflow, total <= Limits.maxAmount else { throw StoreError(.invalidInput) }
            tokens = total
        }
        self.init(
            transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
            productId: transaction.productId, kind: transaction.product.kind, quantity: max(transaction.quantity, 1), tokens: tokens,
            environment: transaction.environment, userId: nil, claimed: false, purchasedAt: transaction.purchaseDate,
            expiresAt: transaction.product.kind == .subscription ? transaction.expiry : nil, revokedAt: nil, refundedTokens: nil,
            reversedAt: nil, signedAt: nil, recordedAt: Date(millis: now.millis))
    }

    /// The purchase as listed at `now`.
    public func record(at now: Date) -> PurchaseRecord {
        let status: PurchaseStatus
        var premiumUntil: Date?
        switch kind {
        case .consumable:
            status = revokedAt != nil ? .refunded : claimed ? .credited : .unclaimed
        case .subscription:
            premiumUntil = expiresAt.map { expiry in revokedAt.map { min($0, expiry) } ?? expiry }
            status = revokedAt != nil ? .refunded : (premiumUntil ?? purchasedAt) > now ? .active : .expired
        }
        return PurchaseRecord(
            transactionId: transactionId, originalTransactionId: originalTransactionId, productId: productId, kind: kind,
            quantity: quantity, tokens: tokens, premiumUntil: premiumUntil, environment: environment, status: status, userId: userId,
            purchasedAt: purchasedAt, refundedAt: revokedAt, refundedTokens: refundedTokens, recordedAt: recordedAt)
    }
}

/// A subscription (an original transaction) as the `subscriptions` table stores it: the account that holds it and the
/// state its newest fact gave it.
public struct StoredSubscription: Sendable, Hashable {
    /// Its first transaction's id.
    public var originalTransactionId: String
    /// The App Store product id.
    public var productId: String
    /// The environment it was signed in.
    public var environment: String
    /// The account its premium goes to: the last to submit one of its transactions, else the account its
    /// `appAccountToken` named; `nil` while no one holds it.
    public var userId: String?
    /// The end of its latest period.
    public var expiresAt: Date
    /// The end of the grace period of a failed renewal, while one runs.
    public var graceUntil: Date?
    /// When it was refunded or revoked, while that stands.
    public var revokedAt: Date?
    /// The `signedDate` of the newest fact applied to it: an older notification changes nothing.
    public var signedAt: Date

    /// Creates a row.
    public init(
        originalTransactionId: String, productId: String, environment: String, userId: String?, expiresAt: Date, graceUntil: Date?,
        revokedAt: Date?, signedAt: Date
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.environment = environment
        self.userId = userId
        self.expiresAt = expiresAt
        self.graceUntil = graceUntil
        self.revokedAt = revokedAt
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

    /// Creates an account.
    public init(user: UserRecord, wallet: WalletState, otherPremiumUntil: Date?) {
        self.user = user
        self.wallet = wallet
        self.otherPremiumUntil = otherPremiumUntil
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

/// What a store reads, under the purchase's lock, before applying a fact: the transaction's row, its subscription's
/// row, and the accounts ``PurchasePlanner/accountsToRead(_:purchase:subscription:merged:)`` names that exist.
public struct PurchaseSnapshot: Sendable, Hashable {
    /// The transaction's row, if it was seen before.
    public var purchase: StoredPurchase?
    /// Its original transaction's subscription row, if any.
    public var subscription: StoredSubscription?
    /// The accounts read, by id; an account missing here does not exist (a merged guest is never here).
    public var accounts: [String: PurchaseAccount]
    /// The guests among the ids the fact names that were merged, each with the account it went into (read with
    /// ``accounts``): a purchase naming one is the account's.
    public var merged: [String: String]

    /// Creates a snapshot.
    public init(
        purchase: StoredPurchase?, subscription: StoredSubscription?, accounts: [String: PurchaseAccount], merged: [String: String] = [:]
    ) {
        self.purchase = purchase
        self.subscription = subscription
        self.accounts = accounts
        self.merged = merged
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
    /// The transaction's row to write (insert or replace); `nil`: unchanged.
    public var purchase: StoredPurchase?
    /// The subscription's row to write (insert or replace); `nil`: unchanged.
    public var subscription: StoredSubscription?
    /// The account that now holds a subscription no one held: its transactions recorded without an account become its.
    public var subscriptionClaimedBy: String?
    /// Ledger entries, in order.
    public var entries: [PurchaseEntry] = []
    /// The accounts whose bought premium end changes, and to what.
    public var premium: [String: Date?] = [:]
    /// A refusal to answer once the writes are committed (`.purchaseClaimed`).
    public var refusal: StoreError.Code?

    /// An empty plan.
    public init(disposition: NotificationOutcome.Disposition = .applied) {
        self.disposition = disposition
    }

    /// Whether the plan writes nothing (a repeated submission, a refusal, a stale or duplicate notification).
    public var writesNothing: Bool {
        purchase == nil && subscription == nil && subscriptionClaimedBy == nil && entries.isEmpty && premium.isEmpty
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
/// - A subscription's premium goes to the account that submitted one of its transactions last (a restore moves it;
///   both accounts' ledgers get a `premium` entry), else to the account its notifications' `appAccountToken` names.
/// - A notification older (`signedDate`) than one applied to its original transaction changes nothing. A
///   subscription's notification sets its whole state, so the newest decides it whatever the order of delivery: its
///   transaction's `expiresDate`, kept to the grace period's end its renewal information names (`DID_FAIL_TO_RENEW`,
///   and any other while the grace period runs), ended at `signedDate` at the latest by `EXPIRED` and
///   `GRACE_PERIOD_EXPIRED`, at `revocationDate` by `REFUND` and `REVOKE`; `SUBSCRIBED`, `DID_RENEW` and
///   `REFUND_REVERSED` end any grace period and revocation. A submitted transaction signed after the newest fact, of the
///   same or a later period, updates its period's end and revocation too (a grace period stays).
/// - A refund takes back what the consumable credited, spent or not (the balance may go below zero), prorated by
///   `revocationPercentage` rounded down: the user keeps the fraction of a token. At most one refund per
///   transaction, and one reversal, which credits back what the refund took.
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
        switch fact {
        case .redemption(_, let userId):
            guard snapshot.accounts[userId] != nil else { throw StoreError(.userNotFound) }
            if planning.purchase.kind == .consumable { planning.redeemConsumable(by: userId) } else { planning.redeemSubscription(by: userId) }
        case .notification(let notification):
            let notification = notification.inWholeMilliseconds
            let lastSigned = planning.purchase.kind == .consumable ? snapshot.purchase?.signedAt : snapshot.subscription?.signedAt
            if let lastSigned, notification.signedDate < lastSigned { return PurchasePlan(disposition: .stale) }
            if planning.purchase.kind == .consumable { planning.notifyConsumable(notification) } else { planning.notifySubscription(notification) }
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

    // MARK: Consumables

    mutating func redeemConsumable(by userId: String) {
        if purchase.claimed {
            if purchase.userId != userId { plan.refusal = .purchaseClaimed }
            return
        }
        if purchase.revokedAt == nil, let revoked = transaction.revocationDate, purchase.refundedTokens == nil {
            (purchase.revokedAt, purchase.refundedTokens) = (revoked, 0)
        }
        let owner = purchase.userId ?? namedAccount ?? userId
        if owner != userId { plan.refusal = .purchaseClaimed }
        // Refunded before anyone was credited: nothing to credit, but the owner is recorded: a reversal credits it.
        if purchase.revokedAt != nil {
            purchase.userId = owner
            return
        }
        credit(owner)
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

    private mutating func credit(_ owner: String) {
        guard let tokens = purchase.tokens else { return }
        (purchase.claimed, purchase.userId) = (true, owner)
        let units = purchase.quantity > 1 ? " x\(purchase.quantity)" : ""
        append(owner, .purchase, tokens, "\(purchase.transactionId) \(purchase.productId)\(units)")
    }

    /// The one refund of a consumable: what it credited taken back, if its owner still exists.
    private mutating func refundConsumable(at date: Date) {
        guard purchase.refundedTokens == nil else { return }
        purchase.revokedAt = date
        guard purchase.claimed, let owner = purchase.userId, snapshot.accounts[owner] != nil, let tokens = purchase.tokens else {
            purchase.refundedTokens = 0
            // Before any credit: the account it names is its owner, should the refund be reversed.
            if !purchase.claimed, purchase.userId == nil { purchase.userId = namedAccount }
            return
        }
        let taken = PurchasePlanner.refundedTokens(of: tokens, percentage: transaction.revocationPercentage)
        purchase.refundedTokens = taken
        append(owner, .refund, -taken, "\(purchase.transactionId) \(purchase.productId) \(taken) of \(tokens)")
    }

    /// The one reversal of a consumable's refund: what the refund took credited again (a refund made before anyone was
    /// credited took nothing, and leaves the transaction to be credited).
    private mutating func reverseConsumableRefund(at date: Date) {
        guard purchase.revokedAt != nil, purchase.reversedAt == nil else { return }
        (purchase.revokedAt, purchase.reversedAt) = (nil, date)
        guard purchase.claimed, let owner = purchase.userId, snapshot.accounts[owner] != nil else { return }
        append(owner, .refundReversed, purchase.refundedTokens ?? 0, "\(purchase.transactionId) \(purchase.productId)")
    }

    // MARK: Subscriptions

    mutating func redeemSubscription(by userId: String) {
        let expiry = transaction.expiry
        var current = subscription ?? newSubscription(signedAt: transaction.signedDate)
        // A transaction signed after the newest fact, of the same or a later period, says where the subscription stands.
        if subscription != nil, transaction.signedDate > current.signedAt, expiry >= current.expiresAt {
            (current.expiresAt, current.revokedAt, current.signedAt) = (expiry, transaction.revocationDate, transaction.signedDate)
        }
        subscription = current
        updateTransactionRow(revokedAt: transaction.revocationDate, signedAt: transaction.signedDate)
        purchase.userId = userId
        hold(by: userId)
    }

    mutating func notifySubscription(_ notification: VerifiedNotification) {
        let expiry = transaction.expiry
        var current = subscription ?? newSubscription(signedAt: notification.signedDate)
        // Each type sets the whole state from the notification alone, so the newest one applied decides it, whatever
        // order they came in.
        var (end, grace, revokedAt) = (expiry, notification.renewal?.gracePeriodExpiresDate, transaction.revocationDate)
        switch notification.type {
        case .subscribed, .didRenew: grace = nil
        case .expired, .gracePeriodExpired: (end, grace) = (min(expiry, notification.signedDate), nil)
        case .refund, .revoke: (grace, revokedAt) = (nil, transaction.revocationDate ?? notification.signedDate)
        case .refundReversed: (grace, revokedAt) = (nil, nil)
        case .didFailToRenew, .didChangeRenewalStatus, .oneTimeCharge, .test, .other: break
        }
        (current.expiresAt, current.graceUntil, current.revokedAt, current.signedAt) = (end, grace, revokedAt, notification.signedDate)
        subscription = current
        updateTransactionRow(revokedAt: revokedAt, signedAt: notification.signedDate)
        if current.userId == nil, let owner = namedAccount { hold(by: owner) }
        if snapshot.purchase == nil { purchase.userId = subscription?.userId }
    }

    private func newSubscription(signedAt: Date) -> StoredSubscription {
        StoredSubscription(
            originalTransactionId: transaction.originalTransactionId, productId: transaction.productId,
            environment: transaction.environment, userId: nil, expiresAt: transaction.expiry, graceUntil: nil,
            revokedAt: transaction.revocationDate, signedAt: signedAt)
    }

    /// The subscription transaction's own row takes the facts signed after the newest it has.
    private mutating func updateTransactionRow(revokedAt: Date?, signedAt: Date) {
        if let last = purchase.signedAt, signedAt < last { return }
        (purchase.expiresAt, purchase.revokedAt, purchase.signedAt) = (transaction.expiry, revokedAt, signedAt)
    }

    private mutating func hold(by userId: String) {
        guard var current = subscription else { return }
        if current.userId == nil { plan.subscriptionClaimedBy = userId }
        current.userId = userId
        subscription = current
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

    private mutating func append(_ userId: String, _ kind: EntryKind, _ amount: Int64, _ reason: String) {
        let reference = kind == .premium ? transaction.originalTransactionId : purchase.transactionId
        plan.entries.append(
            PurchaseEntry(userId: userId, entry: PlannedEntry(kind: kind, amount: amount, heldChange: 0, reason: reason, reference: reference)))
    }

    mutating func finish() -> PurchasePlan {
        if purchase.kind == .subscription { settlePremium() }
        if purchase != snapshot.purchase { plan.purchase = purchase }
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
    /// purchase, and the submitter's account as the plan leaves it. Throws the plan's refusal.
    public func redemption(by userId: String, snapshot: PurchaseSnapshot, now: Date) throws(StoreError) -> Redemption {
        if let refusal { throw StoreError(refusal) }
        guard let account = snapshot.accounts[userId].map(applied(to:)), let purchase = purchase ?? snapshot.purchase else {
            throw StoreError(.userNotFound)
        }
        return Redemption(purchase: purchase.record(at: now), user: account.user.stored, wallet: account.wallet, changedUsers: changedUsers)
    }

    /// What a notification's plan did, once written.
    public func outcome(snapshot: PurchaseSnapshot, now: Date) -> NotificationOutcome {
        NotificationOutcome(
            disposition: disposition, purchase: (purchase ?? snapshot.purchase)?.record(at: now), changedUsers: changedUsers)
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
