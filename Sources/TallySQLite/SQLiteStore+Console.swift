import Foundation
import GRDB
import TallyStore

/// The operator's console: lookups and pages from a reader, each through an index (`v11`'s among them); the audit log
/// appended in the writer's transaction, with the action's own writes where the action is the console's.
extension SQLiteStore: ConsoleStore {
    /// Appends one audit row in a write transaction of its own.
    @discardableResult
    public func appendAudit(_ entry: NewAuditEntry) async throws -> AuditEntry {
        try await write { db in try Self.appendAudit(entry, db) }
    }

    /// The rows in one writer transaction.
    public func appendAudits(_ entries: [NewAuditEntry]) async throws {
        try await write { db in
            for entry in entries { try Self.appendAudit(entry, db) }
        }
    }

    /// The audit log, newest first (the primary key's order).
    public func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry] {
        try await read { db in
            try db.fetchRows(sql: "SELECT * FROM console_audit WHERE id < ? ORDER BY id DESC LIMIT ?",
                arguments: [before ?? Int64.max, limit]
            ).map(AuditEntry.init(row:))
        }
    }

    /// By the unique index on `users.email`.
    public func user(email: String) async throws -> UserRecord? {
        try await read { db in
            try db.fetchRow(sql: "SELECT * FROM users WHERE email = ?", arguments: [email]).map(UserRecord.init(row:))
        }
    }

    /// A consumable's owner by its transaction; a subscription's holder by its original or latest transaction, else the
    /// last account that listed it.
    public func user(transactionId: String) async throws -> UserRecord? {
        try await read { db in
            try db.fetchRow(sql: """
                    SELECT u.* FROM users u WHERE u.id = coalesce(
                      (SELECT user_id FROM purchases WHERE transaction_id = ?1 AND kind = 'consumable'),
                      (SELECT user_id FROM subscriptions WHERE original_transaction_id = ?1 OR transaction_id = ?1
                       ORDER BY signed_at DESC LIMIT 1),
                      (SELECT p.user_id FROM purchases p JOIN subscriptions s ON s.original_transaction_id = p.original_transaction_id
                       WHERE (s.original_transaction_id = ?1 OR s.transaction_id = ?1) AND p.kind = 'subscription'
                         AND p.user_id IS NOT NULL
                       ORDER BY p.recorded_at DESC LIMIT 1))
                    """,
                arguments: [transactionId]
            ).map(UserRecord.init(row:))
        }
    }

    /// By the unique index on `users.installation`.
    public func user(installation: String) async throws -> UserRecord? {
        try await read { db in
            try db.fetchRow(sql: "SELECT * FROM users WHERE installation = ?", arguments: [installation]).map(UserRecord.init(row:))
        }
    }

    /// Walks `users_created` backwards from the cursor.
    public func newestUsers(after cursor: UserCursor?, limit: Int) async throws -> [UserRecord] {
        try await read { db in
            guard let cursor else {
                return try db.fetchRows(sql: "SELECT * FROM users ORDER BY created_at DESC, id DESC LIMIT ?", arguments: [limit])
                    .map(UserRecord.init(row:))
            }
            return try db.fetchRows(sql: """
                    SELECT * FROM users WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?
                    """,
                arguments: [cursor.createdAt.millis, cursor.id, limit]
            ).map(UserRecord.init(row:))
        }
    }

    /// A guest's installation.
    public func installation(userId: String) async throws -> String? {
        try await read { db in
            try db.fetchValue(String.self, sql: "SELECT installation FROM users WHERE id = ?", arguments: [userId])
        }
    }

    /// Through `sessions_user_created`.
    public func sessions(userId: String, limit: Int) async throws -> [SessionSummary] {
        try await read { db in
            try db.fetchRows(sql: """
                    SELECT id, created_at, revoked_at FROM sessions WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?
                    """,
                arguments: [userId, limit]
            ).map { row in
                SessionSummary(
                    id: row["id"], createdAt: Date(millis: row["created_at"]),
                    revokedAt: (row["revoked_at"] as Int64?).map(Date.init(millis:)))
            }
        }
    }

    /// Through `holds_user`.
    public func openHolds(userId: String, limit: Int) async throws -> [HoldRecord] {
        try await read { db in
            try db.fetchRows(sql: "SELECT * FROM holds WHERE user_id = ? AND status = 'open' ORDER BY expires_at, id LIMIT ?",
                arguments: [userId, limit]
            ).map(HoldRecord.init(row:))
        }
    }

    /// The user's documents (at most their sync budget), grouped by collection.
    public func collectionStats(userId: String) async throws -> [CollectionStats] {
        try await read { db in
            try db.fetchRows(sql: """
                    SELECT collection, sum(deleted = 0) AS documents, coalesce(sum(length(CAST(data AS BLOB))), 0) AS bytes,
                      max(updated_at) AS last_change
                    FROM documents WHERE user_id = ? GROUP BY collection ORDER BY collection
                    """,
                arguments: [userId]
            ).map { row in
                CollectionStats(
                    collection: row["collection"], documents: row["documents"], bytes: row["bytes"],
                    lastChange: Date(millis: row["last_change"]))
            }
        }
    }

    /// Ranges on `users_created` and `ledger_entries_created`, in one read transaction.
    public func hourlyTotals(from: Date, to: Date) async throws -> [PeriodTotals] {
        try await read { db in
            var hours = HourlyTotalsBuilder()
            let range: StatementArguments = [HourlyTotalsBuilder.hourMillis, from.millis, to.millis]
            for row in try db.fetchRows(sql: """
                    SELECT created_at / ?1 AS hour, kind, \(SpendingGroup.sql(find: "instr")) AS spent_on,
                      count(*) AS entries, sum(amount) AS amount
                    FROM ledger_entries WHERE created_at >= ?2 AND created_at < ?3 GROUP BY 1, 2, 3
                    """, arguments: range)
            {
                hours.add(hour: row["hour"], kind: row["kind"], reason: row["spent_on"], entries: row["entries"], amount: row["amount"])
            }
            for row in try db.fetchRows(sql: """
                    SELECT created_at / ?1 AS hour, count(*) AS users FROM users WHERE created_at >= ?2 AND created_at < ?3
                    GROUP BY 1
                    """, arguments: range)
            {
                hours.addUsers(hour: row["hour"], count: row["users"])
            }
            return hours.build()
        }
    }

    /// One count of `users`.
    public func userCounts() async throws -> UserCounts {
        try await read { db in
            let row = try db.fetchRow(sql: """
                    SELECT coalesce(sum(email IS NULL AND apple_sub IS NULL), 0) AS guests,
                      coalesce(sum(email IS NOT NULL OR apple_sub IS NOT NULL), 0) AS accounts FROM users
                    """)
            return UserCounts(guests: row?["guests"] ?? 0, accounts: row?["accounts"] ?? 0)
        }
    }

    /// The revocation and the audit row in one writer transaction.
    public func revokeSessions(userId: String, audit: NewAuditEntry) async throws -> [String] {
        try await write { db in
            let revoked = try self.revokeSessions(ofUser: userId, now: audit.at, db)
            try Self.appendAudit(audit, db)
            return revoked
        }
    }

    /// The deletion and the audit row in one writer transaction.
    public func deleteUser(id: String, audit: NewAuditEntry) async throws -> Bool {
        try await write { db in
            guard try self.deleteAccount(id, db) else { return false }
            try Self.appendAudit(audit, db)
            return true
        }
    }

    static func appendAudit(_ entry: NewAuditEntry, _ db: Database) throws -> AuditEntry {
        guard
            let audit = try db.fetchFirst(
                SQLiteWrites.appendAudit, changing: .all,
                arguments: [entry.at.millis, entry.operatorSession, entry.action, entry.userId, entry.before, entry.after],
                AuditEntry.init(row:))
        else { throw StoreError(.invalidInput) }
        return audit
    }
}

extension AuditEntry {
    init(row: Row) {
        self.init(
            id: row["id"], at: Date(millis: row["at"]), operatorSession: row["operator_session"], action: row["action"],
            userId: row["user_id"], before: row["before"], after: row["after"])
    }
}
