import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// Applies pending migrations in one transaction under an advisory lock: of several instances starting
    /// at once, one applies them and the others wait, then find them applied.
    public func migrate() async throws {
        try await migrate(upTo: nil)
    }

    /// Applies the pending migrations up to `version` (all when `nil`); tests build older schemas with it.
    func migrate(upTo version: Int?) async throws {
        let reconfigured = try await migrationTransaction { connection in
            try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('tally:schema_migrations', 0))", logger: logger)
            try await connection.rows(PostgresQuery(unsafeSQL: PostgresSchema.versionTable), logger: logger)
            var applied = Set<Int64>()
            for row in try await connection.rows("SELECT version::BIGINT AS version FROM tally_schema_migrations", logger: logger) {
                applied.insert(try Columns(row)["version"])
            }
            for migration in PostgresSchema.migrations
            where !applied.contains(Int64(migration.version)) && migration.version <= version ?? Int.max {
                logger.info("postgres: applying schema migration", metadata: ["version": "\(migration.version)"])
                for statement in migration.statements {
                    try await connection.rows(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                var record = BoundStatement()
                _ = (record.value(migration.version), record.value(Date().millis))
                try await connection.rows(record.query(PostgresSchema.recordMigration), logger: logger)
            }
            return try await preferGenericPlans(on: connection)
        }
        if reconfigured { pool.retireConnections() }
    }

    /// Succeeds when the database answers `SELECT 1`.
    public func ping() async throws {
        try await rows("SELECT 1")
    }

    /// The named server secret; `make` runs only when it is missing, and of concurrent creators the
    /// first insert wins (`ON CONFLICT DO NOTHING`) and everyone returns its value.
    public func secret(named name: String, orCreate make: @Sendable () -> String) async throws -> String {
        if let value = try await storedSecret(name) { return value }
        let value = make()
        var statement = BoundStatement()
        let inserted = try await run(Writes.createSecret(name: statement.bind(name), value: statement.bind(value)), statement, changing: [.all])
        if !inserted.isEmpty { return value }
        // Another instance created it first: this statement's fresh snapshot sees its value.
        guard let existing = try await storedSecret(name) else {
            throw StoreError(.unavailable, underlying: PostgresFailure(kind: "secret vanished"))
        }
        return existing
    }

    private func storedSecret(_ name: String) async throws -> String? {
        guard let row = try await rows("SELECT value FROM server_secrets WHERE name = \(name)").first else { return nil }
        return try Columns(row)["value"]
    }

    /// Locks the wallets of the accounts owning the `limit` oldest expired holds, skipping accounts another
    /// transaction holds (a command on that account releases its holds itself), then releases every
    /// expired hold of the locked accounts.
    public func expireHolds(now: Date, limit: Int) async throws -> [String: Int] {
        let limit: Int? = limit < 0 ? nil : limit
        return try await transaction { connection in
            let locked = try await connection.rows(
                """
                SELECT w.user_id FROM wallets w
                WHERE w.user_id IN (
                  SELECT user_id FROM holds WHERE status = 'open' AND expires_at <= \(now.millis)
                  ORDER BY expires_at LIMIT \(limit)::BIGINT)
                FOR UPDATE OF w SKIP LOCKED
                """, logger: logger)
            guard !locked.isEmpty else { return [:] }
            let users: [String] = try locked.map { try Columns($0)["user_id"] }
            // A new statement, so a fresh snapshot: it sees everything committed before the locks were taken.
            let rows = try await connection.rows(
                """
                SELECT \(unescaped: HoldRecord.columns(of: "h")), w.balance, w.held, w.version
                FROM holds h JOIN wallets w ON w.user_id = h.user_id
                WHERE h.user_id = ANY(\(users)) AND h.status = 'open' AND h.expires_at <= \(now.millis)
                ORDER BY h.user_id, h.expires_at, h.id
                FOR UPDATE OF h
                """, logger: logger)
            var holds: [HoldRecord] = []
            var wallets: [String: WalletState] = [:]
            for row in rows.map(Columns.init) {
                guard let hold = try HoldRecord.read(row) else { continue }
                wallets[hold.userId] = try WalletState(row)
                holds.append(hold)
            }
            _ = try await expire(holds, wallets: wallets, now: now, on: connection)
            return holds.reduce(into: [:]) { counts, hold in counts[hold.userId, default: 0] += 1 }
        }
    }

    /// Deletes old idempotency records, guest sign-up records, sign-in failures and revocation-feed rows
    /// (those an hour old on the database's clock: polls read one minute), in one statement.
    public func purge(idempotencyBefore: Date, signupsBefore: Date, signInFailuresBefore: Date) async throws {
        var statement = BoundStatement()
        let write = Writes.purge(
            idempotencyBefore: statement.bind(idempotencyBefore.millis), retention: statement.bind(Self.revocationRetentionMillis),
            signInFailuresBefore: statement.bind(signInFailuresBefore.millis), signupsBefore: statement.bind(signupsBefore.millis))
        try await run(write, statement, changing: [.all])
    }

    /// Deletes one batch of ended sessions and expired refresh tokens (see ``MaintenanceStore``) in two
    /// statements: expired tokens with the sessions they leave without a token expiring at `cutoff` or later
    /// (their tokens being deleted by the same statement are excluded by that very condition), then sessions
    /// revoked before `cutoff`, whose tokens go with them (`ON DELETE CASCADE`). Either statement alone
    /// leaves the database consistent. Deleted sessions were revoked or can no longer be refreshed and
    /// their access tokens expired long ago, so other processes need no revocation-feed entry; this process forgets
    /// them as each statement returns (committed).
    public func purgeSessions(before cutoff: Date, limit: Int) async throws -> Int {
        var expiredStatement = BoundStatement(), revokedStatement = BoundStatement()
        let expiredWrite = Writes.purgeExpiredTokens(cutoff: expiredStatement.bind(cutoff.millis), limit: expiredStatement.bind(limit))
        let revokedWrite = Writes.purgeRevokedSessions(cutoff: revokedStatement.bind(cutoff.millis), limit: revokedStatement.bind(limit))
        var deleted = 0
        for (write, statement) in [(expiredWrite, expiredStatement), (revokedWrite, revokedStatement)] {
            let row = try Self.single(try await rows(statement.query(write.sql)), "the sessions' purge")
            deleted += Int(try row["deleted"] as Int64)
            note(write, try (row["sessions"] as [String]).map(ChangedRows.session), on: nil)
        }
        return deleted
    }

    /// Releases `holds` (open and expired, read under their wallets' locks in this transaction) with one
    /// ``LedgerPlanner/expiry(of:)`` entry each, in expiry order (``LedgerRows``: each wallet moves once, by all of
    /// its entries); returns the wallets afterwards. One statement for any number of holds and accounts.
    func expire(
        _ holds: [HoldRecord], wallets: [String: WalletState], now: Date, on connection: PooledConnection
    ) async throws -> [String: WalletState] {
        guard !holds.isEmpty else { return wallets }
        var after = wallets
        var ledger = LedgerRows()
        let ordered = holds.sorted { ($0.userId, $0.expiresAt, $0.id) < ($1.userId, $1.expiresAt, $1.id) }
        let byUser = Dictionary(grouping: ordered, by: \.userId)
        for userId in byUser.keys.sorted() {
            guard let wallet = wallets[userId], let expired = byUser[userId] else { throw RetryTransaction() }
            after[userId] = ledger.move(
                userId: userId, from: wallet, entries: expired.map { (nil, LedgerPlanner.expiry(of: $0)) }, now: now)
        }
        var statement = BoundStatement()
        let source = statement.relation([ledger], as: "b")
        let ids = statement.bind(ordered.map(\.id))
        let status = statement.bind(HoldStatus.expired.rawValue)
        let settledAt = statement.bind(now.millis)
        let rows = try await run(
            Writes.expireHolds(source: source, ids: ids, status: status, settledAt: settledAt), statement,
            changing: byUser.keys.map(ChangedRows.user), on: connection)
        let counts = try Self.single(rows, "the release of expired holds")
        // Under the wallet locks nothing else can settle these holds or move these wallets; if something
        // did, the books read are stale: start over rather than write entries that do not add up.
        guard try counts["settled"] == Int64(ordered.count), try counts["moved"] == Int64(byUser.count) else { throw RetryTransaction() }
        return after
    }
}
