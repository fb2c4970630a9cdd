import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// One transaction: both accounts locked as every writer of them locks them — their sync states (created if
    /// missing), then their wallets, each in id order (document writes take the sync state, then the wallet; commands
    /// and purchases the wallets in id order) — so no command, purchase or document write of either runs between the
    /// reads and the writes, and a concurrent copy of the merge, from any process, waits and then finds it recorded
    /// (a replay). Then the snapshot, ``MergePlanner``'s plan and its writes, every entry through
    /// ``LedgerSQL/append(from:carrying:)``. The unique indexes on `merge_out`/`merge_in` entries and `merges` make it
    /// once whatever happens. This process forgets both accounts and the guest's sessions once it commits.
    public func merge(guestId: String, into accountId: String, now: Date) async throws -> MergeOutcome {
        let outcome = try await transaction { connection -> MergeOutcome in
            for userId in Set([guestId, accountId]).sorted() {
                // `WHERE false` updates nothing, but the conflicting row is locked all the same.
                try await connection.rows(
                    """
                    INSERT INTO sync_state (user_id, version, purged_through) SELECT id, 0, 0 FROM users WHERE id = \(userId)
                    ON CONFLICT (user_id) DO UPDATE SET version = sync_state.version WHERE false
                    """, logger: logger)
            }
            try await connection.rows(
                "SELECT 1 FROM wallets WHERE user_id = ANY(\([guestId, accountId])::TEXT[]) ORDER BY user_id FOR UPDATE", logger: logger)
            let snapshot = try await mergeSnapshot(guestId: guestId, accountId: accountId, on: connection)
            switch try MergePlanner.plan(snapshot, now: now) {
            case .replay(let summary):
                return MergeOutcome(summary: summary, replayed: true)
            case .merge(let plan):
                try await writeMerge(plan, snapshot: snapshot, now: now, on: connection)
                return MergeOutcome(summary: plan.summary, replayed: false)
            }
        }
        if !outcome.replayed {
            accounts.remove(guestId)
            accounts.remove(accountId)
            for id in outcome.summary.revokedSessions { sessions.forget(sessionId: id) }
        }
        return outcome
    }

    /// The same reads (in one repeatable-read transaction, without locks) and plan, writing nothing.
    public func mergePreview(guestId: String, into accountId: String, now: Date) async throws -> MergePreview {
        try await transaction { connection in
            try await connection.rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            return try MergePlanner.preview(try await mergeSnapshot(guestId: guestId, accountId: accountId, on: connection), now: now)
        }
    }

    // MARK: In a transaction

    /// Everything ``MergePlanner`` plans from; `.userNotFound` when either account does not exist. For a guest merged
    /// already, only the accounts and the stored merge.
    private func mergeSnapshot(guestId: String, accountId: String, on connection: PooledConnection) async throws -> MergeSnapshot {
        var found: [String: (user: UserRecord, wallet: WalletState)] = [:]
        for row in try await connection.rows(
            """
            SELECT \(unescaped: UserRecord.columns(of: "u")), w.balance, w.held, w.version
            FROM users u JOIN wallets w ON w.user_id = u.id WHERE u.id = ANY(\([guestId, accountId])::TEXT[])
            """, logger: logger
        ).map(Columns.init) {
            let user = try UserRecord(row)
            found[user.id] = (user, try WalletState(row))
        }
        guard let guest = found[guestId], let account = found[accountId] else { throw StoreError(.userNotFound) }
        var snapshot = MergeSnapshot(guest: guest.user, guestWallet: guest.wallet, account: account.user, accountWallet: account.wallet)
        let recorded = try await connection.rows("SELECT summary FROM merges WHERE guest_id = \(guestId)", logger: logger).first
        snapshot.recorded = try recorded.map { try GuestMergeSummary(encoded: try Columns($0)["summary"]) }
        guard snapshot.recorded == nil, guest.user.mergedInto == nil else { return snapshot }

        snapshot.openHolds = try await connection.rows(
            "SELECT \(unescaped: HoldRecord.columns(of: "h")) FROM holds h WHERE h.user_id = \(guestId) AND h.status = 'open'",
            logger: logger
        ).compactMap { try HoldRecord.read(Columns($0)) }
        // The sign-up grant is the guest's first entry (an admin's grant cannot come before the account exists).
        let grant = try Self.single(
            try await connection.rows(
                """
                SELECT coalesce((SELECT amount FROM ledger_entries WHERE user_id = \(guestId) AND kind = 'grant' AND reason = 'signup'
                                 AND id = (SELECT min(id) FROM ledger_entries WHERE user_id = \(guestId))), 0)::BIGINT AS grant,
                       coalesce((SELECT -sum(amount) FROM ledger_entries WHERE user_id = \(guestId) AND kind IN ('debit', 'capture')), 0)::BIGINT AS spent
                """, logger: logger), "the guest's sign-up grant")
        (snapshot.signupGrant, snapshot.spent) = (try grant["grant"], try grant["spent"])
        for row in try await connection.rows(
            "SELECT user_id, quota, used, window_end FROM quota_counters WHERE user_id = ANY(\([guestId, accountId])::TEXT[])",
            logger: logger
        ).map(Columns.init) {
            let (userId, quota): (String, String) = (try row["user_id"], try row["quota"])
            let (used, windowEnd): (Int64, Int64) = (try row["used"], try row["window_end"])
            let counter = QuotaCounter(used: Int(used), windowEnd: Date(millis: windowEnd))
            if userId == guestId { snapshot.guestCounters[quota] = counter } else { snapshot.accountCounters[quota] = counter }
        }
        snapshot.guestDocuments = try await connection.rows(
            "SELECT \(unescaped: DocumentRecord.columns) FROM documents WHERE user_id = \(guestId) AND NOT deleted ORDER BY version",
            logger: logger
        ).map { try DocumentRecord(Columns($0)) }
        let keys = MergePlanner.addressesToRead(snapshot.guestDocuments, guestId: guestId)
        snapshot.accountDocuments = try await connection.rows(
            """
            SELECT d.collection, d.id, d.data, d.range_value, d.version, d.updated_at, d.deleted
            FROM unnest(\(keys.map(\.collection))::TEXT[], \(keys.map(\.id))::TEXT[]) AS k(collection, id)
            JOIN documents d ON d.user_id = \(accountId) AND d.collection = k.collection AND d.id = k.id
            """, logger: logger
        ).map { try DocumentRecord(Columns($0)) }
        for row in try await connection.rows(
            """
            SELECT user_id, version, purged_through, stored_documents, stored_bytes FROM sync_state
            WHERE user_id = ANY(\([guestId, accountId])::TEXT[])
            """, logger: logger
        ).map(Columns.init) {
            let userId: String = try row["user_id"]
            let sync = SyncCounters(
                version: try row["version"], purgedThrough: try row["purged_through"],
                usage: SyncUsage(documents: try row["stored_documents"], bytes: try row["stored_bytes"]))
            if userId == guestId { snapshot.guestSync = sync } else { snapshot.accountSync = sync }
        }
        let owned = try Self.single(
            try await connection.rows(
                """
                SELECT (SELECT count(*) FROM purchases WHERE user_id = \(guestId)) AS purchases,
                       (SELECT count(*) FROM subscriptions WHERE user_id = \(guestId)) AS subscriptions,
                       ARRAY(SELECT id FROM sessions WHERE user_id = \(guestId) AND revoked_at IS NULL ORDER BY id) AS sessions
                """, logger: logger), "the guest's purchases and sessions")
        snapshot.purchases = Int(try owned["purchases"] as Int64)
        snapshot.subscriptions = Int(try owned["subscriptions"] as Int64)
        snapshot.liveSessions = try owned["sessions"]
        return snapshot
    }

    /// Writes `plan` in the transaction of `connection`, which locked both accounts.
    private func writeMerge(_ plan: MergePlan, snapshot: MergeSnapshot, now: Date, on connection: PooledConnection) async throws {
        let (guestId, accountId) = (plan.summary.guestId, plan.summary.accountId)
        // The holds released and both wallets moved, in one statement; the entry ids taken under the wallet locks.
        var ids = try await nextEntryIds(plan.guestEntries.count + plan.accountEntries.count, on: connection).makeIterator()
        var ledger = LedgerRows()
        for (userId, wallet, entries) in [
            (guestId, snapshot.guestWallet, plan.guestEntries), (accountId, snapshot.accountWallet, plan.accountEntries),
        ].sorted(by: { $0.0 < $1.0 }) {
            ledger.move(userId: userId, from: wallet, entries: entries.map { (ids.next(), $0) }, now: now)
        }
        var statement = BoundStatement()
        let source = statement.relation([ledger], as: "b")
        let holds = statement.value(plan.releasedHolds)
        let movedHolds = statement.value(plan.movedHolds)
        let (guest, account) = (statement.value(guestId), statement.value(accountId))
        let settledAt = statement.value(now.millis)
        let moved = try Self.single(
            try await connection.rows(
                statement.query(
                    """
                    WITH released AS (
                      UPDATE holds SET status = 'released', settled_at = \(settledAt)::BIGINT
                      WHERE id = ANY(\(holds)::TEXT[]) AND status = 'open'
                      RETURNING 1
                    ), carried AS (
                      UPDATE holds SET user_id = \(account)::TEXT
                      WHERE id = ANY(\(movedHolds)::TEXT[]) AND user_id = \(guest)::TEXT AND status = 'open'
                      RETURNING 1
                    ), b AS (\(source)), \(LedgerSQL.append(from: "b"))
                    SELECT (SELECT count(*) FROM released) AS released, (SELECT count(*) FROM carried) AS carried,
                           (SELECT count(*) FROM moved) AS moved
                    """), logger: logger), "the merge's ledger write")
        // Under the locks nothing else settles these holds or moves these wallets; if something did, start over.
        guard try moved["released"] == Int64(plan.releasedHolds.count), try moved["carried"] == Int64(plan.movedHolds.count),
            try moved["moved"] == Int64(2)
        else { throw RetryTransaction() }

        let counters = plan.counters.sorted { $0.key < $1.key }
        try await connection.rows(
            """
            WITH guest AS (
              UPDATE users SET installation = NULL, merged_into = \(accountId), purchased_premium_until = NULL WHERE id = \(guestId)
            ), account AS (
              UPDATE users SET purchased_premium_until = \(plan.accountPurchasedPremiumUntil?.millis)::BIGINT,
                premium_until = \(plan.accountPremiumUntil?.millis)::BIGINT
              WHERE id = \(accountId)
            ), listed AS (
              -- A subscription both list is listed once: the account's row stays.
              DELETE FROM purchases WHERE user_id = \(guestId) AND kind = 'subscription' AND original_transaction_id IN (
                SELECT original_transaction_id FROM purchases WHERE user_id = \(accountId) AND kind = 'subscription')
              RETURNING original_transaction_id
            ), purchases AS (
              UPDATE purchases SET user_id = \(accountId)
              WHERE user_id = \(guestId) AND (kind = 'consumable' OR original_transaction_id NOT IN (SELECT original_transaction_id FROM listed))
            ), subscriptions AS (
              UPDATE subscriptions SET user_id = \(accountId) WHERE user_id = \(guestId)
            ), clients AS (
              UPDATE sync_clients SET user_id = \(accountId) WHERE user_id = \(guestId)
            )
            INSERT INTO quota_counters AS c (user_id, quota, used, window_end)
            SELECT \(accountId), q.quota, q.used, q.window_end
            FROM unnest(\(counters.map(\.key))::TEXT[], \(counters.map { Int64($0.value.used) })::BIGINT[],
                        \(counters.map(\.value.windowEnd.millis))::BIGINT[]) AS q(quota, used, window_end)
            ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
            """, logger: logger)

        let records = plan.documents
        let written = try Self.single(
            try await connection.rows(
                """
                WITH b AS (
                  SELECT * FROM unnest(
                    \(records.map(\.collection))::TEXT[], \(records.map(\.id))::TEXT[],
                    \(records.map { String(decoding: $0.data, as: UTF8.self) })::TEXT[], \(records.map { $0.rangeValue ?? "" })::TEXT[],
                    \(records.map { $0.rangeValue != nil })::BOOLEAN[], \(records.map(\.version))::BIGINT[]
                  ) AS b(collection, id, data, range_value, has_range, version)
                ), written AS (
                  -- Where the account has no row, or over a tombstone: never over a live document.
                  INSERT INTO documents AS d (user_id, collection, id, data, range_value, version, updated_at, deleted)
                  SELECT \(accountId), b.collection, b.id, b.data, CASE WHEN b.has_range THEN b.range_value END, b.version,
                         \(now.millis), false
                  FROM b
                  ON CONFLICT (user_id, collection, id) DO UPDATE
                  SET data = excluded.data, range_value = excluded.range_value, version = excluded.version,
                      updated_at = excluded.updated_at, deleted = false
                  WHERE d.deleted
                  RETURNING 1
                ), gone AS (
                  DELETE FROM documents WHERE user_id = \(guestId)
                )
                SELECT count(*) AS written FROM written
                """, logger: logger), "the merge's documents")
        guard try written["written"] == Int64(records.count) else { throw StoreError(.invalidInput) }
        for (userId, sync) in [(accountId, plan.accountSync), (guestId, plan.guestSync)] {
            guard let sync else { continue }
            try await connection.rows(
                """
                UPDATE sync_state SET version = \(sync.version), purged_through = \(sync.purgedThrough),
                  stored_documents = \(sync.usage.documents), stored_bytes = \(sync.usage.bytes)
                WHERE user_id = \(userId)
                """, logger: logger)
        }

        let revoked = try await connection.rows(
            """
            WITH revoked AS (
              UPDATE sessions SET revoked_at = \(now.millis) WHERE user_id = \(guestId) AND revoked_at IS NULL RETURNING id, user_id
            ), feed AS (
              INSERT INTO session_revocations (session_id, user_id) SELECT id, user_id FROM revoked
            ), merged AS (
              INSERT INTO merges (guest_id, account_id, summary, merged_at)
              VALUES (\(guestId), \(accountId), \(try plan.summary.encoded()), \(now.millis))
            )
            SELECT id FROM revoked
            """, logger: logger
        ).map { try Columns($0)["id"] as String }
        // A session opened for the guest after the snapshot: the summary would not name it; start over.
        guard revoked.sorted() == plan.summary.revokedSessions else { throw RetryTransaction() }
    }
}
