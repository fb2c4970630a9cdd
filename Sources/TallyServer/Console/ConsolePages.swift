import Foundation
import Hummingbird
import Synchronization
import TallyAPI
import TallyStore

/// The console's read-only pages: overview, users (newest, and finding one), a user, the audit log.
extension ConsoleController {
    static let ledgerPage = 50
    static let listPage = 50

    @Sendable func overviewPage(_ request: Request, context: TallyRequestContext) async throws -> Response {
        try await page(request) { session in
            let now = clock.now
            samples.sample(now: now)
            let numbers = try await overview.numbers(now: now)
            let database = await databaseStatus()
            let kinds: [EntryKind] = [.grant, .purchase, .refund, .debit, .capture, .hold, .release, .expire, .premium]
            let tokens: [[String: Any]] = kinds.map { kind in
                let (today, week) = (numbers.today.total(kind), numbers.week.total(kind))
                return [
                    "label": kind.rawValue, "today": today.amount, "todayEntries": today.entries, "week": week.amount,
                    "weekEntries": week.entries,
                ]
            }
            let reasons = numbers.week.topReasons.map { ["reason": $0.reason, "entries": $0.entries, "tokens": $0.tokens] as [String: Any] }
            let (series, bounds) = samples.series(now: now)
            let rate = series.map { $0.map { $0.requests / ProcessSamples.slot } }
            let errors = series.map { $0.map { $0.requests > 0 ? $0.errors / $0.requests * 100 : 0 } }
            let p50 = series.map { $0.flatMap { ProcessSamples.quantile(0.5, $0, bounds: bounds) }.map { $0 * 1000 } }
            let p99 = series.map { $0.flatMap { ProcessSamples.quantile(0.99, $0, bounds: bounds) }.map { $0 * 1000 } }
            let charts: [[String: Any]] = [
                ("Requests per second", rate, "req/s"), ("Errors (5xx) %", errors, "%"), ("p50 latency (bucket bound)", p50, "ms"),
                ("p99 latency (bucket bound)", p99, "ms"),
            ].map { title, values, unit in
                [
                    "title": title, "svg": SVGChart.line(values, title: title, unit: unit),
                    "latest": values.last.flatMap { $0 }.map { SVGChart.format($0) + " " + unit } ?? "–",
                ]
            }
            let data: [String: Any] = [
                "users": [
                    "total": numbers.users.guests + numbers.users.accounts, "guests": Self.count(numbers.users.guests, "guest"),
                    "accounts": Self.count(numbers.users.accounts, "account"), "countedAt": Self.format(numbers.usersCountedAt, zone: nil),
                ],
                "today": ["newUsers": numbers.today.newUsers], "week": ["newUsers": numbers.week.newUsers],
                "database": database, "tokens": tokens, "reasons": reasons, "hasReasons": !reasons.isEmpty,
                "tokensChart": SVGChart.bars(
                    kinds.map { (label: $0.rawValue, value: Double(numbers.week.total($0).amount)) }, title: "Tokens by kind, 7 days"),
                "reasonsChart": SVGChart.bars(
                    numbers.week.topReasons.map { (label: $0.reason, value: Double($0.tokens)) }, title: "Tokens spent by action, 7 days"),
                "charts": charts,
            ]
            return render("overview", title: "Overview", session: session, notice: Self.notice(request), data)
        }
    }

    private func databaseStatus() async -> [String: Any] {
        let kind = setup.databaseKind
        let start = ContinuousClock.now
        do {
            try await store.ping()
            let elapsed = ContinuousClock.now - start
            let millis = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
            return ["status": "up", "css": "ok", "kind": kind, "millis": String(format: "%.1f", millis)]
        } catch {
            return ["status": "down", "css": "bad", "kind": kind, "millis": "–"]
        }
    }

    @Sendable func usersPage(_ request: Request, context: TallyRequestContext) async throws -> Response {
        try await page(request) { session in
            let cursor = try request.uri.queryParameters["after"].map { try Self.userCursor(String($0)) }
            let now = clock.now
            let users = try await store.newestUsers(after: cursor, limit: Self.listPage + 1)
            let shown = users.prefix(Self.listPage)
            var data: [String: Any] = [
                "rows": shown.map { user -> [String: Any] in
                    [
                        "id": user.id, "label": user.email ?? user.id, "kind": Self.kind(user),
                        "created": Self.format(user.createdAt, zone: nil),
                        "premium": user.combinedPremiumUntil.flatMap { $0 > now ? Self.format($0, zone: nil) : nil } ?? "–",
                    ]
                },
                "first": cursor != nil,
            ]
            if users.count > Self.listPage, let last = shown.last { data["next"] = UserCursor(createdAt: last.createdAt, id: last.id).token }
            return render("users", title: "Users", session: session, notice: Self.notice(request), data)
        }
    }

