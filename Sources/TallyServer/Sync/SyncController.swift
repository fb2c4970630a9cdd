import Foundation
import Hummingbird
import TallyAPI
import TallyStore

/// `POST /v1/sync/push` and `GET /v1/sync/pull`: the sync protocol of docs/sync.md. A push applies each
/// mutation above its client's `lastMutationId` exactly once; a pull returns the user's changes after a
/// cursor, in version order.
struct SyncController {
    let services: TallyServices

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.post("sync/push", use: push)
        group.get("sync/pull", use: pull)
    }

    @Sendable func push(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await RequestBody.json(request, upTo: PushRequest.maxBodyBytes)
        let push = try PushRequest(body, collections: services.collections)
        let userId = context.identity.userId
        let outcome = try await services.storeCall {
            try await services.store.push(userId: userId, clientId: push.clientId, mutations: push.mutations, now: services.clock.now)
        }
        let applied = outcome.results.compactMap { result -> Int64? in
            if case .applied(let record) = result { return record.version }
            return nil
        }
        if let version = applied.max() { services.notifier.documentsChanged(userId: userId, version: version) }
        if outcome.charged != nil { services.notifier.walletChanged(userId: userId) }
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
            guard let version = SyncCursor.decode(String(cursor), userId: userId) else {
                throw APIError(.invalidCursor, "'cursor' was not issued by this server to this user.")
            }
            return version
        }
        let page = try await services.storeCall { try await services.store.changes(userId: userId, after: after, limit: limit) }
        let body = PullBody(page: page, cursor: SyncCursor.encode(version: page.cursor, userId: userId))
        var json = JSONWriter(capacity: body.capacity)
        body.write(to: &json)
        return JSONResponse.make(status: .ok, bytes: json.bytes)
    }
}
