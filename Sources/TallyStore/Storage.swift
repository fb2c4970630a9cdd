import Foundation

/// Accounts, sessions and credentials.
public protocol IdentityStore: Sendable {
    /// Finds the guest of an installation (a device secret's hash, `deviceHash`) or creates a guest for it
    /// (and the installation, the first time), and opens a session. One guest per installation at a time,
    /// even under concurrent calls; never a linked account (see ``InstallationCounters``). Creating counts
    /// against `signupsPerHour` for `ipHash`, else throws `.rateLimited` with `retryAfter`. Opening a session
    /// revokes the account's oldest live sessions beyond `sessionsPerUser` (the new one included).
    func signInGuest(
        deviceHash: String, ipHash: String, signupsPerHour: Int, signupGrant: Int64, sessionId: String,
        refresh: NewRefreshToken, sessionsPerUser: Int, now: Date
    ) async throws -> SessionGrant

    /// Opens a session for an existing account (after a password check), revoking its oldest live
    /// sessions beyond `sessionsPerUser` (the new one included).
    func openSession(
        userId: String, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, now: Date
    ) async throws -> SessionGrant

    /// The session a refresh token (by hash) belongs to, whatever the token's state; `nil` if unknown.
    func refreshTokenSession(hash: String) async throws -> String?

    /// Exchanges a refresh token (by hash) for `next`, in the same session. A token presented twice
    /// revokes its session and throws `.refreshTokenReused`; unknown, expired or revoked throws `.invalidRefreshToken`.
    func rotateRefreshToken(hash: String, next: NewRefreshToken, now: Date) async throws -> SessionGrant

    /// Revokes a session: its refresh tokens stop working, and so do its access tokens.
    func revokeSession(id: String, now: Date) async throws

    /// The user of a session that is not revoked, or `nil`.
    func liveSessionUser(sessionId: String) async throws -> String?

    /// Adds an email and password to a guest in place and detaches it from its installation: the next
    /// ``signInGuest(deviceHash:ipHash:signupsPerHour:signupGrant:sessionId:refresh:sessionsPerUser:now:)``
    /// there creates a new guest, and the account's quota uses count for it alone (from its counts as a guest).
    /// Throws `.credentialInUse`, `.alreadyLinked` or `.userNotFound`.
    func linkCredentials(userId: String, email: String, passwordHash: String) async throws -> UserRecord

    /// The account and password hash for an email, if any.
    func passwordHash(email: String) async throws -> (userId: String, passwordHash: String)?

    /// Counts a password sign-in attempt of `account` (an email's keyed hash) from `address` (a client
    /// address's keyed hash) as a failure before the password is checked, or refuses it, as ``SignInPolicy``
    /// decides from the failures stored for the pair and the account. Atomic across every instance on the database.
    func beginSignIn(account: String, address: String, policy: SignInPolicy, now: Date) async throws -> SignInDecision

    /// Forgets the failures of `account` and of the pair (`account`, `address`): the password was right.
    /// Other addresses' locks stay.
    func signInSucceeded(account: String, address: String) async throws

    /// The account, if it exists.
    func user(id: String) async throws -> UserRecord?

    /// Deletes the account and everything that belongs to it (not its installation, which keeps its quota
    /// counts for the next guest). Returns whether it existed.
    func deleteUser(id: String) async throws -> Bool
}

/// Single-use codes mailed to an account's email (password reset, email verification), kept only as keyed hashes,
/// and what redeeming one does. Each redemption is one transaction that applies ``AccountCodePolicy``.
public protocol AccountCodeStore: Sendable {
    /// Stores `code` as the only live code of its user and purpose, replacing an earlier one (which stops working),
    /// if the user has an email; returns that email, or `nil` when the user does not exist or is a guest (nothing stored).
    func issueAccountCode(_ code: NewAccountCode, now: Date) async throws -> String?

    /// Presents `codeHash` as the user's password reset code. Redeemed (``AccountCodePolicy/Verdict/redeem``): in one
    /// transaction sets `passwordHash`, marks the email verified (the code reached it), removes the Apple identity when
    /// the email was not verified before, revokes every live session of the user and deletes the code; returns what it
    /// did. Otherwise counts the attempt as the policy says and returns `nil` — the same for a wrong, expired, spent or
    /// absent code, and for a user without an email.
    func resetPassword(userId: String, codeHash: String, passwordHash: String, policy: AccountCodePolicy, now: Date)
        async throws -> PasswordReset?

    /// Presents `codeHash` as the user's email verification code. Redeemed: marks the email verified and deletes the
    /// code; returns the user. Otherwise as ``resetPassword(userId:codeHash:passwordHash:policy:now:)``: `nil`.
    func verifyEmail(userId: String, codeHash: String, policy: AccountCodePolicy, now: Date) async throws -> UserRecord?

    /// Sets a linked account's password hash, revokes its live sessions other than `keepingSession` and deletes its
    /// password reset code, in one transaction; returns the sessions revoked. Throws `.userNotFound` when the user does
    /// not exist or is a guest.
    func changePassword(userId: String, passwordHash: String, keepingSession: String, now: Date) async throws -> [String]
}

