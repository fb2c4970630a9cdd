import Foundation
import GRDB
import TallyStore

extension SQLiteStore: LedgerStore {
    /// Runs a ledger command through the single writer (see ``LedgerStore/execute(_:idempotency:now:render:)``).
    public func execute(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        let work: Work = { db in try self.execute(command, idempotency: idempotency, now: now, render: render, db) }
        return try await writerQueue.run(work, schedule: scheduleBatch).get()
    }

    /// Puts a batch job on the writer (``WriterQueue``).
    @Sendable private func scheduleBatch() {
        pool.asyncWriteWithoutTransaction { db in
            self.runBatch(self.writerQueue.takeBatch(), db)
            if self.writerQueue.jobDone() { self.scheduleBatch() }
        }
    }

    /// Runs the commands of a batch in one write transaction and hands out the results once it committed.
    private func runBatch(_ batch: [WriterQueue.Queued], _ db: Database) {
        let results = batch.count == 1 ? [alone(batch[0], db)] : together(batch, db)
        for (queued, result) in zip(batch, results) { queued.done.resume(returning: result) }
    }

    /// One command in a transaction of its own: when it fails, nothing of it stays.
    private func alone(_ queued: WriterQueue.Queued, _ db: Database) -> Result<Execution, any Error> {
        Result { try inWriteTransaction(db) { try queued.work(db) } }.mapError(Self.storeError)
    }

    /// The commands in one transaction, without a savepoint each (two more statements per command, and GRDB
    /// prepares them every time). A command refused before it wrote anything (the usual refusal: the plan
    /// says no) fails alone and leaves nothing to undo. One that fails after writing, or any database error,
    /// rolls the whole transaction back, and then every command runs again alone: nothing was answered yet.
    private func together(_ batch: [WriterQueue.Queued], _ db: Database) -> [Result<Execution, any Error>] {
        var results: [Result<Execution, any Error>] = []
        results.reserveCapacity(batch.count)
        do {
            try inWriteTransaction(db) {
                for queued in batch {
                    let changes = db.totalChangesCount
                    do {
                        results.append(.success(try queued.work(db)))
                    } catch let error as StoreError where db.totalChangesCount == changes {
                        results.append(.failure(error))
                    }
                }
            }
            return results
        } catch {
            return batch.map { alone($0, db) }
        }
    }

