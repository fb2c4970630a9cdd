import Foundation
import Hummingbird
import NIOCore
import TallyAPI
import TallyStore

/// `POST /v1/sync/push` and `GET /v1/sync/pull`: the sync protocol of docs/sync.md. A push applies each
/// mutation above its client's `lastMutationId` exactly once, within the user's ``SyncBudget`` and push rate
/// limit; a pull returns the user's changes after a cursor, in version order, a page of at most
/// ``PageBound/defaultMaxBytes`` of data, at most ``maxPullsPerUser`` at once per user.
struct SyncController {
    let store: any TallyStorage
    let clock: any TallyClock
    /// Hashes keys for the push limit's log lines.
    let keys: CallerKeys
    /// Told of the documents and wallets a push changed.
    let notifier: any ChangeNotifier
    /// The declared collections, each user's budget, and the keys that seal pull cursors.
    let sync: SyncSetup
    /// Each user's pushes (``LimitsConfiguration/syncPushesPerUser``).
    let pushes: Throttle
    /// Each user's pulls in flight in this process (``maxPullsPerUser``).
    let pulls: CallLimiter

    /// Pulls one user may have in flight in this process, their answers being written included; one more is
    /// refused with 429. A user's devices pull one page at a time each: this covers several devices syncing at
    /// once, and bounds what one user's pulls hold in memory to this many pages.
    static let maxPullsPerUser = 4
    /// A pull's answer is written in pieces of this size, so a client that reads slowly holds the writer (and
    /// its slot) until nearly all of it is sent, while the connection buffers little more than a piece.
    static let writePiece = 64 << 10

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.post("sync/push", use: push)
        group.get("sync/pull", use: pull)
    }

    @Sendable func push(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let userId = context.identity.userId
        try pushes.acquire(userId, Door(route: "POST /v1/sync/push", now: clock.now, logger: context.logger, keys: keys))
        let body = try await RequestBody.json(request, upTo: PushRequest.maxBodyBytes)
        let push = try PushRequest(body, collections: sync.collections)
        let outcome = try await store.push(
            userId: userId, clientId: push.clientId, mutations: push.mutations, budget: sync.budget,
            now: clock.now)
        let applied = outcome.results.compactMap { result -> Int64? in
            if case .applied(let record) = result { return record.version }
            return nil
        }
        if let version = applied.max() { notifier.documentsChanged(userId: userId, version: version) }
        if outcome.charged != nil { notifier.walletChanged(userId: userId) }
        return JSONResponse.make(status: .ok, bytes: JSONWriter.bytes(of: PushBody(ids: push.mutations.map(\.id), outcome: outcome)))
    }

    @Sendable func pull(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let parameters = request.uri.queryParameters
        let userId = context.identity.userId
        var limit = 500
        if let value = parameters["limit"] {
            guard let parsed = Int(value), (1...1000).contains(parsed) else {
                throw APIError(.invalidQuery, "'limit' must be an integer from 1 to 1000.")
            }
            limit = parsed
        }
        let after = try parameters["cursor"].map { cursor -> Int64 in
            guard let version = SyncCursor.decode(String(cursor), userId: userId, keys: sync.cursors) else {
                throw APIError(.invalidCursor, "'cursor' was not issued by this server to this user.")
            }
            return version
        }
        guard pulls.acquire(userId) else {
            throw APIError(
                .rateLimited, "This user already has \(Self.maxPullsPerUser) pulls in flight; retry when one ends.",
                headers: [.retryAfter: "1"])
        }
        // Given back once the answer is written (or the connection is gone), not when the handler returns.
        let slot = CallSlot(limiter: pulls, userId: userId)
        let bytes: [UInt8]
        do {
            let page = try await store.changes(userId: userId, after: after, limit: limit)
            let body = PullBody(page: page, cursor: try SyncCursor.encode(version: page.cursor, userId: userId, keys: sync.cursors))
            var json = JSONWriter(capacity: body.capacity)
            body.write(to: &json)
            bytes = json.bytes
        } catch {
            slot.end()
            throw error
        }
        let body = ResponseBody(contentLength: bytes.count) { writer in
            defer { slot.end() }
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + Self.writePiece, bytes.count)
                try await writer.write(ByteBuffer(bytes: bytes[offset..<end]))
                offset = end
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: body)
    }
}

/// The sync API's fixed parts, shared by its routes: the declared collections, each user's budget, and the keys
/// that seal its cursors.
struct SyncSetup: Sendable {
    /// The collections the configuration declares.
    let collections: DeclaredCollections
    /// What each user may store (``SyncConfiguration/budget``).
    let budget: SyncBudget
    /// Seals the pull and range cursors with the signing keys.
    let cursors: CursorKeys
}
