import Foundation

/// What a single-use account code is for. A user has at most one live code per purpose (the schema's primary
/// key): a new one replaces the old, which stops working.
public enum AccountCodePurpose: String, Sendable, Hashable, CaseIterable {
    /// `POST /v1/auth/password/reset`: sets a new password and signs every device out.
    case passwordReset = "password_reset"
    /// `POST /v1/auth/email/verify`: marks the account's email verified.
    case emailVerification = "email_verification"
}

/// A code to store for a user: its keyed hash only. The code itself goes to the user's mail and nowhere else.
public struct NewAccountCode: Sendable, Hashable {
    /// Whose code.
    public var userId: String
    /// What it is for.
    public var purpose: AccountCodePurpose
    /// A keyed hash of the code (and of the user and purpose, so a hash is worth nothing elsewhere).
    public var hash: String
    /// When it stops working.
    public var expiresAt: Date

    /// Creates the code to store.
    public init(userId: String, purpose: AccountCodePurpose, hash: String, expiresAt: Date) {
        self.userId = userId
        self.purpose = purpose
        self.hash = hash
        self.expiresAt = expiresAt
    }
}

/// A live code as a store keeps it.
public struct StoredAccountCode: Sendable, Hashable {
    /// The keyed hash of the code.
    public var hash: String
    /// When it stops working.
    public var expiresAt: Date
    /// Wrong codes presented for it so far.
    public var failedAttempts: Int

    /// Creates the record.
    public init(hash: String, expiresAt: Date, failedAttempts: Int) {
        self.hash = hash
        self.expiresAt = expiresAt
        self.failedAttempts = failedAttempts
    }
}

/// What a redeemed password reset code did.
public struct PasswordReset: Sendable, Hashable {
    /// The account's sessions it revoked (every live one).
    public var revokedSessions: [String]
    /// Whether it removed the account's Apple identity: a reset of an account whose email was not verified does (the
    /// code is the first proof the email is the user's, so an Apple ID linked before may be someone else's).
    public var appleIdentityRemoved: Bool

    /// Creates the record.
    public init(revokedSessions: [String], appleIdentityRemoved: Bool) {
        self.revokedSessions = revokedSessions
        self.appleIdentityRemoved = appleIdentityRemoved
    }
}

/// The rule of account codes, applied by both stores inside the transaction that redeems one: a code works
/// once, until it expires, and dies after ``maxAttempts`` wrong codes presented for it.
///
/// Why the numbers: a code is 8 random digits (10⁸ values). Each code takes at most 5 guesses, and a new one is
/// mailed at most a few times an hour per email (`limits.passwordForgotPerEmail`), so an attacker who knows only the
/// email wins with odds of about 5 in 10⁸ per code, a few in 10⁶ a day — and every code they cause lands in the
/// owner's mailbox.
public struct AccountCodePolicy: Sendable, Hashable {
    /// How long a code works after it is issued.
    public var lifetime: TimeInterval = 15 * 60
    /// Wrong codes a live code survives: the one that reaches it deletes the code.
    public var maxAttempts = 5

    /// The defaults: 15 minutes, 5 attempts.
    public init() {}

    /// What one presented code does to the stored one.
    public enum Verdict: Sendable, Hashable {
        /// The code is right and live: delete it and do what it is for.
        case redeem
        /// Wrong: keep the code with this many failed attempts.
        case wrong(failedAttempts: Int)
        /// Wrong for the last time, or expired: delete the code. The answer is the same as for a wrong one.
        case discard
        /// There is no code to check: nothing changes.
        case absent
    }

    /// The verdict on presenting a code whose keyed hash is `presented` against the user's live code `stored`.
    public func check(_ stored: StoredAccountCode?, presented: String, now: Date) -> Verdict {
        guard let stored else { return .absent }
        guard stored.expiresAt > now, stored.failedAttempts < maxAttempts else { return .discard }
        if stored.hash == presented { return .redeem }
        let failed = stored.failedAttempts + 1
        return failed >= maxAttempts ? .discard : .wrong(failedAttempts: failed)
    }
}
