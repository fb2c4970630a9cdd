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
    /// ``Writes/append(from:carrying:)``. The unique indexes on `merge_out`/`merge_in` entries and `merges` make it
    /// once whatever happens. This process forgets both accounts and the guest's sessions once it commits (its writes'
    /// declarations say so).
    public func merge(guestId: String, into accountId: String, now: Date) async throws -> MergeOutcome {
        let outcome = try await transaction { connection -> MergeOutcome in
            for userId in Set([guestId, accountId]).sorted() {
                // `WHERE false` updates nothing, but the conflicting row is locked all the same.
                var statement = BoundStatement()
                _ = statement.bind(userId)
                try await run(Writes.lockSyncState, statement, changing: [.user(userId)], on: connection)
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
        let holds = statement.bind(plan.releasedHolds)
        let status = statement.bind(HoldStatus.released.rawValue)
        let movedHolds = statement.bind(plan.movedHolds)
        let (guest, account) = (statement.bind(guestId), statement.bind(accountId))
        let settledAt = statement.bind(now.millis)
        let write = Writes.mergeLedger(
            source: source, released: holds, status: status, carried: movedHolds, guest: guest, account: account, settledAt: settledAt)
        let moved = try Self.single(
            try await run(write, statement, changing: [.user(guestId), .user(accountId)], on: connection), "the merge's ledger write")
        // Under the locks nothing else settles these holds or moves these wallets; if something did, start over.
        guard try moved["released"] == Int64(plan.releasedHolds.count), try moved["carried"] == Int64(plan.movedHolds.count),
            try moved["moved"] == Int64(2)
        else { throw RetryTransaction() }

        let counters = plan.counters.sorted { $0.key < $1.key }
        var owners = BoundStatement()
        let accountsWrite = Writes.mergeAccounts(
            guest: owners.bind(guestId), account: owners.bind(accountId),
            purchasedPremiumUntil: owners.bind(plan.accountPurchasedPremiumUntil?.millis),
            premiumUntil: owners.bind(plan.accountPremiumUntil?.millis), quotas: owners.bind(counters.map(\.key)),
            used: owners.bind(counters.map { Int64($0.value.used) }), windowEnds: owners.bind(counters.map(\.value.windowEnd.millis)))
        try await run(accountsWrite, owners, changing: [.user(guestId), .user(accountId)], on: connection)

        let records = plan.documents
        var documents = BoundStatement()
        let documentsWrite = Writes.mergeDocuments(
            guest: documents.bind(guestId), account: documents.bind(accountId), collections: documents.bind(records.map(\.collection)),
            ids: documents.bind(records.map(\.id)), data: documents.bind(records.map { String(decoding: $0.data, as: UTF8.self) }),
            rangeValues: documents.bind(records.map { $0.rangeValue ?? "" }), hasRanges: documents.bind(records.map { $0.rangeValue != nil }),
            versions: documents.bind(records.map(\.version)), now: documents.bind(now.millis))
        let written = try Self.single(
            try await run(documentsWrite, documents, changing: [.user(guestId), .user(accountId)], on: connection), "the merge's documents")
        guard try written["written"] == Int64(records.count) else { throw StoreError(.invalidInput) }
        for (userId, sync) in [(accountId, plan.accountSync), (guestId, plan.guestSync)] {
            guard let sync else { continue }
            var statement = BoundStatement()
            let write = Writes.mergeSyncState(
                userId: statement.bind(userId), version: statement.bind(sync.version), purgedThrough: statement.bind(sync.purgedThrough),
                documents: statement.bind(sync.usage.documents), bytes: statement.bind(sync.usage.bytes))
            try await run(write, statement, changing: [.user(userId)], on: connection)
        }

        var revoke = BoundStatement()
        let revokeWrite = Writes.mergeRevoke(
            guest: revoke.bind(guestId), account: revoke.bind(accountId), summary: revoke.bind(try plan.summary.encoded()),
            now: revoke.bind(now.millis))
        let revoked = try await run(revokeWrite, revoke, changing: [.user(guestId)], on: connection).map { try Columns($0)["id"] as String }
        // A session opened for the guest after the snapshot: the summary would not name it; start over.
        guard revoked.sorted() == plan.summary.revokedSessions else { throw RetryTransaction() }
    }
}
