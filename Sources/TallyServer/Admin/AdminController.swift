import Foundation
import Hummingbird
import Logging
import Synchronization
import TallyAPI
import TallyStore

/// `/admin/v1/*`: called by the app's own backend with `Authorization: Bearer $TALLY_ADMIN_KEY`.
struct AdminController {
    /// The store, clock, quota views, command runner and audit log.
    let tools: OperatorTools
    /// The key check, shared with the console's sign-in (one count of wrong keys per address).
    let keyCheck: AdminKeyMiddleware
    /// The App Store routes, with an `appStore:` section.
    let appStore: AppStoreAdminController?

    private var store: any TallyStorage { tools.store }
    private var clock: any TallyClock { tools.clock }

    func addRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.add(middleware: keyCheck)
        group.get("audit", use: audit)
        group.get("users/:userId", use: user)
        group.get("users/:userId/entries", use: entries)
        group.post("users/:userId/grants", use: grant)
        group.put("users/:userId/premium", use: premium)
        group.get("users/:userId/purchases", use: purchases)
        group.get("purchases/unclaimed", use: unclaimedPurchases)
        appStore?.addRoutes(to: group)
    }

    /// A user's App Store purchases, newest first (as `GET /v1/purchases` shows them to the user).
    @Sendable func purchases(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let userId = try Self.userId(context)
        guard try await store.user(id: userId) != nil else { throw APIError(.notFound, "No such user.") }
        let (cursor, limit) = try PurchasesController.page(request)
        let records = try await store.purchases(userId: userId, after: cursor, limit: limit + 1, now: clock.now)
        return JSONResponse.make(body: PurchasesController.page(records, limit: limit))
    }

    /// The App Store purchases no account holds yet (a notification whose app account token named no account),
    /// newest first: credited to the first account that redeems one.
    @Sendable func unclaimedPurchases(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (cursor, limit) = try PurchasesController.page(request)
        let records = try await store.unclaimedPurchases(after: cursor, limit: limit + 1, now: clock.now)
        return JSONResponse.make(body: PurchasesController.page(records, limit: limit))
    }

    /// The audit log (console and admin API actions), newest first, cursor-paged like the ledger.
    @Sendable func audit(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let console = store
        let limit = try WalletController.limit(request.uri.queryParameters["limit"].map(String.init))
        let before = try request.uri.queryParameters["cursor"].map { try Cursor.decode(String($0)) }
        let records = try await console.auditEntries(before: before, limit: limit + 1)
        let page = records.prefix(limit)
        let next = records.count > limit ? page.last.map { Cursor.encode($0.id) } : nil
        return JSONResponse.make(body: Page(items: page.map(AuditView.init), nextCursor: next))
    }

    /// Appends an audit row for an admin API action (operator `admin-api`); a store without an audit log skips it.
    private func audit(_ action: String, _ userId: String, before: String, after: String) async throws {
        try await tools.audit.append(
            NewAuditEntry(at: clock.now, operatorSession: "admin-api", action: action, userId: userId, before: before, after: after))
    }

    @Sendable func user(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let userId = try Self.userId(context)
        guard let state = try await store.accountState(userId: userId, now: clock.now) else {
            throw APIError(.notFound, "No such user.")
        }
        return JSONResponse.make(
            body: AdminUserView(me: Me(state.user), wallet: Wallet(state.wallet), quotas: tools.views.quotas(for: state)))
    }

    @Sendable func entries(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let userId = try Self.userId(context)
        guard try await store.user(id: userId) != nil else { throw APIError(.notFound, "No such user.") }
        return try await WalletController.entriesPage(of: userId, request: request, store: store)
    }

    @Sendable func grant(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let userId = try Self.userId(context)
        let body = try await JSONBody<GrantRequest>.read(request, context: context).value
        let amount = try Validate.amount(body.amount)
        let reason = try Validate.text(body.reason, field: "reason", length: 1...200)
        let rendered = Rendered<GrantResponse>()
        let response = try await tools.runner.run(
            .grant(userId: userId, amount: amount, reason: reason), request: request, scope: "admin",
            requestFingerprint: CommandRunner.fingerprint(request, body: body), status: .created
        ) { outcome in
            guard let entry = outcome.entry else { throw APIError(.internalError, "Internal error.") }
            return rendered.keep(GrantResponse(entry: LedgerEntry(entry), wallet: Wallet(outcome.state.wallet)))
        }
        // Every grant is a security event (none of these values is a secret); a replay granted nothing.
        if response.headers[.idempotentReplayed] == nil {
            context.logger.notice(
                "admin grant",
                metadata: ["tally.user": .string(userId), "tally.amount": "\(amount)", "tally.reason": .string(reason)])
            let after = rendered.value?.wallet.balance
            try await audit(
                "grant", userId, before: "balance=\(after.map { String($0 - amount) } ?? "?")",
                after: "balance=\(after.map(String.init) ?? "?") (+\(amount): \(reason))")
        }
        return response
    }

    @Sendable func premium(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let userId = try Self.userId(context)
        let body = try await JSONBody<PremiumRequest>.read(request, context: context).value
        let before = try await store.user(id: userId)
        let rendered = Rendered<Me>()
        let response = try await tools.runner.run(
            .setPremium(userId: userId, until: body.until.map { Date(millis: $0.millis) }), request: request,
            scope: "admin", requestFingerprint: CommandRunner.fingerprint(request, body: body)
        ) { rendered.keep(Me($0.state.user)) }
        if response.headers[.idempotentReplayed] == nil, let before {
            let format = { (date: Date?) in date.map { ISO8601DateFormatter().string(from: $0) } ?? "-" }
            try await audit(
                "premium", userId, before: "premium_until=\(format(before.premiumUntil))",
                after: "premium_until=\(format(body.until.map { Date(millis: $0.millis) }))")
        }
        return response
    }

    static func userId(_ context: TallyRequestContext) throws -> String {
        guard let id = context.parameters.get("userId"), UUID(uuidString: id) != nil else {
            throw APIError(.notFound, "No such user.")
        }
        return id.lowercased()
    }
}

