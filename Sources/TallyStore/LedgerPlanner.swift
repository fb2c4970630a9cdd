import Foundation

/// What a store reads, under lock, before applying a command.
public struct LedgerSnapshot: Sendable, Hashable {
    /// The account.
    public var user: UserRecord
    /// Its wallet.
    public var wallet: WalletState
    /// The hold named by the command, if any.
    public var hold: HoldRecord?
    /// The counter of the action's quota, if any and if it exists.
    public var counter: QuotaCounter?
    /// A guest's installation, whose counter of the action's quota limits it too and is charged with it.
    public var installation: InstallationCounters?

    /// Creates a snapshot.
    public init(
        user: UserRecord, wallet: WalletState, hold: HoldRecord? = nil, counter: QuotaCounter? = nil,
        installation: InstallationCounters? = nil
    ) {
        self.user = user
        self.wallet = wallet
        self.hold = hold
        self.counter = counter
        self.installation = installation
    }
}

/// A ledger entry to append: the wallet moves by exactly `amount` and `heldChange` with it.
public struct PlannedEntry: Sendable, Hashable {
    /// Entry kind.
    public var kind: EntryKind
    /// Signed change to the balance.
    public var amount: Int64
    /// Signed change to the held amount.
    public var heldChange: Int64
    /// Reason for the ledger.
    public var reason: String?
    /// The App Store transaction of a purchase, refund, reversal or premium change (``LedgerEntryRecord/reference``).
    public var reference: String?

    /// Creates a planned entry.
    public init(kind: EntryKind, amount: Int64, heldChange: Int64, reason: String?, reference: String? = nil) {
        self.kind = kind
        self.amount = amount
        self.heldChange = heldChange
        self.reason = reason
        self.reference = reference
    }
}

/// The writes a command needs, decided from a snapshot by ``LedgerPlanner``. A store applies
/// them in the same transaction it read the snapshot in, and nothing else.
public struct LedgerPlan: Sendable, Hashable {
    /// The entry to append and apply to the wallet (balance, held, version + 1).
    public var entry: PlannedEntry?
    /// A hold to insert.
    public var newHold: HoldRecord?
    /// The new status (and captured amount) of the snapshot's hold.
    public var settleHold: (status: HoldStatus, capturedAmount: Int64?)?
    /// A quota counter to write, by quota name.
    public var counter: (quota: String, value: QuotaCounter)?
    /// The installation's counter of the same quota to write with it, for a guest's free use.
    public var installationCounter: (installation: String, quota: String, value: QuotaCounter)?
    /// The profile after the command, when it changes.
    public var user: UserRecord?
    /// How an action was paid.
    public var payment: ActionDecision?

    /// An empty plan.
    public init() {}

    /// Plans are equal when they make the same writes.
    public static func == (lhs: LedgerPlan, rhs: LedgerPlan) -> Bool {
        lhs.entry == rhs.entry && lhs.newHold == rhs.newHold && lhs.settleHold?.status == rhs.settleHold?.status
            && lhs.settleHold?.capturedAmount == rhs.settleHold?.capturedAmount && lhs.counter?.quota == rhs.counter?.quota
            && lhs.counter?.value == rhs.counter?.value && lhs.installationCounter?.installation == rhs.installationCounter?.installation
            && lhs.installationCounter?.quota == rhs.installationCounter?.quota
            && lhs.installationCounter?.value == rhs.installationCounter?.value && lhs.user == rhs.user && lhs.payment == rhs.payment
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(entry)
        hasher.combine(newHold)
        hasher.combine(payment)
    }
}

