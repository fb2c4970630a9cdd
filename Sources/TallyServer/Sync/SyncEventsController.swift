import Foundation
import HTTPTypes
import Hummingbird
import TallyAPI
import TallyStore

/// `GET /v1/sync/events`: Server-Sent Events for the signed-in user (docs/sync.md, "Events").
///
/// On connect: a 2 KiB comment (``ServerSentEvents/opening``), a `retry:` hint, a `wallet` event (the account as it is now), and — when the client says
/// where it is (`Last-Event-ID` or `?cursor=`, a pull cursor) and its documents changed since — a `changed`
/// event. The stream subscribes before it reads, so nothing committed after the connect is missed. Then:
/// `changed` (`id:` and data carry the cursor of the newest change) after a change to the user's documents,
/// `wallet` after a change to the wallet or quotas, from any process; `: heartbeat` every
/// ``heartbeatInterval`` of the injected clock. The stream ends on sign-out or account deletion (in this
/// process at once, in another one through the same notification), when a heartbeat finds the session
/// revoked or the access token expired, when the user opens more than ``EventHub/maxStreamsPerUser``
/// streams (the oldest), when events may have been missed (the PostgreSQL listener reconnected) and on
/// graceful shutdown: a client reconnects, with its cursor, and catches up.
struct SyncEventsController {
    let store: any TallyStorage
    /// The clock of the heartbeats and token expiry.
    let clock: any TallyClock
    /// This process's event streams, which the notifier feeds.
    let events: EventHub
    /// The quotas as the `wallet` events show them.
    let views: QuotaViews
    /// Seals and opens the cursors of `changed` events and resumes.
    let cursors: CursorKeys
    /// Verifies the access token, for its expiry.
    let tokens: TokenService

    /// How often a stream writes a heartbeat comment and checks its session.
    static let heartbeatInterval: TimeInterval = 15

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.get("sync/events", use: events)
    }

    @Sendable func events(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let identity = context.identity
        let resumeFrom = try Self.resumeVersion(request, userId: identity.userId, keys: cursors)
        // The stream outlives requests: it ends with the token's validity, so the token's expiry is needed.
        guard let token = request.headers[.authorization].flatMap(AuthMiddleware.bearer),
            let verified = await tokens.verify(token), verified.identity == identity
        else { throw APIError(.unauthorized, "A valid access token is required.") }
        let stream = EventStream(
            hub: events, store: store, clock: clock, views: views, cursors: cursors, identity: identity, expiresAt: verified.expiresAt,
            resumeFrom: resumeFrom)
        return Response(
            status: .ok,
            headers: ServerSentEvents.headerFields,
            body: ResponseBody { writer in try await stream.run(&writer) })
    }

    /// The version the client has everything up to: `Last-Event-ID` (what an SSE client sends when it
    /// reconnects: the `id` of the last `changed`), else `?cursor=`; nil when neither is given. A cursor this
    /// server did not issue to this user is 400 `invalid_cursor`.
    static func resumeVersion(_ request: Request, userId: String, keys: CursorKeys) throws -> Int64? {
        let header = request.headers[.lastEventID].flatMap { $0.isEmpty ? nil : $0 }
        guard let cursor = header ?? request.uri.queryParameters["cursor"].map(String.init) else { return nil }
        guard let version = SyncCursor.decode(cursor, userId: userId, keys: keys) else {
            throw APIError(.invalidCursor, "The cursor (Last-Event-ID or 'cursor') was not issued to this user by this server.")
        }
        return version
    }
}

extension HTTPField.Name {
    /// The `id` of the last event an SSE client received, sent when it reconnects.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
    /// Tells nginx not to buffer the stream.
    static let xAccelBuffering = HTTPField.Name("X-Accel-Buffering")!
    /// `nosniff`: the content type is what it says (event streams, so that no client guesses at their first bytes).
    static let xContentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
}