    @Sendable func find(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (_, session, form) = try await authorizedPost(request, context: context)
        let query = (form["q"] ?? "").trimmingCharacters(in: .whitespaces)
        var found: UserRecord?
        if UUID(uuidString: query) != nil {
            found = try await store.user(id: query.lowercased())
        }
        if found == nil, query.contains("@"), let email = try? Validate.accountEmail(query) {
            found = try await store.user(email: email)
        }
        if found == nil, query.count == 64, query.allSatisfy(\.isHexDigit) {
            found = try await store.user(installation: query.lowercased())
        }
        if found == nil, !query.isEmpty, query.count <= 200 {
            found = try await store.user(transactionId: query)
        }
        if found == nil, ConsolePurchases.isOrderId(query) {
            found = try await purchases.user(orderId: query)
        }
        guard let found else {
            return render("message", title: "Not found", session: session, status: .notFound,
                ["heading": "No user found", "text": "Nothing matches that id, email, transaction id, order id or device hash.", "back": "/console/users"])
        }
        return Self.redirect("/console/users/\(found.id)")
    }

    @Sendable func userPage(_ request: Request, context: TallyRequestContext) async throws -> Response {
        try await page(request) { session in
            let userId = try AdminController.userId(context)
            let now = clock.now
            let before = try request.uri.queryParameters["before"].map { value -> Int64 in
                guard let id = Int64(value), id > 0 else { throw APIError(.invalidCursor, "'before' must be an entry id.") }
                return id
            }
            guard let state = try await store.accountState(userId: userId, now: now) else {
                throw APIError(.notFound, "No such user.")
            }
            async let entries = store.entries(userId: userId, before: before, limit: Self.ledgerPage + 1)
            async let holds = store.openHolds(userId: userId, limit: 50)
            async let sessions = store.sessions(userId: userId, limit: 20)
            async let collections = store.collectionStats(userId: userId)
            async let purchases = store.purchases(userId: userId, after: nil, limit: 20, now: now)
            async let installation = store.installation(userId: userId)
            async let attested = store.hasAttestedKey(userId: userId)
            async let unattested = store.unattestedSpends(userId: userId)
            let user = state.user
            let zone = TimeZone(identifier: user.timezone)
            let (ledger, open, sessionList, stats, bought, device) =
                try await (entries, holds, sessions, collections, purchases, installation)
            let shown = ledger.prefix(Self.ledgerPage)
            // As /v1/me says it: premium until a time to come, else none (ended then).
            var premium = user.combinedPremiumUntil.map { until in
                until > now ? "until " + Self.format(until, zone: zone) : "not premium (ended " + Self.format(until, zone: zone) + ")"
            } ?? "not premium"
            if user.premiumUntil != nil || user.purchasedPremiumUntil != nil {
                premium += " (admin: \(user.premiumUntil.map { Self.format($0, zone: nil) } ?? "–"), bought: \(user.purchasedPremiumUntil.map { Self.format($0, zone: nil) } ?? "–"))"
            }
            var profile: [String: Any] = [
                "id": user.id, "label": user.email ?? "Guest \(user.id.prefix(8))", "kind": Self.kind(user), "email": user.email ?? "–",
                "timezone": user.timezone, "created": Self.format(user.createdAt, zone: zone), "premium": premium,
            ]
            if let device { profile["installation"] = device }
            if setup.showsAttestation {
                profile["appAttest"] = try await attested ? "attested key" : "no attested key"
            }
            if let flag = try await unattested {
                profile["unattested"] = "\(flag.count), the last \(Self.format(flag.lastAt, zone: zone)) (\(flag.lastReason))"
            }
            if let merged = user.mergedInto { profile["mergedInto"] = merged }
            var data: [String: Any] = [
                "profile": profile,
                "wallet": ["balance": state.wallet.balance, "held": state.wallet.held, "available": state.wallet.available],
                "quotas": tools.views.quotas(for: state).map { quota -> [String: Any] in
                    [
                        "name": quota.name, "used": quota.used, "limit": quota.unlimited ? "unlimited" : String(quota.limit),
                        "resets": Self.format(quota.resetsAt, zone: zone),
                    ]
                },
                "entries": shown.map { entry -> [String: Any] in
                    [
                        "id": entry.id, "when": Self.format(entry.createdAt, zone: nil), "kind": entry.kind.rawValue, "amount": entry.amount,
                        "held": entry.heldChange, "balance": entry.balanceAfter,
                        "reason": [entry.reason, entry.reference].compactMap { $0 }.joined(separator: " · "),
                        "sandbox": entry.reference != nil && entry.reason?.hasPrefix("Sandbox ") == true,
                    ]
                },
                "ledgerFirst": before != nil,
                "holds": open.map { ["id": $0.id, "amount": $0.amount, "expires": Self.format($0.expiresAt, zone: zone)] as [String: Any] },
                "sessions": sessionList.map { session -> [String: Any] in
                    [
                        "created": Self.format(session.createdAt, zone: zone),
                        "state": session.revokedAt.map { "revoked " + Self.format($0, zone: nil) } ?? "live",
                    ]
                },
                "collections": stats.map { stat -> [String: Any] in
                    [
                        "collection": stat.collection, "documents": Self.count(stat.documents, "document"),
                        "bytes": Self.count(Int(clamping: stat.bytes), "byte"),
                        "lastChange": Self.format(stat.lastChange, zone: zone),
                    ]
                },
                "purchases": bought.map { purchase -> [String: Any] in
                    [
                        "transactionId": purchase.transactionId, "productId": purchase.productId,
                        "environment": purchase.environment, "sandbox": purchase.environment == VerifiedTransaction.sandbox,
                        "bought": Self.format(purchase.purchasedAt, zone: zone), "status": purchase.status.rawValue,
                        "until": purchase.premiumUntil.map { Self.format($0, zone: zone) } ?? "–",
                        "tokens": purchase.tokens.map(String.init) ?? "–",
                    ]
                },
                "hasPurchases": !bought.isEmpty,
                "idempotency": Secrets.random(bytes: 16),
            ]
            if ledger.count > Self.ledgerPage, let last = shown.last { data["ledgerNext"] = last.id }
            return render(
                "user", title: user.email ?? "Guest", session: session, notice: Self.notice(request), zone: true, data)
        }
    }

