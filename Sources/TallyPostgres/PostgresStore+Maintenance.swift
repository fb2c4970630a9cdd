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
        try await transaction { connection in
            try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('tally:schema_migrations', 0))", logger: logger)
            try await connection.rows(PostgresQuery(unsafeSQL: PostgresSchema.versionTable), logger: logger)
            var applied = Set<Int64>()
            for row in try await connection.rows("SELECT version::BIGINT FROM tally_schema_migrations", logger: logger) {
                var cells = Cells(row)
                applied.insert(try cells.next(Int64.self))
            }
            for migration in PostgresSchema.migrations
            where !applied.contains(Int64(migration.version)) && migration.version <= version ?? Int.max {
                logger.info("postgres: applying schema migration", metadata: ["version": "\(migration.version)"])
                for statement in migration.statements {
                    try await connection.rows(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.rows(
                    "INSERT INTO tally_schema_migrations (version, applied_at) VALUES (\(migration.version), \(Date().millis))",
                    logger: logger)
            }
        }
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
        let inserted = try await rows(
            "INSERT INTO server_secrets (name, value) VALUES (\(name), \(value)) ON CONFLICT (name) DO NOTHING RETURNING value")
        if !inserted.isEmpty { return value }
        // Another instance created it first: this statement's fresh snapshot sees its value.
        guard let existing = try await storedSecret(name) else {
            throw StoreError(.unavailable, underlying: PostgresFailure(kind: "secret vanished"))
        }
        return existing
    }

    private func storedSecret(_ name: String) async throws -> String? {
        guard let row = try await rows("SELECT value FROM server_secrets WHERE name = \(name)").first else { return nil }
        var cells = Cells(row)
        return try cells.next(String.self)
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
            let users = try locked.map { row in
                var cells = Cells(row)
                return try cells.next(String.self)
            }
            // A new statement, so a fresh snapshot: it sees everything committed before the locks were taken.
            let rows = try await connection.rows(
                """
                SELECT h.id, h.user_id, h.amount, h.created_at, h.expires_at, w.balance, w.held, w.version
                FROM holds h JOIN wallets w ON w.user_id = h.user_id
                WHERE h.user_id = ANY(\(users)) AND h.status = 'open' AND h.expires_at <= \(now.millis)
                ORDER BY h.user_id, h.expires_at, h.id
                FOR UPDATE OF h
                """, logger: logger)
            var holds: [HoldRecord] = []
            var wallets: [String: WalletState] = [:]
            for row in rows {
                var cells = Cells(row)
                let id: String = try cells.next()
                let userId: String = try cells.next()
                let amount: Int64 = try cells.next()
                let createdAt: Int64 = try cells.next()
                let expiresAt: Int64 = try cells.next()
                wallets[userId] = try WalletState(&cells)
                holds.append(
                    HoldRecord(
                        id: id, userId: userId, amount: amount, status: .open, capturedAmount: nil,
                        createdAt: Date(millis: createdAt), expiresAt: Date(millis: expiresAt)))
            }
            _ = try await Self.expire(holds, wallets: wallets, now: now, on: connection, logger: logger)
            return holds.reduce(into: [:]) { counts, hold in counts[hold.userId, default: 0] += 1 }
        }
    }

    /// Deletes old idempotency records, guest sign-up records, sign-in failures and revocation-feed rows
    /// (those an hour old on the database's clock: polls read one minute), in one statement.
    public func purge(idempotencyBefore: Date, signupsBefore: Date, signInFailuresBefore: Date) async throws {
        try await rows(
            """
            WITH keys AS (DELETE FROM idempotency_keys WHERE created_at < \(idempotencyBefore.millis)),
            revocations AS (
              DELETE FROM session_revocations
              WHERE revoked_at < (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT - \(Self.revocationRetentionMillis)
            ),
            failures AS (DELETE FROM sign_in_failures WHERE last_failure_at < \(signInFailuresBefore.millis))
            DELETE FROM guest_signups WHERE created_at < \(signupsBefore.millis)
            """)
    }

    /// Deletes one batch of ended sessions and expired refresh tokens (see ``MaintenanceStore``) in two
    /// statements: expired tokens with the sessions they leave without a token expiring at `cutoff` or later
    /// (their tokens being deleted by the same statement are excluded by that very condition), then sessions
    /// revoked before `cutoff`, whose tokens go with them (`ON DELETE CASCADE`). Either statement alone
    /// leaves the database consistent. Deleted sessions were revoked or can no longer be refreshed and
    /// their access tokens expired long ago, so other processes need no revocation-feed entry.
    public func purgeSessions(before cutoff: Date, limit: Int) async throws -> Int {
        let expired = try await rows(
            """
            WITH tokens AS (
              DELETE FROM refresh_tokens WHERE token_hash IN (
                SELECT token_hash FROM refresh_tokens WHERE expires_at < \(cutoff.millis) ORDER BY expires_at LIMIT \(limit)
              ) RETURNING session_id
            ), ended AS (
              DELETE FROM sessions s WHERE s.id IN (SELECT session_id FROM tokens)
                AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.session_id = s.id AND r.expires_at >= \(cutoff.millis))
              RETURNING s.id
            )
            SELECT (SELECT count(*) FROM tokens) + (SELECT count(*) FROM ended), ARRAY(SELECT id FROM ended)
            """)
        let revoked = try await rows(
            """
            WITH ended AS (
              DELETE FROM sessions WHERE id IN (
                SELECT id FROM sessions WHERE revoked_at < \(cutoff.millis) ORDER BY revoked_at LIMIT \(limit)
              ) RETURNING id
            )
            SELECT (SELECT count(*) FROM ended), ARRAY(SELECT id FROM ended)
            """)
        var deleted = 0
        for row in expired + revoked {
            var cells = Cells(row)
            deleted += Int(try cells.next(Int64.self))
            for id in try cells.next([String].self) { sessions.forget(sessionId: id) }
        }
        return deleted
    }

    /// Releases `holds` (open and expired, read under their wallets' locks in this transaction) with one
    /// ``LedgerPlanner/expiry(of:)`` entry each, in expiry order; returns the wallets afterwards.
    /// One statement for any number of holds and accounts.
    static func expire(
        _ holds: [HoldRecord], wallets: [String: WalletState], now: Date, on connection: PooledConnection, logger: Logger
    ) async throws -> [String: WalletState] {
        guard !holds.isEmpty else { return wallets }
        var after = wallets
        var entries: (users: [String], kinds: [String], amounts: [Int64], heldChanges: [Int64]) = ([], [], [], [])
        var totals: (balances: [Int64], helds: [Int64], reasons: [String]) = ([], [], [])
        let ordered = holds.sorted { ($0.userId, $0.expiresAt, $0.id) < ($1.userId, $1.expiresAt, $1.id) }
        for hold in ordered {
            guard let wallet = after[hold.userId] else { throw RetryTransaction() }
            let entry = LedgerPlanner.expiry(of: hold)
            let moved = wallet.applying(entry)
            after[hold.userId] = moved
            entries.users.append(hold.userId)
            entries.kinds.append(entry.kind.rawValue)
            entries.amounts.append(entry.amount)
            entries.heldChanges.append(entry.heldChange)
            totals.balances.append(moved.balance)
            totals.helds.append(moved.held)
            totals.reasons.append(entry.reason ?? "")
        }
        let users = Array(Set(ordered.map(\.userId))).sorted()
        let rows = try await connection.rows(
            """
            WITH settled AS (
              UPDATE holds SET status = 'expired', settled_at = \(now.millis)
              WHERE id = ANY(\(ordered.map(\.id))) AND status = 'open'
              RETURNING 1
            ), moved AS (
              UPDATE wallets w SET balance = v.balance, held = v.held, version = v.version
              FROM unnest(
                \(users)::TEXT[], \(users.map { after[$0]?.balance ?? 0 })::BIGINT[],
                \(users.map { after[$0]?.held ?? 0 })::BIGINT[], \(users.map { after[$0]?.version ?? 0 })::BIGINT[],
                \(users.map { wallets[$0]?.version ?? 0 })::BIGINT[]
              ) AS v(user_id, balance, held, version, old_version)
              WHERE w.user_id = v.user_id AND w.version = v.old_version
              RETURNING 1
            ), appended AS (
              INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
              SELECT e.user_id, e.kind, e.amount, e.held_change, e.balance_after, e.held_after, NULLIF(e.reason, ''), \(now.millis)
              FROM unnest(
                \(entries.users)::TEXT[], \(entries.kinds)::TEXT[], \(entries.amounts)::BIGINT[],
                \(entries.heldChanges)::BIGINT[], \(totals.balances)::BIGINT[], \(totals.helds)::BIGINT[],
                \(totals.reasons)::TEXT[]
              ) WITH ORDINALITY AS e(user_id, kind, amount, held_change, balance_after, held_after, reason, n)
              ORDER BY e.n
              RETURNING 1
            )
            SELECT (SELECT count(*) FROM settled), (SELECT count(*) FROM moved), (SELECT count(*) FROM appended)
            """, logger: logger)
        guard let row = rows.first else { throw RetryTransaction() }
        var cells = Cells(row)
        let settled: Int64 = try cells.next()
        let moved: Int64 = try cells.next()
        // Under the wallet locks nothing else can settle these holds or move these wallets; if something
        // did, the books read are stale: start over rather than write entries that do not add up.
        guard settled == ordered.count, moved == users.count else { throw RetryTransaction() }
        return after
    }
}
