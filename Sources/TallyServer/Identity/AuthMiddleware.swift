import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyStore

/// Requires `Authorization: Bearer <access token>` and sets ``TallyRequestContext/identity``: Tally's own
/// `/v1` routes sit behind it, and an embedding app puts its own routes behind it the same way.
///
/// The token must be validly signed, unexpired, and belong to a session that is still live (not signed
/// out, account not deleted); anything else is answered `401` with a JSON error before the handler runs.
/// The user id comes only from the token, never from the request. Behind it,
/// `.group(context: AuthenticatedContext.self)` hands handlers an ``AuthenticatedContext``, whose
/// `identity` is not optional (docs/embedding.md, has an app's route).
public struct AuthMiddleware: RouterMiddleware {
    /// The context of Tally's public router, whose ``TallyRequestContext/identity`` this sets.
    public typealias Context = TallyRequestContext
    let tokens: TokenService
    let store: any TallyStorage
    let sessions: SessionCache

    /// Passes the request on with its caller's ``Identity`` (noted for the access log too), or answers 401.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token = request.headers[.authorization].flatMap(Self.bearer), let identity = try await identity(of: token) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        var context = context
        context.identity = identity
        context.accessRecord?.userId = identity.userId
        // No `tally.user` logger metadata here: swift-log's stream handler re-renders all of a logger's
        // metadata on every change (3 % of an action's CPU in the profile); the few log lines that
        // name the user pass it themselves.
        return try await next(request, context)
    }

    /// The identity of a token that is validly signed, unexpired and of a live session. A token verified
    /// before only has its session looked up again (measured: verifying it again, two actor hops, was the
    /// whole p99 of a busy server's `GET /v1/wallet`).
    func identity(of token: String) async throws -> Identity? {
        let identity: Identity
        let expiresAt: Date
        switch sessions.lookup(token) {
        case .trusted(let trusted):
            return trusted
        case .recheck(let known, let expiry):
            (identity, expiresAt) = (known, expiry)
        case nil:
            guard let verified = await tokens.verify(token) else { return nil }
            (identity, expiresAt) = verified
        }
        let epoch = sessions.epoch
        guard try await store.liveSessionUser(sessionId: identity.sessionId) == identity.userId else {
            sessions.evict(token: token)
            return nil
        }
        sessions.remember(token, identity: identity, expiresAt: expiresAt, readAt: epoch)
        return identity
    }

    /// The token of a `Bearer` authorization header (scheme case-insensitive, surrounding spaces ignored).
    static func bearer(_ header: String) -> String? {
        var utf8 = Substring(header).utf8
        guard utf8.count > 7, utf8.prefix(7).elementsEqual("bearer ".utf8, by: { ($0 | 0x20) == $1 }) else { return nil }
        utf8 = utf8.dropFirst(7)
        while utf8.first == 0x20 { utf8 = utf8.dropFirst() }
        while utf8.last == 0x20 { utf8 = utf8.dropLast() }
        return utf8.isEmpty ? nil : String(Substring(utf8))
    }
}