/// The ledger's rules as a pure function from (command, snapshot, now) to a plan.
/// Both stores call it, so SQLite and PostgreSQL cannot disagree about money.
public enum LedgerPlanner {
    /// Plans `command` against `snapshot`, or throws the refusal (which leaves nothing behind).
    public static func plan(_ command: Command, snapshot: LedgerSnapshot, now: Date) throws(StoreError) -> LedgerPlan {
        // A guest merged into an account is gone: everything it had is the account's (``MergeStore``).
        guard snapshot.user.mergedInto == nil else { throw StoreError(.userNotFound) }
        var plan = LedgerPlan()
        let wallet = snapshot.wallet
        switch command {
        case .grant(_, let amount, let reason):
            guard amount > 0, amount <= Limits.maxAmount else { throw StoreError(.invalidInput) }
            plan.entry = PlannedEntry(kind: .grant, amount: amount, heldChange: 0, reason: reason)

        case .createHold(let userId, let holdId, let amount, let expiresAt, let note, let premium):
            guard amount > 0, amount <= Limits.maxAmount, expiresAt > now else { throw StoreError(.invalidInput) }
            // A premium user's hold on a premium model holds nothing: free, or for one use of a quota taken with it.
            var (held, paid) = (amount, "")
            switch premium {
            case .free? where snapshot.user.isPremium(at: now):
                (held, paid, plan.payment) = (0, " (premium: free)", .premium)
            case .quota(let quota, let limit)? where snapshot.user.isPremium(at: now):
                guard Self.takeUse(of: quota, limit: limit, snapshot: snapshot, now: now, into: &plan) else {
                    throw StoreError(.quotaExhausted)
                }
                (held, paid, plan.payment) = (0, " (premium: quota \(quota))", .useQuota)
            default:
                guard wallet.available >= amount else { throw StoreError(.insufficientTokens) }
            }
            plan.entry = PlannedEntry(kind: .hold, amount: 0, heldChange: held, reason: Self.reason(holdId, note) + paid)
            plan.newHold = HoldRecord(
                id: holdId, userId: userId, amount: held, status: .open, capturedAmount: nil, createdAt: now,
                expiresAt: expiresAt)

        case .captureHold(_, let holdId, let amount, let note):
            let hold = try openHold(snapshot, now: now)
            guard amount >= 0, amount <= hold.amount else { throw StoreError(.invalidInput) }
            plan.entry = PlannedEntry(kind: .capture, amount: -amount, heldChange: -hold.amount, reason: Self.reason(holdId, note))
            plan.settleHold = (.captured, amount)

        case .releaseHold(_, let holdId, let note, let giveBack):
            let hold = try openHold(snapshot, now: now)
            plan.entry = PlannedEntry(kind: .release, amount: 0, heldChange: -hold.amount, reason: Self.reason(holdId, note))
            plan.settleHold = (.released, nil)
            if let giveBack { Self.giveBack(giveBack, snapshot: snapshot, now: now, into: &plan) }

        case .performAction(_, let action, let quotaLimit):
            let remaining = action.quota.flatMap { quota in quotaLimit.map { Self.usesLeft(of: quota, limit: $0, snapshot: snapshot, now: now) } }
            let decision = ActionDecision.decide(
                action: action, isPremium: snapshot.user.isPremium(at: now), quotaRemaining: remaining,
                available: wallet.available)
            plan.payment = decision
            switch decision {
            case .useQuota:
                if let quota = action.quota { _ = Self.takeUse(of: quota, limit: nil, snapshot: snapshot, now: now, into: &plan) }
            case .premium:
                break
            case .charge(let tokens):
                plan.entry = PlannedEntry(kind: .debit, amount: -tokens, heldChange: 0, reason: action.name)
            case .insufficientTokens:
                throw StoreError(.insufficientTokens)
            case .quotaExhausted:
                throw StoreError(.quotaExhausted)
            }

        case .setPremium(_, let until):
            var user = snapshot.user
            user.premiumUntil = until
            plan.user = user

        case .updateProfile(_, let timezone, let language):
            var user = snapshot.user
            if let timezone { user.timezone = timezone }
            if let language { user.language = language }
            plan.user = user
        }
        // The schema enforces this too; checking here turns a constraint error into a clean refusal.
        if let entry = plan.entry, !wallet.admits(entry) { throw StoreError(.insufficientTokens) }
        return plan
    }

    /// A hold entry's reason: the hold id, then the command's note (`<id> ai gpt-4o prompt=12 completion=30`), so
    /// the ledger says what each hold was for and the first word still names the hold.
    static func reason(_ holdId: String, _ note: String?) -> String {
        guard let note, !note.isEmpty else { return holdId }
        return holdId + " " + note
    }