/// The wallet ledger, holds and quota counters.
public protocol LedgerStore: Sendable {
    /// Runs `command` in one transaction: replays an earlier response when `idempotency` was seen before
    /// with the same fingerprint, throws `.idempotencyMismatch` when with another; releases the account's
    /// expired holds; applies ``LedgerPlanner``'s plan; renders the response with `render` and stores it
    /// under the key. `render` may also run for an attempt the store then abandons (one planned from a
    /// cached account whose key turns out to be used); a replay always returns the stored response. A refusal (thrown ``StoreError``) leaves nothing behind, and carries the account
    /// state for `.insufficientTokens` and `.quotaExhausted`.
    func execute(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution

    /// The account's wallet, with every hold expired by `now` released first.
    func wallet(userId: String, now: Date) async throws -> WalletState?

    /// The account, wallet and quota counters, with expired holds released first.
    func accountState(userId: String, now: Date) async throws -> AccountState?

    /// Ledger entries of the account, newest first, with ids below `before` when given.
    func entries(userId: String, before: Int64?, limit: Int) async throws -> [LedgerEntryRecord]

    /// A hold of the account.
    func hold(id: String, userId: String) async throws -> HoldRecord?
}

/// Schema, secrets and housekeeping.
public protocol MaintenanceStore: Sendable {
    /// Applies pending schema migrations; safe when several instances start at once.
    func migrate() async throws

    /// Succeeds when the database answers.
    func ping() async throws

    /// A server-wide secret shared by every instance on this database, created by `make` on first use.
    func secret(named name: String, orCreate make: @Sendable () -> String) async throws -> String

    /// Releases every hold expired by `now` of up to `limit` accounts (those owning the oldest expired
    /// holds), one account at a time as a command would; returns how many holds it released of each account
    /// (user id), so their owners can be told their wallet changed.
    func expireHolds(now: Date, limit: Int) async throws -> [String: Int]

    /// Deletes idempotency records, guest sign-up records and sign-in failures older than the given instants.
    func purge(idempotencyBefore: Date, signupsBefore: Date, signInFailuresBefore: Date) async throws

    /// Deletes up to `limit` sessions revoked before `cutoff` (with their refresh tokens), up to `limit`
    /// refresh tokens that expired before `cutoff`, and the sessions that leaves without a token expiring
    /// at `cutoff` or later. Returns how many rows it deleted: 0 when nothing is left to purge.
    func purgeSessions(before cutoff: Date, limit: Int) async throws -> Int
}

/// What work computed once for many requests needs (the AI gateway's daily generations): the stored response of
/// an idempotency key, read without running anything, and leases, so that one process of several on a database
/// computes a thing while the others wait for its stored response.
public protocol LeaseStore: Sendable {
    /// The response stored under `key`'s scope and key, if one is; another request under the key (another
    /// fingerprint) is refused (`.idempotencyMismatch`).
    func storedResponse(for key: IdempotencyKey) async throws -> StoredResponse?

    /// The responses stored in `scope` under keys that begin with `keyPrefix`, newest first, at most `limit`: the
    /// latest of a series of keys the server names itself (a daily generation's windows), found without knowing the
    /// last key.
    func storedResponses(scope: String, keyPrefix: String, limit: Int) async throws -> [StoredResponse]

    /// Takes the lease `name` for `holder` until `until`, unless another holder's lease runs past `now`;
    /// whether `holder` holds it now.
    func takeLease(_ name: String, holder: String, until: Date, now: Date) async throws -> Bool

    /// Ends `holder`'s lease `name`, if it still holds it.
    func releaseLease(_ name: String, holder: String) async throws
}

/// App Store purchases: verified transactions and notifications made into ledger entries and premium, exactly once.
/// Each call is one transaction under a lock on the original transaction (so concurrent calls, from any process, take
/// turns), and plans with ``PurchasePlanner``. Every token moved is a ledger entry whose kind and `reference` (the
/// transaction id; `#n` after it for the n-th refund and its reversal) the schema holds to one credit per transaction
/// and one entry per refund and per reversal.
public protocol PurchaseStore: Sendable {
    /// `userId` submits `transaction` (from StoreKit on their device). A consumable is credited once, forever: to the
    /// account its `appAccountToken` names if that exists, else to the first account to submit it (an unclaimed one
    /// recorded from a notification too); the same account again gets the same purchase with no second credit, another
    /// account `.purchaseClaimed` (thrown after the named account was credited, if no one had been); a Sandbox one past
    /// its ``VerifiedTransaction/sandboxLimit`` `.sandboxLimit`. A subscription stays with the account its
    /// `appAccountToken` names, if that exists (another account: `.purchaseClaimed`, a guest `.signInRequired`); else
    /// its premium moves to `userId` (the account that held it loses what it gave; both ledgers say so). A repeated
    /// submission that changes nothing writes nothing. Throws `.userNotFound`, and `.invalidInput` for tokens out of range.
    func redeem(_ transaction: VerifiedTransaction, userId: String, now: Date) async throws -> Redemption

    /// Applies an App Store notification once: a `notificationUUID` seen before changes nothing (`.duplicate`, decided
    /// in the transaction that applies it), nor does one signed before the newest applied to its original transaction
    /// (`.stale`, still recorded as seen). See ``PurchasePlanner`` for what each type does.
    func apply(_ notification: VerifiedNotification, now: Date) async throws -> NotificationOutcome

    /// The account's purchases, newest first (by purchase date, then transaction id), after `cursor` when given; each
    /// status as of `now` (a subscription once, with its latest transaction and its state, `moved_away` when another
    /// account holds it now).
    func purchases(userId: String, after cursor: PurchaseCursor?, limit: Int, now: Date) async throws -> [PurchaseRecord]

    /// The purchases no account holds (a consumable no one was credited for; a subscription no account has held),
    /// newest first, after `cursor` when given: for the admin.
    func unclaimedPurchases(after cursor: PurchaseCursor?, limit: Int, now: Date) async throws -> [PurchaseRecord]
}

/// Everything the server needs from a database.
public typealias TallyStorage =
    IdentityStore & AccountCodeStore & LedgerStore & DocumentStore & MaintenanceStore & LeaseStore & PurchaseStore
    & AppleIdentityStore & MergeStore & ConsumptionStore & AttestationStore & ConsoleStore
