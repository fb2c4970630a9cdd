import Foundation
import GRDB
import PostgresNIO
import TallyStore
import Testing

@testable import TallyPostgres
@testable import TallySQLite

/// The operator's console's reads and the audit log (`ConsoleStore`), against every store.
@Suite("Console conformance", .timeLimit(.minutes(3)))
struct ConsoleConformanceTests {
    static func console(_ f: Fixture) throws -> any ConsoleStore { f.store }

    static func audit(_ f: Fixture, _ action: String, _ userId: String?, before: String? = nil, after: String? = nil) -> NewAuditEntry {
        NewAuditEntry(at: f.now, operatorSession: "op-1", action: action, userId: userId, before: before, after: after)
    }

    @Test("audit: appended with its fields, paged newest first; an update, a delete (and a truncate) refused", arguments: StoreKind.allCases)
    func auditLog(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let console = try Self.console(f)
            var appended: [AuditEntry] = []
            for action in ["grant", "premium", "revoke_sessions"] {
                appended.append(try await console.appendAudit(Self.audit(f, action, "u-1", before: "balance=0", after: "balance=5")))
                f.clock.advance(by: 1)
            }
            #expect(appended.map(\.action) == ["grant", "premium", "revoke_sessions"], "[\(kind)]")
            #expect(appended[0].at == f.now.addingTimeInterval(-3) && appended[0].operatorSession == "op-1", "[\(kind)]")
            #expect(appended[0].before == "balance=0" && appended[0].after == "balance=5" && appended[0].userId == "u-1", "[\(kind)]")
            let first = try await console.auditEntries(before: nil, limit: 2)
            #expect(first == [appended[2], appended[1]], "[\(kind)]")
            let second = try await console.auditEntries(before: first.last?.id, limit: 2)
            #expect(second == [appended[0]], "[\(kind)]")
            await #expect(throws: (any Error).self, "[\(kind)] an unknown action") {
                try await console.appendAudit(Self.audit(f, "drop_tables", nil))
            }

