import Foundation
import PostgresNIO
import TallyStore

/// The operator's console: lookups and pages, each one statement through an index (`v13`'s among them); the audit log
/// appended in the action's own statement or transaction where the action is the console's.
extension PostgresStore {
    /// One `INSERT … RETURNING`.
    @discardableResult
    public func appendAudit(_ entry: NewAuditEntry) async throws -> AuditEntry {
        var statement = BoundStatement()
        let write = Self.insertAudit(entry, returning: true, into: &statement)
        return try AuditEntry(Self.single(try await run(write, statement, changing: [.all]), "the audit row"))
    }

    /// The rows in one transaction on one connection, in order (a round trip each, one commit).
    public func appendAudits(_ entries: [NewAuditEntry]) async throws {
        try await transaction { connection in
            for entry in entries {
                var statement = BoundStatement()
                try await run(Self.insertAudit(entry, returning: false, into: &statement), statement, changing: [.all], on: connection)
            }
        }
    }

    /// The audit log, newest first (the primary key's order).
    public func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry] {
        try await rows(
            """
            SELECT \(unescaped: AuditEntry.columns) FROM console_audit WHERE id < \(before ?? Int64.max)
            ORDER BY id DESC LIMIT \(Int64(limit))
            """
        ).map { try AuditEntry(Columns($0)) }
    }

    /// By the unique index on `users.email`.
    public func user(email: String) async throws -> UserRecord? {
        try await rows("SELECT \(unescaped: UserRecord.columns()) FROM users WHERE email = \(email)").first.map { try UserRecord(Columns($0)) }
    }

    /// A consumable's owner by its transaction; a subscription's holder by its original or latest transaction, else the
    /// last account that listed it.
    public func user(transactionId: String) async throws -> UserRecord? {
        try await rows(
            """
            SELECT \(unescaped: UserRecord.columns(of: "u")) FROM users u WHERE u.id = coalesce(
              (SELECT user_id FROM purchases WHERE transaction_id = \(transactionId) AND kind = 'consumable'),
              (SELECT user_id FROM subscriptions WHERE original_transaction_id = \(transactionId) OR transaction_id = \(transactionId)
               ORDER BY signed_at DESC LIMIT 1),
              (SELECT p.user_id FROM purchases p JOIN subscriptions s ON s.original_transaction_id = p.original_transaction_id
               WHERE (s.original_transaction_id = \(transactionId) OR s.transaction_id = \(transactionId)) AND p.kind = 'subscription'
                 AND p.user_id IS NOT NULL
               ORDER BY p.recorded_at DESC LIMIT 1))
            """
        ).first.map { try UserRecord(Columns($0)) }
    }

    /// By the unique index on `users.installation`.
    public func user(installation: String) async throws -> UserRecord? {
        try await rows("SELECT \(unescaped: UserRecord.columns()) FROM users WHERE installation = \(installation)")
            .first.map { try UserRecord(Columns($0)) }
    }

    /// Walks `users_created` backwards from the cursor.
    public func newestUsers(after cursor: UserCursor?, limit: Int) async throws -> [UserRecord] {
        try await rows(
            """
            SELECT \(unescaped: UserRecord.columns()) FROM users
            WHERE (created_at, id) < (\(cursor?.createdAt.millis ?? Int64.max), \(cursor?.id ?? ""))
            ORDER BY created_at DESC, id DESC LIMIT \(Int64(limit))
            """
        ).map { try UserRecord(Columns($0)) }
    }

    /// A guest's installation.
    public func installation(userId: String) async throws -> String? {
        guard let row = try await rows("SELECT installation FROM users WHERE id = \(userId)").first else { return nil }
        return try Columns(row)["installation"]
    }

    /// Through `sessions_user_created`.
    public func sessions(userId: String, limit: Int) async throws -> [SessionSummary] {
        try await rows(
            """
            SELECT id, created_at, revoked_at FROM sessions WHERE user_id = \(userId)
            ORDER BY created_at DESC, id DESC LIMIT \(Int64(limit))
            """
        ).map { row in
            let row = Columns(row)
            return SessionSummary(
                id: try row["id"], createdAt: Date(millis: try row["created_at"]),
                revokedAt: (try row["revoked_at"] as Int64?).map(Date.init(millis:)))
        }
    }

    /// The account's open holds.
    public func openHolds(userId: String, limit: Int) async throws -> [HoldRecord] {
        try await rows(
            """
            SELECT \(unescaped: HoldRecord.columns(of: "h")) FROM holds h WHERE h.user_id = \(userId) AND h.status = 'open'
            ORDER BY h.expires_at, h.id LIMIT \(Int64(limit))
            """
        ).compactMap { try HoldRecord.read(Columns($0)) }
    }

    /// The user's documents (at most their sync budget), grouped by collection.
    public func collectionStats(userId: String) async throws -> [CollectionStats] {
        try await rows(
            """
            SELECT collection, (count(*) FILTER (WHERE NOT deleted))::BIGINT AS documents,
              coalesce(sum(octet_length(data)), 0)::BIGINT AS bytes, max(updated_at) AS last_change
            FROM documents WHERE user_id = \(userId) GROUP BY collection ORDER BY collection
            """
        ).map { row in
            let row = Columns(row)
            return CollectionStats(
                collection: try row["collection"], documents: Int(try row["documents"] as Int64), bytes: try row["bytes"],
                lastChange: Date(millis: try row["last_change"]))
        }
    }

    /// Ranges on `users_created` and the BRIN index `ledger_entries_created`, in one statement.
    public func hourlyTotals(from: Date, to: Date) async throws -> [PeriodTotals] {
        let (hour, from, to) = (HourlyTotalsBuilder.hourMillis, from.millis, to.millis)
        let rows = try await rows(
            """
            SELECT 'kind' AS part, created_at / \(hour) AS hour, kind AS name, \(unescaped: SpendingGroup.sql(find: "strpos")) AS spent_on,
              count(*)::BIGINT AS entries, sum(amount)::BIGINT AS amount
            FROM ledger_entries WHERE created_at >= \(from) AND created_at < \(to) GROUP BY 2, 3, 4
            UNION ALL
            SELECT 'users', created_at / \(hour), '', NULL, count(*)::BIGINT, 0::BIGINT FROM users
              WHERE created_at >= \(from) AND created_at < \(to) GROUP BY 2
            """)
        var hours = HourlyTotalsBuilder()
        for row in rows {
            let row = Columns(row)
            let part: String = try row["part"], hour: Int64 = try row["hour"]
            let entries = Int(try row["entries"] as Int64)
            if part == "users" {
                hours.addUsers(hour: hour, count: entries)
            } else {
                hours.add(hour: hour, kind: try row["name"], reason: try row["spent_on"], entries: entries, amount: try row["amount"])
            }
        }
        return hours.build()
    }

    /// One count of `users`.
    public func userCounts() async throws -> UserCounts {
        let row = try Self.single(
            try await rows(
                """
                SELECT (count(*) FILTER (WHERE email IS NULL AND apple_sub IS NULL))::BIGINT AS guests,
                  (count(*) FILTER (WHERE email IS NOT NULL OR apple_sub IS NOT NULL))::BIGINT AS accounts FROM users
                """), "user counts")
        return UserCounts(guests: Int(try row["guests"] as Int64), accounts: Int(try row["accounts"] as Int64))
    }

    /// One statement revokes, lists the sessions in the revocation feed and appends the audit row; this process forgets
    /// them once that returns (committed), the others on the caller's announcement or at their next poll.
    public func revokeSessions(userId: String, audit: NewAuditEntry) async throws -> [String] {
        var statement = BoundStatement()
        let write = Writes.consoleRevokeSessions(
            userId: statement.bind(userId), at: statement.bind(audit.at.millis), operatorSession: statement.bind(audit.operatorSession),
            action: statement.bind(audit.action), auditUserId: statement.bind(audit.userId), before: statement.bind(audit.before),
            after: statement.bind(audit.after))
        let revoked = try await run(write, statement, changing: [.user(userId)]).map { try Columns($0)["id"] as String }
        return revoked
    }

    /// The deletion (locked as ``deleteUser(id:)`` locks it) and the audit row in one transaction.
    public func deleteUser(id: String, audit: NewAuditEntry) async throws -> Bool {
        try await transaction { connection in
            try await lockAccount(id, on: connection)
            guard try await deleteAccount(id, on: connection) else { return false }
            var statement = BoundStatement()
            try await run(Self.insertAudit(audit, returning: false, into: &statement), statement, changing: [.all], on: connection)
            return true
        }
    }

    /// ``Writes/insertAudit(at:operatorSession:action:userId:before:after:returning:)`` of `entry`, its values bound in `statement`.
    static func insertAudit(_ entry: NewAuditEntry, returning: Bool, into statement: inout BoundStatement) -> PostgresWrite {
        Writes.insertAudit(
            at: statement.bind(entry.at.millis), operatorSession: statement.bind(entry.operatorSession), action: statement.bind(entry.action),
            userId: statement.bind(entry.userId), before: statement.bind(entry.before), after: statement.bind(entry.after),
            returning: returning)
    }
}

extension AuditEntry {
    /// The columns ``init(_:)`` reads.
    static let columns = "id, at, operator_session, action, user_id, before, after"

    /// ``columns`` of `console_audit`.
    init(_ row: Columns) throws {
        self.init(
            id: try row["id"], at: Date(millis: try row["at"]), operatorSession: try row["operator_session"], action: try row["action"],
            userId: try row["user_id"], before: try row["before"], after: try row["after"])
    }
}
