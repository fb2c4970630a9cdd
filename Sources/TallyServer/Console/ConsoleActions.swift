import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyStore

/// The console's actions: each a POST of a form with the session's CSRF token and a confirmation, answered with a
/// redirect to the user's page (so a reload does not post again), and written to the audit log.
extension ConsoleController {
    /// Grants tokens under the form's idempotency key (scope `console`): a double submit replays the first grant.
    /// The grant is one store transaction; its audit row follows it (``ConsoleStore/appendAudit(_:)``) unless replayed.
    @Sendable func grant(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (_, session, form) = try await authorizedPost(request, context: context)
        let userId = try AdminController.userId(context)
        try Self.confirmed(form)
        guard let amount = form["amount"].flatMap({ Int64($0) }) else { throw APIError(.invalidField, "'amount' must be a whole number.") }
        let validAmount = try Validate.amount(amount)
        let reason = try Validate.text(form["reason"] ?? "", field: "reason", length: 1...200)
        guard let key = form["idempotency"], (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw APIError(.invalidField, "The form's idempotency key is missing: load the page again.")
        }
        let fingerprint = Secrets.sha256("console grant\u{0}\(userId)\u{0}\(validAmount)\u{0}\(reason)")
        let idempotency = IdempotencyKey(scope: "console", key: key, fingerprint: fingerprint)
        let claim = "console\u{0}\(key)"
        guard tools.runner.inFlight.claim(claim) else {
            return Self.redirect("/console/users/\(userId)?done=granted-before")
        }
        defer { tools.runner.inFlight.release(claim) }
        let execution = try await store.execute(
            .grant(userId: userId, amount: validAmount, reason: reason), idempotency: idempotency, now: clock.now
        ) { outcome in
            let after = outcome.entry?.balanceAfter ?? outcome.state.wallet.balance
            return StoredResponse(status: 201, body: Array("\(after - validAmount) \(after)".utf8))
        }
        guard case .executed(let stored) = execution else {
            return Self.redirect("/console/users/\(userId)?done=granted-before")
        }
        notifier.walletChanged(userId: userId)
        let balances = String(decoding: stored.body, as: UTF8.self).split(separator: " ")
        try await audit(
            session.label, "grant", userId, before: "balance=\(balances.first ?? "?")",
            after: "balance=\(balances.last ?? "?") (+\(validAmount): \(reason))")
        context.logger.notice(
            "console grant", metadata: ["tally.user": .string(userId), "tally.amount": "\(validAmount)", "tally.operator": .string(session.label)])
        return Self.redirect("/console/users/\(userId)?done=grant")
    }

    /// Sets the admin's premium to the end of the chosen UTC day, or ends it (`op=end`).
    @Sendable func premium(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (_, session, form) = try await authorizedPost(request, context: context)
        let userId = try AdminController.userId(context)
        try Self.confirmed(form)
        let now = clock.now
        var until: Date?
        if form["op"] != "end" {
            guard let day = form["until"].flatMap(Self.day), day.addingTimeInterval(86_400) > now else {
                throw APIError(.invalidField, "'until' must be a day (YYYY-MM-DD), today or later.")
            }
            until = day.addingTimeInterval(86_400)
        }
        guard let before = try await store.user(id: userId) else { throw APIError(.notFound, "No such user.") }
        let execution = try await store.execute(.setPremium(userId: userId, until: until), idempotency: nil, now: now) { outcome in
            StoredResponse(status: 200, body: Array((outcome.state.user.premiumUntil.map { "\($0.millis)" } ?? "-").utf8))
        }
        notifier.walletChanged(userId: userId)
        let after = String(decoding: execution.response.body, as: UTF8.self)
        try await audit(
            session.label, "premium", userId, before: "premium_until=\(before.premiumUntil.map { ISO8601DateFormatter().string(from: $0) } ?? "-")",
            after: "premium_until=\(Int64(after).map { ISO8601DateFormatter().string(from: Date(millis: $0)) } ?? "-")")
        return Self.redirect("/console/users/\(userId)?done=premium")
    }

    /// Revokes every live session of the user (their tokens get 401 from now on, on every process) with its audit row in
    /// the same transaction.
    @Sendable func revokeSessions(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (_, session, form) = try await authorizedPost(request, context: context)
        let userId = try AdminController.userId(context)
        try Self.confirmed(form)
        guard try await store.user(id: userId) != nil else { throw APIError(.notFound, "No such user.") }
        let live = try await store.sessions(userId: userId, limit: 1000).filter { $0.revokedAt == nil }.count
        let revoked = try await store.revokeSessions(
            userId: userId,
            audit: NewAuditEntry(
                at: clock.now, operatorSession: session.label, action: "revoke_sessions", userId: userId,
                before: "live_sessions=\(live)", after: "live_sessions=0"))
        userSessions.end(sessionIds: revoked, of: userId)
        context.logger.notice("console revoked sessions", metadata: ["tally.user": .string(userId), "tally.operator": .string(session.label)])
        return Self.redirect("/console/users/\(userId)?done=revoked")
    }

    /// Deletes the account once its id is typed into the form, with its audit row in the same transaction; an Apple
    /// refresh token is revoked at Apple first, as at the user's own deletion.
    @Sendable func delete(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (_, session, form) = try await authorizedPost(request, context: context)
        let userId = try AdminController.userId(context)
        guard form["typed"]?.trimmingCharacters(in: .whitespaces).lowercased() == userId else {
            throw APIError(.invalidField, "Type the user's id exactly to delete the account.")
        }
        guard let wallet = try await store.wallet(userId: userId, now: clock.now) else {
            throw APIError(.notFound, "No such user.")
        }
        await appleTokens.revoke(of: userId, logger: context.logger)
        let deleted = try await store.deleteUser(
            id: userId,
            audit: NewAuditEntry(
                at: clock.now, operatorSession: session.label, action: "delete_user", userId: userId,
                before: "balance=\(wallet.balance)", after: "deleted"))
        guard deleted else { throw APIError(.notFound, "No such user.") }
        userSessions.accountDeleted(userId)
        context.logger.notice("console deleted account", metadata: ["tally.user": .string(userId), "tally.operator": .string(session.label)])
        return Self.redirect("/console/users?done=deleted")
    }

    private func audit(_ operatorSession: String, _ action: String, _ userId: String, before: String, after: String) async throws {
        try await tools.audit.append(
            NewAuditEntry(
                at: clock.now, operatorSession: operatorSession, action: action, userId: userId, before: before, after: after))
    }

    static func confirmed(_ form: ConsoleForm) throws {
        guard form["confirm"] == "yes" else { throw APIError(.invalidField, "Tick the confirmation first.") }
    }

    /// `YYYY-MM-DD` as that day's midnight in UTC: a day of the calendar (not `2027-02-30`, which the calendar
    /// would move to March) whose end is still in the year 9999, what RFC 3339 can write back.
    static func day(_ text: String) -> Date? {
        guard text.utf8.count == 10, let day = RFC3339.date(from: text + "T00:00:00Z"),
            day.addingTimeInterval(86_400).millis <= Date.writableMillis.upperBound
        else { return nil }
        return day
    }
}
