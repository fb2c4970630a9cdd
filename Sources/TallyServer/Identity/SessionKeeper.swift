import Foundation
import Hummingbird
import TallyAPI
import TallyStore

/// Opens and ends sessions: the token service that signs their tokens, this process's cache of the tokens it trusts
/// (``SessionCache``), and the notifier that ends a session's event streams and cached tokens on every process.
struct SessionKeeper: Sendable {
    /// Signs access tokens and makes refresh tokens.
    let tokens: TokenService
    /// The access tokens this process trusts, by session.
    let cache: SessionCache
    /// Tells this process's streams and the other processes that a session or an account ended.
    let notifier: any ChangeNotifier

    /// A new refresh token, and what the store keeps of it.
    func refreshToken() -> (token: String, record: NewRefreshToken) {
        tokens.refreshToken()
    }

    /// The tokens of a new session, as every sign-in answers them.
    func answer(
        _ grant: SessionGrant, refreshToken: String, status: HTTPResponse.Status = .ok, merged: MergeSummary? = nil
    ) async throws -> Response {
        let access = try await tokens.accessToken(userId: grant.user.id, sessionId: grant.sessionId)
        // Just signed: its first request needs no signature check, only the session lookup (under load,
        // the first request of every session verifying its token was the start-up latency peak).
        cache.rememberSigned(
            access.token, identity: Identity(userId: grant.user.id, sessionId: grant.sessionId), expiresAt: access.expiresAt)
        let tokens = SessionTokens(
            userId: grant.user.id, isGuest: grant.user.isGuest, accessToken: access.token, refreshToken: refreshToken,
            expiresIn: access.expiresIn, merged: merged)
        return JSONResponse.make(status: status, body: tokens, headers: [.cacheControl: "no-store"])
    }

    /// Ends revoked sessions of `userId` now: this process's token cache, its event streams and, through the
    /// notifier, the other processes' caches and streams, all in one announcement (the store's revocation feed is
    /// their fallback).
    func end(sessionIds: [String], of userId: String) {
        for sessionId in sessionIds { cache.evict(sessionId: sessionId) }
        notifier.sessionsEnded(userId: userId, sessionIds: sessionIds)
    }

    /// Ends one revoked session now (``end(sessionIds:of:)``).
    func end(sessionId: String, of userId: String) { end(sessionIds: [sessionId], of: userId) }

    /// Ends every session of a deleted account, here and (through the notifier) on the other processes.
    func accountDeleted(_ userId: String) {
        cache.evict(userId: userId)
        notifier.accountDeleted(userId: userId)
    }
}
