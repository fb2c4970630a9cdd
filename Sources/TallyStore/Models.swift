import Foundation

/// An account as stored.
public struct UserRecord: Sendable, Hashable {
    /// Stable id (a lowercase UUID).
    public var id: String
    /// Linked email, `nil` for guests.
    public var email: String?
    /// IANA time zone for quota resets.
    public var timezone: String
    /// Language tag, if set.
    public var language: String?
    /// End of premium granted by the admin API (``Command/setPremium(userId:until:)``), if any.
    public var premiumUntil: Date?
    /// End of premium bought: the latest end of the App Store subscriptions the account holds (``PurchaseStore``), if any.
    public var purchasedPremiumUntil: Date?
    /// Creation time.
    public var createdAt: Date
    /// When the user proved they receive mail at `email` (an account code redeemed); `nil` until then, and for guests.
    public var emailVerifiedAt: Date?
    /// Whether an Apple identity (Sign in with Apple) is linked to the account (``AppleIdentityStore``): a way in
    /// besides an email and password.
    public var hasAppleIdentity: Bool
    /// The account this former guest was merged into (``MergeStore``), if it was: everything it had is there, and it
    /// has no way in left (no sessions, installation, email or Apple identity).
    public var mergedInto: String?

    /// Creates a record.
    public init(
        id: String, email: String?, timezone: String, language: String?, premiumUntil: Date?, createdAt: Date,
        emailVerifiedAt: Date? = nil, purchasedPremiumUntil: Date? = nil, hasAppleIdentity: Bool = false, mergedInto: String? = nil
    ) {
        self.id = id
        self.email = email
        self.timezone = timezone
        self.language = language
        self.premiumUntil = premiumUntil
        self.createdAt = createdAt
        self.emailVerifiedAt = emailVerifiedAt
        self.purchasedPremiumUntil = purchasedPremiumUntil
        self.hasAppleIdentity = hasAppleIdentity
        self.mergedInto = mergedInto
    }

    /// A guest has no email and no Apple identity: only its installation's device secret opens it.
    public var isGuest: Bool { email == nil && !hasAppleIdentity }

    /// The end of premium from either source, granted or bought: the later of the two (what `/v1/me`, the quotas
    /// and the planner go by).
    public var combinedPremiumUntil: Date? {
        guard let premiumUntil, let purchasedPremiumUntil else { return premiumUntil ?? purchasedPremiumUntil }
        return max(premiumUntil, purchasedPremiumUntil)
    }

    /// Whether premium, granted or bought, is active at `now`.
    public func isPremium(at now: Date) -> Bool {
        guard let combinedPremiumUntil else { return false }
        return combinedPremiumUntil > now
    }

    /// The record as a store keeps it: its instants in whole milliseconds.
    public var stored: UserRecord {
        var user = self
        user.premiumUntil = premiumUntil.map { Date(millis: $0.millis) }
        user.createdAt = Date(millis: createdAt.millis)
        user.emailVerifiedAt = emailVerifiedAt.map { Date(millis: $0.millis) }
        user.purchasedPremiumUntil = purchasedPremiumUntil.map { Date(millis: $0.millis) }
        return user
    }
}

/// A wallet row: the running totals of its ledger entries.
public struct WalletState: Sendable, Hashable {
    /// Sum of entry amounts.
    public var balance: Int64
    /// Sum of entry held changes.
    public var held: Int64
    /// Incremented by every entry.
    public var version: Int64

    /// Creates a wallet state.
    public init(balance: Int64, held: Int64, version: Int64) {
        self.balance = balance
        self.held = held
        self.version = version
    }

    /// What can be spent or held now.
    public var available: Int64 { balance - held }
}

/// The kinds of ledger entries.
public enum EntryKind: String, Sendable, CaseIterable {
    /// Tokens added (admin grant, signup grant).
    case grant
    /// Tokens spent by a metered action.
    case debit
    /// Tokens reserved by a hold (amount 0, held +n).
    case hold
    /// A hold charged (amount -charged, held -reserved).
    case capture
    /// A hold released by the client (held -reserved).
    case release
    /// A hold released by its timeout (held -reserved).
    case expire
    /// Tokens bought: an App Store consumable credited (reference: its transaction id; once per transaction; its
    /// reason starts with `Sandbox ` for a Sandbox purchase, as every entry of one does).
    case purchase
    /// Tokens of a refunded purchase taken back, spent or not (reference: the transaction id, `#n` after it for its n-th
    /// refund from the second; each once). The only entry that may leave less than nothing available.
    case refund
    /// A refund undone: what it took back credited again (reference: that refund's; once per refund).
    case refundReversed = "refund_reversed"
    /// A change of the premium an App Store subscription gives the account (amount 0; reference: its original
    /// transaction id): it was bought, renewed, ended, refunded, or moved to or from another account.
    case premium
    /// A guest's tokens leaving it as it is merged into an account (``MergeStore``; reference: the account's id; once
    /// per guest): minus its balance (plus its debt, when a refund left it below zero).
    case mergeOut = "merge_out"
    /// A merged guest's tokens arriving in the account (reference: the guest's id; once per guest): the guest's balance,
    /// negative when the account takes over the guest's debt, which it must be able to pay at once.
    case mergeIn = "merge_in"
}

