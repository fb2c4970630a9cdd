import Foundation

/// A user's change counter and what their documents take (their `sync_state` row).
public struct SyncCounters: Sendable, Hashable {
    /// The user's last change sequence number.
    public var version: Int64
    /// The newest tombstone version purged (older cursors must resync).
    public var purgedThrough: Int64
    /// What their documents take of their ``SyncBudget``.
    public var usage: SyncUsage

    /// Creates the counters.
    public init(version: Int64, purgedThrough: Int64, usage: SyncUsage) {
        self.version = version
        self.purgedThrough = purgedThrough
        self.usage = usage
    }
}

/// A document address: a collection and an id.
public struct DocumentLocation: Sendable, Hashable {
    /// The collection.
    public var collection: String
    /// The document id.
    public var id: String

    /// Creates a key.
    public init(collection: String, id: String) {
        self.collection = collection
        self.id = id
    }
}

/// What a store reads, under the merge's locks, before planning it.
public struct MergeSnapshot: Sendable, Hashable {
    /// The guest (its ``UserRecord/mergedInto`` when it was merged).
    public var guest: UserRecord
    /// Its wallet.
    public var guestWallet: WalletState
    /// The account.
    public var account: UserRecord
    /// Its wallet.
    public var accountWallet: WalletState
    /// The merge stored for the guest, if it was merged before.
    public var recorded: GuestMergeSummary?
    /// The guest's open holds (expired ones included).
    public var openHolds: [HoldRecord]
    /// The guest's sign-up grant (its first ledger entry when that is the `signup` grant; 0 otherwise).
    public var signupGrant: Int64
    /// What the guest has spent: minus the sum of its `debit` and `capture` entries.
    public var spent: Int64
    /// The guest's quota counters, by quota.
    public var guestCounters: [String: QuotaCounter]
    /// The account's quota counters, by quota.
    public var accountCounters: [String: QuotaCounter]
    /// The guest's live documents.
    public var guestDocuments: [DocumentRecord]
    /// The account's documents (live or tombstones) at the addresses ``MergePlanner/addressesToRead(_:guestId:)`` names.
    public var accountDocuments: [DocumentRecord]
    /// The guest's sync state, if it has one.
    public var guestSync: SyncCounters?
    /// The account's sync state, if it has one.
    public var accountSync: SyncCounters?
    /// How many App Store transactions (`purchases` rows) belong to the guest.
    public var purchases: Int
    /// How many subscriptions the guest holds.
    public var subscriptions: Int
    /// The guest's live sessions.
    public var liveSessions: [String]

    /// Creates a snapshot.
    public init(
        guest: UserRecord, guestWallet: WalletState, account: UserRecord, accountWallet: WalletState, recorded: GuestMergeSummary? = nil,
        openHolds: [HoldRecord] = [], signupGrant: Int64 = 0, spent: Int64 = 0, guestCounters: [String: QuotaCounter] = [:], accountCounters: [String: QuotaCounter] = [:],
        guestDocuments: [DocumentRecord] = [], accountDocuments: [DocumentRecord] = [], guestSync: SyncCounters? = nil,
        accountSync: SyncCounters? = nil, purchases: Int = 0, subscriptions: Int = 0, liveSessions: [String] = []
    ) {
        self.guest = guest
        self.guestWallet = guestWallet
        self.account = account
        self.accountWallet = accountWallet
        self.recorded = recorded
        self.openHolds = openHolds
        self.signupGrant = signupGrant
        self.spent = spent
        self.guestCounters = guestCounters
        self.accountCounters = accountCounters
        self.guestDocuments = guestDocuments
        self.accountDocuments = accountDocuments
        self.guestSync = guestSync
        self.accountSync = accountSync
        self.purchases = purchases
        self.subscriptions = subscriptions
        self.liveSessions = liveSessions
    }
}

