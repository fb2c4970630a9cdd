import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyStore

/// `/v1/wallet`, its ledger entries and its holds.
struct WalletController {
    let store: any TallyStorage
    let clock: any TallyClock
    /// Runs the hold commands under their idempotency keys.
    let runner: CommandRunner

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.get("wallet", use: wallet)
        group.get("wallet/entries", use: entries)
        group.post("wallet/holds", use: createHold)
        group.get("wallet/holds/:holdId", use: hold)
        group.post("wallet/holds/:holdId/capture", use: capture)
        group.delete("wallet/holds/:holdId", use: release)
    }

    @Sendable func wallet(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        guard let wallet = try await store.wallet(userId: context.identity.userId, now: clock.now) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        let etag = "\"\(wallet.version)\""
        if let match = request.headers[.ifNoneMatch], Self.matches(match, etag: etag) {
            return Response(status: .notModified, headers: [.eTag: etag, .cacheControl: "private, no-cache"])
        }
        return JSONResponse.make(body: Wallet(wallet), headers: [.eTag: etag, .cacheControl: "private, no-cache"])
    }

    @Sendable func entries(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        try await Self.entriesPage(of: context.identity.userId, request: request, store: store)
    }

    /// One page of an account's entries, as `limit` and `cursor` in the query ask (shared with the admin API).
    static func entriesPage(of userId: String, request: Request, store: any TallyStorage) async throws -> Response {
        let limit = try limit(request.uri.queryParameters["limit"].map(String.init))
        let before = try request.uri.queryParameters["cursor"].map { try Cursor.decode(String($0)) }
        let records = try await store.entries(userId: userId, before: before, limit: limit + 1)
        let page = records.prefix(limit)
        let next = records.count > limit ? page.last.map { Cursor.encode($0.id) } : nil
        return JSONResponse.make(body: Page(items: page.map(LedgerEntry.init), nextCursor: next))
    }

    @Sendable func createHold(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<CreateHoldRequest>.read(request, context: context).value
        let amount = try Validate.amount(body.amount)
        guard (1...Limits.maxHoldSeconds).contains(body.ttlSeconds) else {
            throw APIError(.invalidField, "'ttlSeconds' must be between 1 and \(Limits.maxHoldSeconds).")
        }
        let userId = context.identity.userId
        let now = clock.now
        let command = Command.createHold(
            userId: userId, holdId: UUID().uuidString.lowercased(), amount: amount,
            expiresAt: now.addingTimeInterval(TimeInterval(body.ttlSeconds)))
        return try await runner.run(
            command, request: request, scope: userId, requestFingerprint: CommandRunner.fingerprint(request, body: body),
            status: .created
        ) { outcome in try Self.holdView(outcome) }
    }

    @Sendable func hold(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let holdId = try Self.holdId(context)
        let userId = context.identity.userId
        guard let state = try await store.accountState(userId: userId, now: clock.now),
            let hold = try await store.hold(id: holdId, userId: userId)
        else { throw APIError(.notFound, "No such hold.") }
        return JSONResponse.make(body: Hold(hold, wallet: state.wallet))
    }

    @Sendable func capture(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let holdId = try Self.holdId(context)
        let body = try await JSONBody<CaptureHoldRequest>.read(request, context: context).value
        let amount = try Validate.amount(body.amount, allowZero: true)
        let userId = context.identity.userId
        return try await runner.run(
            .captureHold(userId: userId, holdId: holdId, amount: amount), request: request, scope: userId,
            requestFingerprint: CommandRunner.fingerprint(request, body: body)
        ) { outcome in try Self.holdView(outcome) }
    }

    @Sendable func release(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let holdId = try Self.holdId(context)
        let userId = context.identity.userId
        return try await runner.run(
            .releaseHold(userId: userId, holdId: holdId), request: request, scope: userId,
            requestFingerprint: CommandRunner.fingerprint(request, body: String?.none)
        ) { outcome in try Self.holdView(outcome) }
    }

    static func holdView(_ outcome: CommandOutcome) throws -> Hold {
        guard let hold = outcome.hold else { throw APIError(.internalError, "Internal error.") }
        return Hold(hold, wallet: outcome.state.wallet)
    }

    static func holdId(_ context: AuthenticatedContext) throws -> String {
        guard let id = context.parameters.get("holdId"), UUID(uuidString: id) != nil else {
            throw APIError(.notFound, "No such hold.")
        }
        return id.lowercased()
    }

    static func limit(_ value: String?) throws -> Int {
        guard let value else { return 20 }
        guard let limit = Int(value), (1...100).contains(limit) else {
            throw APIError(.invalidQuery, "'limit' must be an integer from 1 to 100.")
        }
        return limit
    }

    /// `If-None-Match` against an ETag: a list of tags, `*`, weak or strong.
    static func matches(_ header: String, etag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let tag = candidate.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == etag || tag == "W/\(etag)"
        }
    }
}

/// Opaque pagination cursors: base64url of the last entry id seen.
enum Cursor {
    static func encode(_ id: Int64) -> String { Secrets.base64URL(Data("e\(id)".utf8)) }

    static func decode(_ cursor: String) throws -> Int64 {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard cursor.utf8.count <= 64, let data = Data(base64Encoded: base64),
            let text = String(data: data, encoding: .utf8), text.hasPrefix("e"),
            let id = Int64(text.dropFirst()), id > 0
        else { throw APIError(.invalidCursor, "'cursor' was not issued by this server.") }
        return id
    }
}
