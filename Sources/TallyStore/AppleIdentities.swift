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
    /// When the identity was linked, or consent given again after a revocation: Apple's notifications about events
    /// before it change nothing.
    public var linkedAt: Date
    /// When Apple said the user stopped using Sign in with Apple with the app (`consent-revoked`), until they sign in
    /// with it again; nil while consent stands.
    public var consentRevokedAt: Date?

    /// Creates a record.
    public init(userId: String, subject: String, email: String?, refreshToken: String?, linkedAt: Date, consentRevokedAt: Date? = nil) {
        self.userId = userId
        self.subject = subject
        self.email = email
        self.refreshToken = refreshToken
        self.linkedAt = linkedAt
        self.consentRevokedAt = consentRevokedAt
    }
}

/// One of Apple's account notifications about an identity, verified, as the stores take it: once by its id, and only
/// when its event is not older than the identity's link.
public struct AppleAccountNotice: Sendable, Hashable {
    /// The notification's id (`jti`): a second notification with it changes nothing.
    public var id: String
    /// Apple's `sub` it is about.
    public var subject: String
    /// When the event happened (`event_time`): before the identity's ``AppleIdentityRecord/linkedAt``, it is about an
    /// earlier link and changes nothing.
    public var eventTime: Date
    /// Until when the id is remembered: past it the verifier refuses the notification as too old anyway.
    public var keepUntil: Date

    /// Creates a notice.
    public init(id: String, subject: String, eventTime: Date, keepUntil: Date) {
        self.id = id
        self.subject = subject
        self.eventTime = eventTime
        self.keepUntil = keepUntil
    }
}

/// A sign-in's use of a verified identity token: each token signs in once.
public struct AppleTokenUse: Sendable, Hashable {
    /// Apple's `sub` of the token.
    public var subject: String
    /// The token's name (`AppleIdentity.tokenDigest`: the hash of its signed part).
    public var digest: String
    /// Until when the use is remembered: while the verifier would still accept the token (its `exp`, or its maximum
    /// age if sooner, and the leeway).
    public var expiresAt: Date
    /// The guest the sign-in merges into the account, if it does: the same guest may use the token again with
    /// `merge: true` (a retry of that merge, which answers its summary again); nothing else may.
    public var mergingGuest: String?

    /// Creates a use.
    public init(subject: String, digest: String, expiresAt: Date, mergingGuest: String? = nil) {
        self.subject = subject
        self.digest = digest
        self.expiresAt = expiresAt
        self.mergingGuest = mergingGuest
    }
}

/// What Apple's `consent-revoked` notification did.
public struct AppleConsentRevocation: Sendable, Hashable {
    /// The account the identity is linked to (it stays linked, marked revoked).
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
/// Before any of them, ``useAppleToken(_:now:)`` takes the identity token (once).
public protocol AppleIdentityStore: Sendable {
    /// The account the Apple `sub` is linked to, if any (its consent revoked or not).
    func appleAccount(subject: String) async throws -> UserRecord?

    /// The account's Apple identity (its refresh token, to revoke at deletion), if it has one.
    func appleIdentity(userId: String) async throws -> AppleIdentityRecord?

    /// Takes an identity token for a sign-in: `true` the first time, and again only for the same `mergingGuest` (a
    /// retry of that merge); `false` otherwise — the token was used, from this process or another. Remembered until
    /// ``AppleTokenUse/expiresAt`` (``purgeAppleRecords(now:limit:)``).
    func useAppleToken(_ use: AppleTokenUse, now: Date) async throws -> Bool

    /// Signs in with an Apple identity without a guest: opens a session for the account of `credential.subject`, or
    /// creates a new (non-guest) account for it — its wallet granted `signupGrant`, as a guest's sign-up is — and opens
    /// the session there (``SessionGrant/created``). Concurrent first sign-ins of one `sub` make one account. The
    /// credential's email and refresh token, when it has them, replace the stored ones, and a revoked consent is given
    /// again (as ``appleSignedIn(_:now:)``). Opening the session revokes the account's oldest live sessions beyond
    /// `sessionsPerUser`.
    func signInWithApple(
        _ credential: AppleCredential, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, signupGrant: Int64, now: Date
    ) async throws -> SessionGrant

    /// Links an Apple identity to an existing account in place (same user id), detaching a guest from its
    /// installation (the device secret no longer opens it, and its quota uses count for it alone from now on). The
    /// same `sub` linked again to the same account only updates it as ``appleSignedIn(_:now:)`` does. Throws
    /// `.appleIdentityInUse` (the `sub` is another account's), `.alreadyLinked` (the account has another Apple
    /// identity), `.userNotFound` (no such account, or a merged guest).
    func linkApple(userId: String, credential: AppleCredential, now: Date) async throws -> UserRecord

    /// A verified sign-in reached the account of `credential.subject`: a revoked consent is given again (the mark
    /// cleared, ``AppleIdentityRecord/linkedAt`` moved to `now`, so Apple's notifications about before it change
    /// nothing), and the credential's email and refresh token, where it has them, replace the stored ones. `false`
    /// when no account has the `sub`.
    func appleSignedIn(_ credential: AppleCredential, now: Date) async throws -> Bool

    /// Apple's `consent-revoked`, once per notice: the identity stays linked, marked revoked at the event's time (its
    /// refresh token, dead at Apple, dropped), and every live session of its account is revoked, in one transaction;
    /// `nil` — nothing done — for a notice seen before, a `sub` linked to no account, an identity linked after the
    /// event or already revoked.
    func revokeAppleConsent(_ notice: AppleAccountNotice, now: Date) async throws -> AppleConsentRevocation?

    /// Apple's `account-delete`, once per notice: deletes the account of the `sub` when it has no other way in (no
    /// email and password), else only unlinks the identity, in one transaction; `nil` — nothing done — for a notice
    /// seen before, a `sub` linked to no account, or an identity linked after the event.
    func appleAccountDeleted(_ notice: AppleAccountNotice, now: Date) async throws -> AppleAccountDeletion?

    /// Deletes up to `limit` of the token uses and notification ids remembered past their time (before `now`); how many.
    func purgeAppleRecords(now: Date, limit: Int) async throws -> Int
}