/// The writes of a merge, decided by ``MergePlanner``. A store applies them in the transaction it read the snapshot in,
/// every entry through its ledger's one place, and nothing else.
public struct MergePlan: Sendable, Hashable {
    /// What the merge carries, as stored with it.
    public var summary: GuestMergeSummary
    /// The guest's expired holds to mark released (each with its `release` entry in ``guestEntries``).
    public var releasedHolds: [String]
    /// The guest's live holds that become the account's (each with a `release` entry in ``guestEntries`` and a `hold`
    /// entry in ``accountEntries``): the call that opened one settles it on the account.
    public var movedHolds: [String]
    /// The guest's entries, in order: a release per open hold, then `merge_out`.
    public var guestEntries: [PlannedEntry]
    /// The account's entries: `merge_in`, then a `hold` per moved hold.
    public var accountEntries: [PlannedEntry]
    /// The account's quota counters to write (insert or replace), by quota.
    public var counters: [String: QuotaCounter]
    /// The guest's documents as the account's rows: new versions in the account's change feed, a conflict under its new
    /// id. Each is written where the account has no row, or over a tombstone; never over a live document.
    public var documents: [DocumentRecord]
    /// The account's sync state after the merge (`nil`: unchanged).
    public var accountSync: SyncCounters?
    /// The guest's sync state after the merge: its documents gone, every cursor of it to resync (`nil`: it has none).
    public var guestSync: SyncCounters?
    /// The account's bought premium end after the merge (the later of both: the guest's subscriptions are its now).
    public var accountPurchasedPremiumUntil: Date?
    /// The account's premium end granted by an admin after the merge (the later of both).
    public var accountPremiumUntil: Date?
}

/// What a merge comes to.
public enum MergeDecision: Sendable, Hashable {
    /// Merge now.
    case merge(MergePlan)
    /// The guest was merged into this account already: answer the stored summary, change nothing.
    case replay(GuestMergeSummary)
}

/// The rules of merging a guest into an account, as a pure function from a snapshot to the writes; both stores call
/// it, so they cannot disagree.
///
/// - Only a guest (no email, no Apple identity) merges, into another account that is not a guest; once merged, a guest
///   merged into the same account again is a replay, into another `.alreadyMerged`.
/// - The guest's open holds leave it (a `release` entry each), then its balance moves as a pair of entries, `merge_out`
///   on the guest and `merge_in` on the account, always written (with 0 tokens too), so both ledgers say when it
///   happened and both wallets move (a plan made before the merge fails its compare-and-set). A hold still live is
///   opened again on the account (a `hold` entry, the same hold id): an AI answer streaming while its guest is merged
///   is captured from the account, at most what it held. An expired one, or one the account's wallet could not take
///   (a guest whose holds predate a refund), is only released.
/// - The sign-up grant stays with the guest: what moves is the balance less what is left of the grant, the grant
///   counted as spent first (a guest that bought 100 and spent 30 of its 10 granted and the 100 brings 80; one that
///   spent nothing of a 10-token grant brings nothing of it). So guests made one after another on a device and
///   merged into one account do not add their grants up. A balance below zero (a debt) moves whole.
/// - A guest below zero (a refund took back tokens it had spent) owes: the debt moves with its purchases (whose
///   refund reversal would otherwise credit the account while the guest kept the debt), as a negative `merge_in` that
///   the account pays at once from what it has available. An account that cannot pay it is refused (`.guestInDebt`): what
///   is available goes below zero only through a refund of the account's own, as the ledger's rule says, and the guest
///   can pay the debt with its next purchase first.
/// - Each quota of today's windows keeps the larger of the two counts (the account's window when it has a current
///   one, else the guest's), never the sum.
/// - The guest's live documents get new versions at the end of the account's change feed, so the account's devices
///   pull them; one whose collection and id the account has live is kept beside it under a new id
///   (`<id>-<first 8 hex digits of the guest id>`, then `-2`, `-3`), and reported. The guest's rows (tombstones
///   included) go. The account may end over its ``SyncBudget``: nothing of the guest is dropped (later writes that
///   grow it are refused).
/// - Premium: the account's bought premium end becomes the later of both (the guest's subscriptions are the
///   account's now), and so does the admin's.
public enum MergePlanner {
    /// How many new ids a conflict tries.
    static let candidatesPerConflict = 3

    /// The account's rows a store reads for the guest's live `documents`: their own addresses, and the ids a conflict
    /// would move them to.
    public static func addressesToRead(_ documents: [DocumentRecord], guestId: String) -> [DocumentLocation] {
        var keys: [DocumentLocation] = []
        for document in documents {
            keys.append(DocumentLocation(collection: document.collection, id: document.id))
            for attempt in 1...candidatesPerConflict {
                keys.append(DocumentLocation(collection: document.collection, id: newId(for: document.id, guestId: guestId, attempt: attempt)))
            }
        }
        return keys
    }

