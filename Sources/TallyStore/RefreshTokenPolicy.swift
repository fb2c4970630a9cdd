import Foundation

/// A refresh token as a store read it, with its session's state: what ``RefreshTokenPolicy`` decides from.
public struct PresentedRefreshToken: Sendable, Hashable {
    /// The session the token renews.
    public var sessionId: String
    /// When the token stops being accepted.
    public var expiresAt: Date
    /// When it was exchanged for its successor (`nil`: never).
    public var usedAt: Date?
    /// When its session was revoked (`nil`: live).
    public var sessionRevokedAt: Date?

    /// A token as read.
    public init(sessionId: String, expiresAt: Date, usedAt: Date?, sessionRevokedAt: Date?) {
        self.sessionId = sessionId
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.sessionRevokedAt = sessionRevokedAt
    }
}

/// What a store does with a presented refresh token (``RefreshTokenPolicy``).
public enum RefreshDecision: Sendable, Hashable {
    /// Valid: mark it used and store its successor in the same session.
    case rotate
    /// Presented again after it was rotated — a copy is in someone else's hands: revoke its session (the whole token
    /// family: every token of a session dies with it), commit that, then answer `.refreshTokenReused`.
    case revokeSession
    /// Refused, nothing written: unknown, expired unused, or its session already revoked (`.invalidRefreshToken`).
    case refuse

    /// The error a store answers with, if the decision is not ``rotate``.
    public var error: StoreError? {
        switch self {
        case .rotate: nil
        case .revokeSession: StoreError(.refreshTokenReused)
        case .refuse: StoreError(.invalidRefreshToken)
        }
    }
}

/// The rules of refresh-token rotation, written once for both stores: a token is used once; a second presentation
/// (reuse) revokes its session; an expired token or one of a revoked session is refused without revoking anything.
/// There is no grace window: a token is reused the moment it is presented after its rotation, however soon, and
/// expires at `expiresAt` exactly (`expiresAt <= now` is expired).
///
/// The order matters where states combine: a revoked session refuses first (its tokens are dead, nothing left to
/// revoke); a used token is reuse even once expired (the presenter held a copy).
///
/// SQLite (one writer) reads the token and applies ``decide(_:now:)``. PostgreSQL claims the token in the statement
/// that reads it (`UPDATE … WHERE used_at IS NULL AND expires_at > now` on a live session: exactly the tokens
/// ``decide(_:now:)`` rotates), so concurrent presentations, from any process, let one win; it then applies
/// ``decide(_:now:claimed:)``.
public enum RefreshTokenPolicy {
    /// The decision for `token` (`nil`: no such token) presented at `now`.
    public static func decide(_ token: PresentedRefreshToken?, now: Date) -> RefreshDecision {
        guard let token else { return .refuse }
        if token.sessionRevokedAt != nil { return .refuse }
        if token.usedAt != nil { return .revokeSession }
        if isExpired(token, now: now) { return .refuse }
        return .rotate
    }

    /// The decision of a store that claims the token atomically: `claimed` when its conditional update took the
    /// token (then it rotates). A token the snapshot shows rotatable but the claim missed was taken by a concurrent
    /// presentation between the two: it was presented twice, and that is reuse.
    public static func decide(_ token: PresentedRefreshToken?, now: Date, claimed: Bool) -> RefreshDecision {
        if claimed { return .rotate }
        let decision = decide(token, now: now)
        return decision == .rotate ? .revokeSession : decision
    }

    /// Whether `token` no longer renews its session at `now` (the instant of `expiresAt` included).
    public static func isExpired(_ token: PresentedRefreshToken, now: Date) -> Bool {
        token.expiresAt.millis <= now.millis
    }
}
