import Foundation

// Sign in with Apple as the stores keep it: an account's Apple identity is Apple's stable user id (`sub`), never an
// email. The email Apple shares (possibly a private relay address) is only a contact, and the refresh token Apple
// issued is kept, as opaque text, to revoke it when the account is deleted. The route layer verifies what Apple signs.

/// What the server learned from Apple about the person signing in, already verified.
public struct AppleCredential: Sendable, Hashable {
    /// Apple's stable id of the user for this team (`sub` of the identity token): the identity.
    public var subject: String
    /// The email Apple shared (a private relay address possibly), to write to; `nil` when this sign-in did not carry one
    /// (the one stored stays). Never used to find an account.
    public var email: String?
    /// Apple's refresh token from the authorization code exchange, as the server wants it stored (it may be encrypted
    /// already: opaque text here); `nil` when this sign-in got none (the one stored stays).
    public var refreshToken: String?

    /// Creates a credential.
    public init(subject: String, email: String? = nil, refreshToken: String? = nil) {
        self.subject = subject
        self.email = email
        self.refreshToken = refreshToken
    }
}

/// An account's Apple identity as stored.
public struct AppleIdentityRecord: Sendable, Hashable {
    /// The account.
    public var userId: String
    /// Apple's `sub`.
    public var subject: String
    /// The contact email Apple shared, if any.
    public var email: String?
    /// The stored Apple refresh token (opaque), if any: revoke it with Apple when the account is deleted.
    public var refreshToken: String?
    /// When the identity was linked.
    public var linkedAt: Date

    /// Creates a record.
    public init(userId: String, subject: String, email: String?, refreshToken: String?, linkedAt: Date) {
        self.userId = userId
        self.subject = subject
        self.email = email
        self.refreshToken = refreshToken
        self.linkedAt = linkedAt
    }
}

/// What Apple's `consent-revoked` notification did.
public struct AppleConsentRevocation: Sendable, Hashable {
    /// The account the identity was linked to.
    public var userId: String
    /// Its sessions revoked (to announce, as a sign-out's).
    public var revokedSessions: [String]

    /// Creates the record.
    public init(userId: String, revokedSessions: [String]) {
        self.userId = userId
        self.revokedSessions = revokedSessions
    }
}

/// What Apple's `account-delete` notification did.
public enum AppleAccountDeletion: Sendable, Hashable {
    /// The account had no other way in (no email and password): it was deleted with everything it had, as
    /// ``IdentityStore/deleteUser(id:)`` deletes (announce it as a deletion).
    case deleted(userId: String)
    /// The account has an email and password: only the Apple identity was unlinked.
    case unlinked(userId: String)
}

/// Apple identities of accounts (Sign in with Apple). Each call is one transaction; an Apple `sub` belongs to one
/// account at most (a unique index), and linking one detaches a guest from its installation, as linking an email does.
///
/// The server's sign-in: ``appleAccount(subject:)`` — a known `sub` signs in to its account (``IdentityStore/openSession(userId:sessionId:refresh:sessionsPerUser:now:)``,
/// or, from a guest that has something to lose, the `account_exists` answer with ``MergeStore/mergePreview(guestId:into:now:)``
/// and then ``MergeStore/merge(guestId:into:now:)``); a new `sub` with a guest's access token: ``linkApple(userId:credential:now:)``
/// (the guest becomes the account in place); a new `sub` without one: ``signInWithApple(_:sessionId:refresh:sessionsPerUser:signupGrant:now:)``.
public protocol AppleIdentityStore: Sendable {
    /// The account the Apple `sub` is linked to, if any.
    func appleAccount(subject: String) async throws -> UserRecord?

    /// The account's Apple identity (its refresh token, to revoke at deletion), if it has one.
    func appleIdentity(userId: String) async throws -> AppleIdentityRecord?

    /// Signs in with an Apple identity without a guest: opens a session for the account of `credential.subject`, or
    /// creates a new (non-guest) account for it — its wallet granted `signupGrant`, as a guest's sign-up is — and opens
    /// the session there (``SessionGrant/created``). Concurrent first sign-ins of one `sub` make one account. The
    /// credential's email and refresh token, when it has them, replace the stored ones. Opening the session revokes the
    /// account's oldest live sessions beyond `sessionsPerUser`.
    func signInWithApple(
        _ credential: AppleCredential, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, signupGrant: Int64, now: Date
    ) async throws -> SessionGrant

    /// Links an Apple identity to an existing account in place (same user id), detaching a guest from its
    /// installation (the device secret no longer opens it, and its quota uses count for it alone from now on). The
    /// same `sub` linked again to the same account only updates its email and refresh token. Throws
    /// `.appleIdentityInUse` (the `sub` is another account's), `.alreadyLinked` (the account has another Apple
    /// identity), `.userNotFound` (no such account, or a merged guest).
    func linkApple(userId: String, credential: AppleCredential, now: Date) async throws -> UserRecord

    /// Stores (or, with `nil`, clears) the account's Apple refresh token; `false` when it has no Apple identity.
    func setAppleRefreshToken(userId: String, _ refreshToken: String?) async throws -> Bool

    /// Apple's `consent-revoked`: unlinks the identity and revokes every live session of its account, in one
    /// transaction; `nil` for a `sub` linked to no account.
    func revokeAppleConsent(subject: String, now: Date) async throws -> AppleConsentRevocation?

    /// Apple's `account-delete`: deletes the account of the `sub` when it has no other way in (no email and password),
    /// else only unlinks the identity, in one transaction; `nil` for a `sub` linked to no account.
    func appleAccountDeleted(subject: String, now: Date) async throws -> AppleAccountDeletion?
}