    /// One command in the caller's transaction: replay, or plan, apply and remember its response.
    private func execute(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: (CommandOutcome) throws -> StoredResponse, _ db: Database
    ) throws -> Execution {
        if let idempotency,
            let stored = try db.fetchFirst(
                sql: "SELECT fingerprint, status, body FROM idempotency_keys WHERE scope = ? AND key = ?",
                arguments: [idempotency.scope, idempotency.key],
                { row in (fingerprint: row[0] as String, response: StoredResponse(status: row[1], body: [UInt8](row[2] as Data))) })
        {
            guard stored.fingerprint == idempotency.fingerprint else { throw StoreError(.idempotencyMismatch) }
            return .replayed(stored.response)
        }
        var (snapshot, counters) = try Self.snapshot(for: command, now: now, db)
        // Only an account with something held can have a hold to release first.
        if snapshot.wallet.held > 0, try self.expireHolds(db, userId: command.userId, now: now) > 0 {
            (snapshot, counters) = try Self.snapshot(for: command, now: now, db)
        }
        let plan: LedgerPlan
        do throws(StoreError) {
            plan = try LedgerPlanner.plan(command, snapshot: snapshot, now: now)
        } catch {
            throw StoreError(
                error.code,
                state: AccountState(user: snapshot.user, wallet: snapshot.wallet, counters: counters, installation: snapshot.installation))
        }
        let outcome = try self.apply(plan, snapshot: snapshot, counters: counters, now: now, db)
        let response = try render(outcome)
        if let idempotency {
            try db.run(sql: """
                    INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    idempotency.scope, idempotency.key, idempotency.fingerprint, response.status,
                    Data(response.body), now.millis,
                ])
        }
        return .executed(response)
    }

    /// From the wallet cache when it has the account; else a reader answers and fills the cache. The single
    /// writer is used only when a hold has expired and must be released first.
    public func wallet(userId: String, now: Date) async throws -> WalletState? {
        if let wallet = wallets.value(userId)?.wallet(at: now) { return wallet }
        let epoch = wallets.epoch
        let (entry, mustExpire) = try await read { db -> (CachedWallet?, Bool) in
            guard let row = try db.fetchRow(sql: "SELECT balance, held, version FROM wallets WHERE user_id = ?", arguments: [userId])
            else { return (nil, false) }
            let wallet = WalletState(row: row)
            guard wallet.held > 0 else { return (CachedWallet(wallet: wallet, firstExpiry: nil), false) }
            let firstExpiry = try db.fetchValue(Int64.self, sql: "SELECT min(expires_at) FROM holds WHERE user_id = ? AND status = 'open'",
                arguments: [userId]).map(Date.init(millis:))
            return (CachedWallet(wallet: wallet, firstExpiry: firstExpiry), firstExpiry.map { $0 <= now } ?? false)
        }
        guard let entry else { return nil }
        guard mustExpire else {
            wallets.store(entry, for: userId, readAt: epoch)
            return entry.wallet
        }
        return try await write { db in
            _ = try self.expireHolds(db, userId: userId, now: now)
            return try db.fetchRow(sql: "SELECT balance, held, version FROM wallets WHERE user_id = ?", arguments: [userId])
                .map(WalletState.init(row:))
        }
    }

    /// Like ``wallet(userId:now:)``: a reader, and the writer only to release an expired hold first.
    public func accountState(userId: String, now: Date) async throws -> AccountState? {
        let (state, mustExpire) = try await read { db -> (AccountState?, Bool) in
            guard let state = try Self.accountState(db, userId: userId) else { return (nil, false) }
            return (state, try Self.hasExpiredHold(db, wallet: state.wallet, userId: userId, now: now))
        }
        guard mustExpire else { return state }
        return try await write { db in
            _ = try self.expireHolds(db, userId: userId, now: now)
            return try Self.accountState(db, userId: userId)
        }
    }

    private static func hasExpiredHold(_ db: Database, wallet: WalletState, userId: String, now: Date) throws -> Bool {
        guard wallet.held > 0 else { return false }
        return try db.fetchValue(Bool.self, sql: "SELECT EXISTS (SELECT 1 FROM holds WHERE user_id = ? AND status = 'open' AND expires_at <= ?)",
            arguments: [userId, now.millis]) ?? false
    }

    /// Ledger entries of the account, newest first, with ids below `before` when given.
    public func entries(userId: String, before: Int64?, limit: Int) async throws -> [LedgerEntryRecord] {
        try await read { db in
            try db.fetchRows(sql: "SELECT * FROM ledger_entries WHERE user_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                arguments: [userId, before ?? Int64.max, limit]
            ).map(LedgerEntryRecord.init(row:))
        }
    }

    /// A hold of the account.
    public func hold(id: String, userId: String) async throws -> HoldRecord? {
        try await read { db in
            try db.fetchRow(sql: "SELECT * FROM holds WHERE id = ? AND user_id = ?", arguments: [id, userId])
                .map(HoldRecord.init(row:))
        }
    }

    // MARK: Inside the write transaction

    /// The account as a command plans from it (with the command's hold, its action's counter and a guest's
    /// installation), and every quota counter of the account (for the state the response shows).
    static func snapshot(for command: Command, now: Date, _ db: Database) throws -> (LedgerSnapshot, [String: QuotaCounter]) {
        let userId = command.userId
        guard let account = try db.fetchFirst(sql: accountQuery, arguments: [userId], AccountRow.decode)
        else { throw StoreError(.userNotFound) }
        let (counters, installation) = try Self.counters(db, userId: userId, installation: account.installation)
        var snapshot = LedgerSnapshot(user: account.user, wallet: account.wallet, installation: installation)
        switch command {
        case .captureHold(_, let holdId, _), .releaseHold(_, let holdId):
            snapshot.hold = try db.fetchRow(sql: "SELECT * FROM holds WHERE id = ? AND user_id = ?", arguments: [holdId, userId])
                .map(HoldRecord.init(row:))
        case .performAction(_, let action, _):
            snapshot.counter = action.quota.flatMap { counters[$0] }
        default:
            break
        }
        return (snapshot, counters)
    }

    /// Writes `plan` and returns the outcome, with the account state worked out from the snapshot and the
    /// writes (the wallet as the update returned it) instead of read again.
    func apply(
        _ plan: LedgerPlan, snapshot: LedgerSnapshot, counters: [String: QuotaCounter], now: Date, _ db: Database
    ) throws -> CommandOutcome {
        let userId = snapshot.user.id
        var hold = plan.newHold
        if let newHold = plan.newHold {
            try db.run(sql: "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES (?, ?, ?, 'open', ?, ?)",
                arguments: [newHold.id, userId, newHold.amount, now.millis, newHold.expiresAt.millis])
        }
        if let settle = plan.settleHold, var settled = snapshot.hold {
            try db.run(sql: "UPDATE holds SET status = ?, captured_amount = ?, settled_at = ? WHERE id = ? AND status = 'open'",
                arguments: [settle.status.rawValue, settle.capturedAmount, now.millis, settled.id])
            guard db.changesCount == 1 else { throw StoreError(.holdNotOpen) }
            settled.status = settle.status
            settled.capturedAmount = settle.capturedAmount
            hold = settled
        }
        var entry: LedgerEntryRecord?
        var state = AccountState(user: snapshot.user, wallet: snapshot.wallet, counters: counters, installation: snapshot.installation)
        if let planned = plan.entry {
            (entry, state.wallet) = try append(planned, userId: userId, now: now, db)
        }
        if let (quota, counter) = plan.counter {
            state.counters[quota] = counter.stored
            try db.run(sql: """
                    INSERT INTO quota_counters (user_id, quota, used, window_end) VALUES (?, ?, ?, ?)
                    ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                    """,
                arguments: [userId, quota, counter.used, counter.windowEnd.millis])
        }
        if let (installation, quota, counter) = plan.installationCounter {
            state.installation?.counters[quota] = counter.stored
            try db.run(sql: """
                    INSERT INTO installation_quota_counters (installation, quota, used, window_end) VALUES (?, ?, ?, ?)
                    ON CONFLICT (installation, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                    """,
                arguments: [installation, quota, counter.used, counter.windowEnd.millis])
        }
        if var user = plan.user {
            try db.run(sql: "UPDATE users SET timezone = ?, language = ?, premium_until = ? WHERE id = ?",
                arguments: [user.timezone, user.language, user.premiumUntil?.millis, userId])
            user.premiumUntil = user.premiumUntil.map { Date(millis: $0.millis) }
            state.user = user
        }
        return CommandOutcome(state: state, entry: entry, hold: hold, payment: plan.payment)
    }

    static func accountState(_ db: Database, userId: String) throws -> AccountState? {
        guard let account = try db.fetchFirst(sql: accountQuery, arguments: [userId], AccountRow.decode)
        else { return nil }
        let (counters, installation) = try counters(db, userId: userId, installation: account.installation)
        return AccountState(user: account.user, wallet: account.wallet, counters: counters, installation: installation)
    }

    /// The user and wallet of one account (``AccountRow``).
    static let accountQuery = "SELECT \(AccountRow.columns) FROM users u JOIN wallets w ON w.user_id = u.id WHERE u.id = ?"

    /// Every quota counter of the account and, for a guest, of its installation (`installation`), by quota,
    /// in one statement (a command runs no more statements than before installations counted).
    static func counters(_ db: Database, userId: String, installation: String?) throws
        -> ([String: QuotaCounter], InstallationCounters?)
    {
        var own: [String: QuotaCounter] = [:]
        var installed: [String: QuotaCounter] = [:]
        try db.forEachRow(sql: """
                SELECT 0, quota, used, window_end FROM quota_counters WHERE user_id = ?
                UNION ALL SELECT 1, quota, used, window_end FROM installation_quota_counters WHERE installation = ?
                """,
            arguments: [userId, installation]
        ) { row in
            let counter = QuotaCounter(used: row[2], windowEnd: Date(millis: row[3]))
            if (row[0] as Int) == 0 { own[row[1]] = counter } else { installed[row[1]] = counter }
        }
        return (own, installation.map { InstallationCounters(id: $0, counters: installed) })
    }
}