    /// The counters of `quota` that apply at `now`: the account's, and a guest's installation's, which counts the same
    /// quota in windows of its own (both must have a use left).
    private static func counters(of quota: String, snapshot: LedgerSnapshot, now: Date) -> (QuotaCounter, QuotaCounter?) {
        let timeZone = TimeZone(identifier: snapshot.user.timezone) ?? .gmt
        let installation = snapshot.installation.map { QuotaWindow.current($0.counters[quota], now: now, timeZone: timeZone) }
        return (QuotaWindow.current(snapshot.counter, now: now, timeZone: timeZone), installation)
    }

    /// The uses of `quota` left at `now` (`limit` a window).
    private static func usesLeft(of quota: String, limit: Int, snapshot: LedgerSnapshot, now: Date) -> Int {
        let (counter, installation) = counters(of: quota, snapshot: snapshot, now: now)
        return limit - QuotaWindow.binding(counter, installation: installation).used
    }

    /// Plans one use of `quota` (the account's counter and a guest's installation's); `false`, planning nothing, when
    /// `limit` is given and no use is left.
    private static func takeUse(of quota: String, limit: Int?, snapshot: LedgerSnapshot, now: Date, into plan: inout LedgerPlan) -> Bool {
        if let limit, usesLeft(of: quota, limit: limit, snapshot: snapshot, now: now) <= 0 { return false }
        var (counter, installationCounter) = counters(of: quota, snapshot: snapshot, now: now)
        counter.used += 1
        plan.counter = (quota, counter)
        if let installation = snapshot.installation, var installationCounter {
            installationCounter.used += 1
            plan.installationCounter = (installation.id, quota, installationCounter)
        }
        return true
    }

    /// Plans giving `use` back: to each counter still in the window it was counted in (open at `now`), none to a later one.
    private static func giveBack(_ use: QuotaUse, snapshot: LedgerSnapshot, now: Date, into plan: inout LedgerPlan) {
        func returned(_ counter: QuotaCounter?, _ windowEnd: Date?) -> QuotaCounter? {
            guard var counter, let windowEnd, counter.windowEnd.millis == windowEnd.millis, now < counter.windowEnd, counter.used > 0
            else { return nil }
            counter.used -= 1
            return counter
        }
        if let counter = returned(snapshot.counter, use.windowEnd) { plan.counter = (use.quota, counter) }
        if let installation = snapshot.installation,
            let counter = returned(installation.counters[use.quota], use.installationWindowEnd)
        {
            plan.installationCounter = (installation.id, use.quota, counter)
        }
    }

    /// The entry that releases an expired hold.
    public static func expiry(of hold: HoldRecord) -> PlannedEntry {
        PlannedEntry(kind: .expire, amount: 0, heldChange: -hold.amount, reason: hold.id)
    }

    private static func openHold(_ snapshot: LedgerSnapshot, now: Date) throws(StoreError) -> HoldRecord {
        guard let hold = snapshot.hold else { throw StoreError(.holdNotFound) }
        guard hold.status == .open, hold.expiresAt > now else { throw StoreError(.holdNotOpen) }
        return hold
    }
}

extension WalletState {
    /// A new account's wallet, as both stores insert it: nothing in it, at version 0.
    public static let empty = WalletState(balance: 0, held: 0, version: 0)

    /// The wallet after `entry`: the one place that decides an entry's `balance_after` and `held_after` and the
    /// wallet's row after it, from the wallet as read, for both stores (SQLite's `append`, PostgreSQL's `LedgerRows`;
    /// neither adds amounts in SQL, which `SharedRulesOnePlaceTests` checks).
    public func applying(_ entry: PlannedEntry) -> WalletState {
        WalletState(balance: balance + entry.amount, held: held + entry.heldChange, version: version + 1)
    }

    /// Whether the ledger may append `entry` to this wallet — the rule both schemas hold every entry to: nothing is
    /// held below zero, and what is available (`balance - held`) stays at zero or above, except through a refund
    /// (which takes back what was bought, spent or not) or an entry that does not lower it (a grant or purchase paying
    /// a debt off in part, a release, or the capture of a hold opened before a refund: it moves the balance down by
    /// at most what it held, and what is available not at all).
    public func admits(_ entry: PlannedEntry) -> Bool {
        let after = applying(entry)
        return after.held >= 0 && (after.available >= 0 || entry.kind == .refund || entry.amount >= entry.heldChange)
    }
}