/// One ledger row.
public struct LedgerEntryRecord: Sendable, Hashable {
    /// Ledger-wide increasing id.
    public var id: Int64
    /// What kind of movement.
    public var kind: EntryKind
    /// Signed change to the balance.
    public var amount: Int64
    /// Signed change to the held amount.
    public var heldChange: Int64
    /// Balance after this entry.
    public var balanceAfter: Int64
    /// Free-text reason (action name, grant reason, hold id).
    public var reason: String?
    /// When written.
    public var createdAt: Date
    /// The App Store transaction a purchase, refund or reversal moved tokens for (the original transaction of a
    /// premium change); `nil` for every other kind.
    public var reference: String?

    /// Creates an entry.
    public init(
        id: Int64, kind: EntryKind, amount: Int64, heldChange: Int64, balanceAfter: Int64, reason: String?,
        createdAt: Date, reference: String? = nil
    ) {
        self.id = id
        self.kind = kind
        self.amount = amount
        self.heldChange = heldChange
        self.balanceAfter = balanceAfter
        self.reason = reason
        self.createdAt = createdAt
        self.reference = reference
    }
}

/// The life cycle of a hold: open, then exactly one of the other three.
public enum HoldStatus: String, Sendable {
    /// Reserving tokens.
    case open
    /// Charged (possibly for less than reserved).
    case captured
    /// Released by the client.
    case released
    /// Released by its timeout.
    case expired
}

/// A hold as stored.
public struct HoldRecord: Sendable, Hashable {
    /// Hold id (a lowercase UUID).
    public var id: String
    /// Owner.
    public var userId: String
    /// Tokens reserved.
    public var amount: Int64
    /// Current status.
    public var status: HoldStatus
    /// Tokens charged, once captured.
    public var capturedAmount: Int64?
    /// When it was created.
    public var createdAt: Date
    /// When it releases itself if still open.
    public var expiresAt: Date

    /// Creates a hold.
    public init(
        id: String, userId: String, amount: Int64, status: HoldStatus, capturedAmount: Int64?, createdAt: Date,
        expiresAt: Date
    ) {
        self.id = id
        self.userId = userId
        self.amount = amount
        self.status = status
        self.capturedAmount = capturedAmount
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// Free uses spent in one quota window.
public struct QuotaCounter: Sendable, Hashable {
    /// Uses spent in the window.
    public var used: Int
    /// End of the window (exclusive).
    public var windowEnd: Date

    /// Creates a counter.
    public init(used: Int, windowEnd: Date) {
        self.used = used
        self.windowEnd = windowEnd
    }

    /// The counter as a store keeps it: the window end in whole milliseconds.
    public var stored: QuotaCounter { QuotaCounter(used: used, windowEnd: Date(millis: windowEnd.millis)) }
}

/// The installation a guest account signs in from, with the quota counters of every guest it has had.
///
/// An installation is the SHA-256 of the app's device secret. It has at most one guest at a time (the
/// schema's unique `users.installation`), and never a linked account (a `CHECK`: linking detaches it), so
/// the device secret alone never opens an account with a password. A guest's free uses are counted on
/// its account and on its installation: a later guest on the same installation (after a link or a
/// deletion) continues the installation's day. Linked accounts count per account only.
public struct InstallationCounters: Sendable, Hashable {
    /// The installation's id: the hash of its device secret.
    public var id: String
    /// Its quota counters by quota name (absent: never used). Each runs in windows of its own, by the
    /// same rules as an account's (``QuotaWindow``), in the time zone of the guest using it.
    public var counters: [String: QuotaCounter]

    /// Creates the installation's counters.
    public init(id: String, counters: [String: QuotaCounter]) {
        self.id = id
        self.counters = counters
    }
}

/// Everything needed to render a caller's wallet and quotas, read in one transaction.
public struct AccountState: Sendable, Hashable {
    /// The account.
    public var user: UserRecord
    /// Its wallet.
    public var wallet: WalletState
    /// Its quota counters by quota name (absent: never used).
    public var counters: [String: QuotaCounter]
    /// For a guest, its installation's counters, which limit it too (see ``QuotaWindow/binding(_:installation:)``);
    /// `nil` for a linked account.
    public var installation: InstallationCounters?

    /// Creates an account state.
    public init(user: UserRecord, wallet: WalletState, counters: [String: QuotaCounter], installation: InstallationCounters? = nil) {
        self.user = user
        self.wallet = wallet
        self.counters = counters
        self.installation = installation
    }
}

/// A refresh token to store: only its hash, never the token.
public struct NewRefreshToken: Sendable, Hashable {
    /// SHA-256 of the token.
    public var hash: String
    /// When it stops working.
    public var expiresAt: Date

    /// Creates the record.
    public init(hash: String, expiresAt: Date) {
        self.hash = hash
        self.expiresAt = expiresAt
    }
}

/// A session (a refresh-token family) that was opened or continued.
public struct SessionGrant: Sendable, Hashable {
    /// The account signed in.
    public var user: UserRecord
    /// The session id, carried in access tokens as `sid`.
    public var sessionId: String
    /// Whether this call created the account (guest sign-up).
    public var created: Bool

    /// Creates the grant.
    public init(user: UserRecord, sessionId: String, created: Bool) {
        self.user = user
        self.sessionId = sessionId
        self.created = created
    }
}