/// What a store command's render closure made, kept for the audit row written after the command (set only when
/// the command ran: a replay renders nothing).
final class Rendered<Value: Sendable>: Sendable {
    private let kept = Mutex<Value?>(nil)

    /// Keeps `value` and returns it.
    func keep(_ value: Value) -> Value {
        kept.withLock { $0 = value }
        return value
    }

    var value: Value? { kept.withLock { $0 } }
}

/// An audit row as `GET /admin/v1/audit` shows it.
struct AuditView: Codable, Hashable, Sendable {
    var id: Int64
    var at: Date
    var operatorSession: String
    var action: String
    var userId: String?
    var before: String?
    var after: String?

    init(_ entry: AuditEntry) {
        (id, at, operatorSession, action, userId, before, after) =
            (entry.id, entry.at, entry.operatorSession, entry.action, entry.userId, entry.before, entry.after)
    }
}

/// An account as the admin API shows it.
struct AdminUserView: Codable, Sendable {
    var me: Me
    var wallet: Wallet
    var quotas: [Quota]
}

/// Admits only requests bearing the admin key, compared in constant time. Wrong keys are counted per client
/// address: beyond ``LimitsConfiguration/adminFailuresPerAddress`` the address gets 429, even with the right
/// key, until its failures age out; each address's wrong keys are logged once per period.
struct AdminKeyMiddleware: RouterMiddleware {
    typealias Context = TallyRequestContext
    let adminKey: String
    let clock: any TallyClock
    /// Client addresses and keyed hashes, for the count of wrong keys and its log lines.
    let keys: CallerKeys
    /// Wrong keys per client address (per process).
    let failures: Throttle
    /// One log line per address and period for wrong keys.
    let failureLog: RateLimiter

    /// Admits `adminKey`, counting wrong keys per address (named by `keys`) against `failuresPerAddress`.
    init(adminKey: String, clock: any TallyClock, keys: CallerKeys, failuresPerAddress rate: RateLimit) {
        self.adminKey = adminKey
        self.clock = clock
        self.keys = keys
        self.failures = Throttle("admin key failures per address", rate)
        self.failureLog = RateLimiter(RateLimit(1, per: rate.period))
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try verify(request.headers[.authorization].flatMap(AuthMiddleware.bearer), request: request, context: context)
        return try await next(request, context)
    }

    /// Checks a presented key (a bearer token, or the console's sign-in form): 429 while the client's address is over
    /// its wrong keys, else 401 for a missing or wrong key, counted against the address.
    func verify(_ presented: String?, request: Request, context: Context) throws {
        let door = Door(
            route: "\(request.method) \(request.uri.path)", now: clock.now, logger: context.logger, keys: keys)
        let address = keys.clientAddress(request, peer: context.peer)
        try failures.check(address, door)
        guard !adminKey.isEmpty, let token = presented, Secrets.constantTimeEqual(token, adminKey)
        else {
            failures.record(address, door)
            if failureLog.acquire(address, now: door.now) == .allowed {
                context.logger.warning(
                    "admin key rejected", metadata: ["tally.route": .string(door.route), "tally.key": .string(keys.logKey(address))])
            }
            throw APIError(.unauthorized, "The admin key is missing or wrong.")
        }
    }
}