    /// One purchase's timeline (``ConsolePurchases/timeline(_:)``).
    @Sendable func purchasePage(_ request: Request, context: TallyRequestContext) async throws -> Response {
        try await page(request) { session in
            guard let id = context.parameters.get("transactionId"), !id.isEmpty, id.count <= 64,
                let data = try await purchases.timeline(id)
            else { throw APIError(.notFound, "No account holds that purchase.") }
            return render("purchase", title: "Purchase", session: session, data)
        }
    }

    @Sendable func auditPage(_ request: Request, context: TallyRequestContext) async throws -> Response {
        try await page(request) { session in
            let before = try request.uri.queryParameters["before"].map { value -> Int64 in
                guard let id = Int64(value), id > 0 else { throw APIError(.invalidCursor, "'before' must be an audit row id.") }
                return id
            }
            let rows = try await store.auditEntries(before: before, limit: Self.listPage + 1)
            let shown = rows.prefix(Self.listPage)
            var data: [String: Any] = [
                "rows": shown.map { row -> [String: Any] in
                    var fields: [String: Any] = [
                        "id": row.id, "when": Self.format(row.at, zone: nil), "operator": row.operatorSession, "action": row.action,
                        "before": row.before ?? "", "after": row.after ?? "",
                    ]
                    if let user = row.userId { fields["userId"] = user }
                    return fields
                },
                "first": before != nil,
            ]
            if rows.count > Self.listPage, let last = shown.last { data["next"] = last.id }
            return render("audit", title: "Audit", session: session, data)
        }
    }

    // MARK: Helpers

    static func kind(_ user: UserRecord) -> String {
        if user.mergedInto != nil { return "merged guest" }
        return user.isGuest ? "guest" : (user.email != nil ? "account (email)" : "account (Apple)")
    }

    /// `1 account`, `2 accounts`, `0 accounts`.
    static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }

    /// `2027-01-15 08:00 UTC`, and the same instant in `zone` beside it when given and not UTC.
    static func format(_ date: Date, zone: TimeZone?) -> String {
        let utc = stamp(date, TimeZone(identifier: "UTC")!) + " UTC"
        guard let zone, zone.identifier != "UTC", zone.identifier != "GMT" else { return utc }
        return utc + " (" + stamp(date, zone) + " " + zone.identifier + ")"
    }

    private static func stamp(_ date: Date, _ zone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        return String(format: "%04d-%02d-%02d %02d:%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0)
    }

    static func userCursor(_ text: String) throws -> UserCursor {
        guard let cursor = UserCursor(token: text) else { throw APIError(.invalidCursor, "'after' was not issued by this console.") }
        return cursor
    }

    /// The notice an action's redirect names (`?done=grant`): fixed texts, never anything from the request.
    static func notice(_ request: Request) -> String? {
        switch request.uri.queryParameters["done"].map(String.init) {
        case "grant": "Granted."
        case "granted-before": "That grant was already made (the same form submitted again): nothing more was granted."
        case "premium": "Premium changed."
        case "revoked": "Every session revoked."
        case "deleted": "Account deleted."
        default: nil
        }
    }
}