    /// The id a guest's document takes beside the account's: `<id>-<8 hex digits of the guest id>` (then `-2`, …),
    /// the id shortened to keep it within 128 characters.
    public static func newId(for id: String, guestId: String, attempt: Int) -> String {
        let tag = String(guestId.filter(\.isHexDigit).prefix(8))
        let suffix = "-" + (tag.isEmpty ? "merged" : tag) + (attempt > 1 ? "-\(attempt)" : "")
        return String(id.prefix(128 - suffix.count)) + suffix
    }

    /// Decides the merge: a replay, the writes, or a refusal (`.alreadyMerged`, `.mergeRefused`, `.guestInDebt`).
    public static func plan(_ snapshot: MergeSnapshot, now: Date) throws(StoreError) -> MergeDecision {
        if let replayed = try replay(snapshot) { return .replay(replayed) }
        let plan = try planMerge(snapshot, now: now)
        guard snapshot.accountWallet.admits(plan.accountEntries[0]) else { throw StoreError(.guestInDebt) }
        return .merge(plan)
    }

    /// What the merge would do now, for an answer that writes nothing: the summary, and `.guestInDebt` as a refusal
    /// to show instead of thrown.
    public static func preview(_ snapshot: MergeSnapshot, now: Date) throws(StoreError) -> MergePreview {
        if let replayed = try replay(snapshot) { return MergePreview(summary: replayed, replayed: true) }
        let plan = try planMerge(snapshot, now: now)
        let refusal: StoreError.Code? = snapshot.accountWallet.admits(plan.accountEntries[0]) ? nil : .guestInDebt
        return MergePreview(summary: plan.summary, replayed: false, refusal: refusal)
    }

    /// The stored summary when the guest was merged into this account; `.alreadyMerged` into another.
    private static func replay(_ snapshot: MergeSnapshot) throws(StoreError) -> GuestMergeSummary? {
        guard let into = snapshot.guest.mergedInto ?? snapshot.recorded?.accountId else { return nil }
        guard into == snapshot.account.id, let recorded = snapshot.recorded else { throw StoreError(.alreadyMerged) }
        return recorded
    }

    private static func planMerge(_ snapshot: MergeSnapshot, now: Date) throws(StoreError) -> MergePlan {
        let (guest, account) = (snapshot.guest, snapshot.account)
        guard guest.id != account.id, guest.isGuest, !account.isGuest, account.mergedInto == nil else {
            throw StoreError(.mergeRefused)
        }
        let tokens = tokensMoved(snapshot)
        let mergeIn = PlannedEntry(kind: .mergeIn, amount: tokens, heldChange: 0, reason: "merged from " + guest.id, reference: guest.id)
        // The holds first: the balance does not move, what they held leaves the guest; a live one is the account's.
        var (releasedHolds, movedHolds) = ([String](), [String]())
        var guestEntries: [PlannedEntry] = []
        var accountEntries = [mergeIn]
        var accountWallet = snapshot.accountWallet.applying(mergeIn)
        for hold in snapshot.openHolds.filter({ $0.status == .open }).sorted(by: { $0.id < $1.id }) {
            let moved = PlannedEntry(kind: .hold, amount: 0, heldChange: hold.amount, reason: hold.id + " moved from " + guest.id)
            if hold.expiresAt > now, accountWallet.admits(moved) {
                movedHolds.append(hold.id)
                accountEntries.append(moved)
                accountWallet = accountWallet.applying(moved)
                guestEntries.append(PlannedEntry(kind: .release, amount: 0, heldChange: -hold.amount, reason: hold.id + " moved to " + account.id))
            } else {
                releasedHolds.append(hold.id)
                guestEntries.append(PlannedEntry(kind: .release, amount: 0, heldChange: -hold.amount, reason: hold.id + " merge"))
            }
        }
        guestEntries.append(PlannedEntry(kind: .mergeOut, amount: -tokens, heldChange: 0, reason: "merged into " + account.id, reference: account.id))

        let (counters, usesTaken) = quotas(snapshot, now: now)
        let documents = moveDocuments(snapshot, now: now)
        let guestSync = snapshot.guestSync.map { sync in
            SyncCounters(version: sync.version + 1, purgedThrough: sync.version + 1, usage: SyncUsage())
        }
        let summary = GuestMergeSummary(
            guestId: guest.id, accountId: account.id, tokensMoved: tokens, holdsReleased: releasedHolds.count, holdsMoved: movedHolds.count,
            signupGrantLeft: snapshot.guestWallet.balance - tokens,
            documentsMoved: documents.records.count, conflicts: documents.conflicts, purchasesMoved: snapshot.purchases,
            subscriptionsMoved: snapshot.subscriptions, quotaUsesTaken: usesTaken, revokedSessions: snapshot.liveSessions.sorted(),
            documentsVersion: documents.records.isEmpty ? nil : documents.sync?.version, mergedAt: Date(millis: now.millis))
        return MergePlan(
            summary: summary, releasedHolds: releasedHolds, movedHolds: movedHolds, guestEntries: guestEntries,
            accountEntries: accountEntries, counters: counters,
            documents: documents.records, accountSync: documents.records.isEmpty ? nil : documents.sync, guestSync: guestSync,
            accountPurchasedPremiumUntil: later(account.purchasedPremiumUntil, guest.purchasedPremiumUntil),
            accountPremiumUntil: later(account.premiumUntil, guest.premiumUntil))
    }