            let id = appended[0].id
            switch kind {
            case .sqlite:
                let store = try #require(f.store as? SQLiteStore)
                for sql in ["UPDATE console_audit SET after = 'x' WHERE id = ?", "DELETE FROM console_audit WHERE id = ?"] {
                    #expect(throws: (any Error).self, "[\(kind)] \(sql)") {
                        try store.pool.write { db in try db.execute(sql: sql, arguments: [id]) }
                    }
                }
            case .postgres:
                let store = try #require(f.store as? PostgresStore)
                await #expect(throws: (any Error).self, "[\(kind)] update") {
                    try await store.rows("UPDATE console_audit SET after = 'x' WHERE id = \(id)")
                }
                await #expect(throws: (any Error).self, "[\(kind)] delete") {
                    try await store.rows("DELETE FROM console_audit WHERE id = \(id)")
                }
                await #expect(throws: (any Error).self, "[\(kind)] truncate") { try await store.rows("TRUNCATE console_audit") }
            }
            #expect(try await console.auditEntries(before: nil, limit: 10) == appended.reversed(), "[\(kind)] unchanged")

            // A group: appended in order in one transaction; one bad row appends none of them.
            try await console.appendAudits((1...3).map { Self.audit(f, "grant", "u-\($0)", before: "balance=0", after: "balance=\($0)") })
            let group = try await console.auditEntries(before: nil, limit: 3)
            #expect(group.map(\.userId) == ["u-3", "u-2", "u-1"] && group.allSatisfy { $0.id > appended[2].id }, "[\(kind)]")
            await #expect(throws: (any Error).self, "[\(kind)] a group with an unknown action") {
                try await console.appendAudits([Self.audit(f, "grant", "u-4"), Self.audit(f, "drop_tables", nil)])
            }
            #expect(try await console.auditEntries(before: nil, limit: 1) == [group[0]], "[\(kind)] nothing of the failed group")
        }
    }

    @Test("find: by email, installation and App Store transaction; newest users paged by cursor", arguments: StoreKind.allCases)
    func find(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let console = try Self.console(f)
            let device = randomId("dev-")
            let guest = try await f.signIn(device: device).user
            f.clock.advance(by: 1)
            let linked = try await f.signIn().user
            let email = randomId("e") + "@example.com"
            _ = try await f.store.linkCredentials(userId: linked.id, email: email, passwordHash: "hash")
            f.clock.advance(by: 1)
            let buyer = try await f.signIn().user
            let bought = AppStoreFacts.consumable(purchased: f.now)
            try await f.redeem(bought, by: buyer.id)

            #expect(try await console.user(email: email)?.id == linked.id, "[\(kind)]")
            #expect(try await console.user(email: "nobody@example.com") == nil, "[\(kind)]")
            #expect(try await console.user(installation: device)?.id == guest.id, "[\(kind)]")
            #expect(try await console.installation(userId: guest.id) == device, "[\(kind)]")
            #expect(try await console.installation(userId: linked.id) == nil, "[\(kind)] linking detaches the installation")
            #expect(try await console.user(transactionId: bought.transactionId)?.id == buyer.id, "[\(kind)]")
            #expect(try await console.user(transactionId: randomId("tx-")) == nil, "[\(kind)]")

            // Two more in the same millisecond as the buyer: ties go by id, and no user is skipped or shown twice.
            let twins = [try await f.signIn().user.id, try await f.signIn().user.id]
            var seen: [String] = []
            var cursor: UserCursor?
            while true {
                let page = try await console.newestUsers(after: cursor, limit: 2)
                seen += page.map(\.id)
                guard page.count == 2, let last = page.last else { break }
                cursor = UserCursor(createdAt: last.createdAt, id: last.id)
            }
            let expected = ([buyer.id] + twins).sorted(by: >) + [linked.id, guest.id]
            #expect(seen == expected, "[\(kind)]")
        }
    }

    @Test("a user's sessions newest first, open holds, and collections with live count, bytes and last change", arguments: StoreKind.allCases)
    func userDetail(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let console = try Self.console(f)
            let first = try await f.signIn(sessionId: randomId("s1-"))
            let userId = first.user.id
            f.clock.advance(by: 5)
            let second = try await f.store.openSession(
                userId: userId, sessionId: randomId("s2-"), refresh: f.refresh(), sessionsPerUser: 5, now: f.now)
            try await f.store.revokeSession(id: first.sessionId, now: f.now)
            let sessions = try await console.sessions(userId: userId, limit: 10)
            #expect(sessions.map(\.id) == [second.sessionId, first.sessionId], "[\(kind)]")
            #expect(sessions.map(\.revokedAt) == [nil, f.now] && sessions[1].createdAt == defaultStart, "[\(kind)]")

            try await f.run(.grant(userId: userId, amount: 50, reason: "test"))
            let (soon, late) = (randomId("h-"), randomId("h-"))
            try await f.run(.createHold(userId: userId, holdId: late, amount: 5, expiresAt: f.now.addingTimeInterval(900)))
            try await f.run(.createHold(userId: userId, holdId: soon, amount: 3, expiresAt: f.now.addingTimeInterval(300)))
            let closed = randomId("h-")
            try await f.run(.createHold(userId: userId, holdId: closed, amount: 1, expiresAt: f.now.addingTimeInterval(300)))
            try await f.run(.releaseHold(userId: userId, holdId: closed))
            #expect(try await console.openHolds(userId: userId, limit: 10).map(\.id) == [soon, late], "[\(kind)]")

            try await f.put(userId, Collections.notes, "a", #"{"t":"hello"}"#)
            try await f.put(userId, Collections.notes, "b", #"{"t":"x"}"#)
            f.clock.advance(by: 7)
            try await f.write(userId, Collections.notes, "b", .delete)
            try await f.put(userId, Collections.logs, "d", #"{"date":"2027-01-15"}"#)
            let stats = try await console.collectionStats(userId: userId)
            #expect(
                stats == [
                    CollectionStats(collection: "habit_logs", documents: 1, bytes: 21, lastChange: f.now),
                    CollectionStats(collection: "notes", documents: 1, bytes: 13, lastChange: f.now),
                ], "[\(kind)]")
            #expect(try await console.collectionStats(userId: randomId()) == [], "[\(kind)]")
        }
    }

    @Test("overview: new users and ledger totals by UTC hour, top spending reasons; users by kind", arguments: StoreKind.allCases)
    func overview(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let console = try Self.console(f)
            let old = try await f.newUser(tokens: 100)
            try await f.run(.performAction(userId: old, action: ActionSpec(name: "old", tokens: 7), quotaLimit: nil))
            f.clock.advance(by: 86_400)
            let since = f.now
            let fresh = try await f.newUser(tokens: 30)
            _ = try await f.store.linkCredentials(userId: fresh, email: randomId("e") + "@example.com", passwordHash: "h")
            try await f.run(.performAction(userId: old, action: ActionSpec(name: "chat", tokens: 4), quotaLimit: nil))
            try await f.run(.performAction(userId: fresh, action: ActionSpec(name: "chat", tokens: 5), quotaLimit: nil))
            try await f.run(.performAction(userId: fresh, action: ActionSpec(name: "draw", tokens: 2), quotaLimit: nil))
            let hours = try await console.hourlyTotals(from: since, to: .distantFuture)
            let hour = HourlyTotalsBuilder.hourMillis
            #expect(hours.map(\.since) == [Date(millis: since.millis / hour * hour)], "[\(kind)]: one hour's bucket, at its start")
            let totals = PeriodTotals.sum(hours, since: since)
            #expect(totals.newUsers == 1, "[\(kind)]")
            #expect(totals.total(.grant) == KindTotal(kind: .grant, entries: 1, amount: 30), "[\(kind)]")
            #expect(totals.total(.debit) == KindTotal(kind: .debit, entries: 3, amount: -11), "[\(kind)]")
            #expect(totals.total(.refund).entries == 0, "[\(kind)]")
            #expect(
                totals.topReasons == [ReasonTotal(reason: "chat", entries: 2, tokens: 9), ReasonTotal(reason: "draw", entries: 1, tokens: 2)],
                "[\(kind)]")
            #expect(try await console.hourlyTotals(from: f.now.addingTimeInterval(0.001), to: .distantFuture) == [], "[\(kind)]")
            #expect(try await console.hourlyTotals(from: .distantPast, to: since).map(\.newUsers).reduce(0, +) == 1, "[\(kind)]: to is excluded")

            // An hour later: a second bucket; the first is unchanged.
            f.clock.advance(by: 3_600)
            try await f.run(.performAction(userId: fresh, action: ActionSpec(name: "draw", tokens: 3), quotaLimit: nil))
            let two = try await console.hourlyTotals(from: since, to: .distantFuture)
            #expect(two.count == 2 && two.first == hours.first, "[\(kind)]")
            #expect(two.last?.kinds == [KindTotal(kind: .debit, entries: 1, amount: -3)], "[\(kind)]")
            #expect(two.last?.topReasons == [ReasonTotal(reason: "draw", entries: 1, tokens: 3)] && two.last?.newUsers == 0, "[\(kind)]")
            #expect(
                PeriodTotals.sum(two, since: since).topReasons
                    == [ReasonTotal(reason: "chat", entries: 2, tokens: 9), ReasonTotal(reason: "draw", entries: 2, tokens: 5)], "[\(kind)]")
            #expect(try await console.userCounts() == UserCounts(guests: 1, accounts: 1), "[\(kind)]")
        }
    }

    @Test("revoking every session and deleting an account append their audit row in the same transaction", arguments: StoreKind.allCases)
    func auditedActions(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let console = try Self.console(f)
            let grant = try await f.signIn()
            let userId = grant.user.id
            let other = try await f.store.openSession(
                userId: userId, sessionId: randomId("s-"), refresh: f.refresh(), sessionsPerUser: 5, now: f.now)
            #expect(try await f.store.liveSessionUser(sessionId: grant.sessionId) == userId, "[\(kind)]")
            let revoked = try await console.revokeSessions(userId: userId, audit: Self.audit(f, "revoke_sessions", userId, after: "2"))
            #expect(revoked.sorted() == [grant.sessionId, other.sessionId].sorted(), "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: grant.sessionId) == nil, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: other.sessionId) == nil, "[\(kind)]")
            let mine = { try await console.auditEntries(before: nil, limit: 500).filter { $0.userId == userId } }
            #expect(try await mine().map(\.action) == ["revoke_sessions"], "[\(kind)]")

            #expect(try await console.deleteUser(id: userId, audit: Self.audit(f, "delete_user", userId)), "[\(kind)]")
            #expect(try await f.store.user(id: userId) == nil, "[\(kind)]")
            #expect(try await mine().map(\.action) == ["delete_user", "revoke_sessions"], "[\(kind)] the rows outlive the user")
            #expect(try await console.deleteUser(id: userId, audit: Self.audit(f, "delete_user", userId)) == false, "[\(kind)]")
            #expect(try await mine().count == 2, "[\(kind)] nothing appended for a user that was not there")
        }
    }
}