    /// The guest's balance less what is left of its sign-up grant (spent first); a debt whole.
    static func tokensMoved(_ snapshot: MergeSnapshot) -> Int64 {
        let balance = snapshot.guestWallet.balance
        let grantLeft = max(0, snapshot.signupGrant - max(0, snapshot.spent))
        return balance <= 0 ? balance : balance - min(balance, grantLeft)
    }

    /// For each quota the guest used in a window still open: the larger of the two counts, in the account's window when
    /// it has one open, else in the guest's. Returns the counters that change and the uses the account took.
    private static func quotas(_ snapshot: MergeSnapshot, now: Date) -> ([String: QuotaCounter], Int) {
        var counters: [String: QuotaCounter] = [:]
        var taken = 0
        for (quota, guest) in snapshot.guestCounters where guest.windowEnd > now && guest.used > 0 {
            if let account = snapshot.accountCounters[quota], account.windowEnd > now {
                guard guest.used > account.used else { continue }
                counters[quota] = QuotaCounter(used: guest.used, windowEnd: account.windowEnd).stored
                taken += guest.used - account.used
            } else {
                counters[quota] = guest.stored
                taken += guest.used
            }
        }
        return (counters, taken)
    }

    /// The guest's live documents as the account's rows, oldest change first, each at the account's next version.
    private static func moveDocuments(_ snapshot: MergeSnapshot, now: Date)
        -> (records: [DocumentRecord], conflicts: [MergeConflict], sync: SyncCounters?)
    {
        let live = snapshot.guestDocuments.filter { !$0.deleted }.sorted { $0.version < $1.version }
        guard !live.isEmpty else { return ([], [], nil) }
        var rows: [DocumentLocation: DocumentRecord] = [:]
        for row in snapshot.accountDocuments { rows[DocumentLocation(collection: row.collection, id: row.id)] = row }
        var sync = snapshot.accountSync ?? SyncCounters(version: 0, purgedThrough: 0, usage: SyncUsage())
        var records: [DocumentRecord] = []
        var conflicts: [MergeConflict] = []
        for document in live {
            var key = DocumentLocation(collection: document.collection, id: document.id)
            if let existing = rows[key], !existing.deleted {
                // The account's document stays; the guest's goes beside it, at the first id free.
                let free = (1...candidatesPerConflict).lazy.map { attempt in
                    DocumentLocation(collection: document.collection, id: newId(for: document.id, guestId: snapshot.guest.id, attempt: attempt))
                }.first { rows[$0] == nil }
                // Three ids of the same pattern taken by the account's own documents: one more of the pattern (a write
                // over a live row is refused by the store, so nothing is ever overwritten).
                key = free ?? DocumentLocation(
                    collection: document.collection,
                    id: newId(for: document.id, guestId: snapshot.guest.id, attempt: candidatesPerConflict + 1))
                conflicts.append(MergeConflict(collection: document.collection, guestDocumentId: document.id, newId: key.id))
            }
            sync.version += 1
            sync.usage = sync.usage.writing(document.data, over: rows[key])
            let record = DocumentRecord(
                collection: key.collection, id: key.id, data: document.data, rangeValue: document.rangeValue, version: sync.version,
                updatedAt: Date(millis: now.millis), deleted: false)
            rows[key] = record
            records.append(record)
        }
        return (records, conflicts, sync)
    }

    private static func later(_ first: Date?, _ second: Date?) -> Date? {
        guard let first, let second else { return first ?? second }
        return max(first, second)
    }
}
