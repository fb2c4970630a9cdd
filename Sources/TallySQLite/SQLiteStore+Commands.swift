import Foundation
import GRDB
import TallyStore

extension SQLiteStore: LedgerStore {
    /// Runs a ledger command through the single writer (see ``LedgerStore/execute(_:idempotency:now:render:)``).
    public func execute(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        try await queued { db in
            try self.idempotent(idempotency, now: now, db) { try render(try self.perform(command, now: now, db)) }
        }
    }

    /// Runs `work` in the writer's next batch (``WriterQueue``): one transaction, shared with the other calls
    /// that waited at the same time.
    func queued(_ work: @escaping Work) async throws -> Execution {
        try await writerQueue.run(work, schedule: scheduleBatch).get()
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

    // MARK: Inside the write transaction

    /// In the caller's transaction: the response stored under `idempotency` replayed (`.idempotencyMismatch` for
    /// another request), else `respond`'s response, stored under the key. A refusal `respond` throws stores nothing.
    func idempotent(_ idempotency: IdempotencyKey?, now: Date, _ db: Database, _ respond: () throws -> StoredResponse) throws -> Execution {
        if let idempotency,
            let stored = try db.fetchFirst(
                sql: "SELECT fingerprint, status, body FROM idempotency_keys WHERE scope = ? AND key = ?",
                arguments: [idempotency.scope, idempotency.key],
                { row in (fingerprint: row[0] as String, response: StoredResponse(status: row[1], body: [UInt8](row[2] as Data))) })
        {
            return .replayed(try idempotency.replay(stored.response, storedFingerprint: stored.fingerprint))
        }
        let response = try respond()
        if let idempotency {
            // The scope is not always an account's id: no cache reads the table, so the key matters to none.
            try db.run(
                SQLiteWrites.rememberResponse, changing: .all,
                arguments: [
                    idempotency.scope, idempotency.key, idempotency.fingerprint, response.status,
                    Data(response.body), now.millis,
                ])
        }
        return .executed(response)
    }

    /// Plans and applies `command` in the caller's transaction. `known`: the account as an earlier command of
    /// the same transaction left it (only for a command that settles no hold); else it is read, with its
    /// expired holds released first.
    func perform(_ command: Command, known: AccountState? = nil, now: Date, _ db: Database) throws -> CommandOutcome {
        var (state, hold): (AccountState, HoldRecord?)
        if let known, command.settledHoldId == nil {
            (state, hold) = (known, nil)
        } else {
            (state, hold) = try Self.account(for: command, db)
            // Only an account with something held can have a hold to release first.
            if state.wallet.held > 0, try self.expireHolds(db, userId: command.userId, now: now) > 0 {
                (state, hold) = try Self.account(for: command, db)
            }
        }
        let plan = try LedgerPlanner.plan(command, state: state, hold: hold, now: now)
        return try self.apply(plan, state: state, hold: hold, now: now, db)
    }

    /// The account as a command plans from it (every quota counter, and a guest's installation with its
    /// counters), with the hold the command settles.
    static func account(for command: Command, _ db: Database) throws -> (AccountState, HoldRecord?) {
        guard let state = try accountState(db, userId: command.userId) else { throw StoreError(.userNotFound) }
        let hold = try command.settledHoldId.flatMap { holdId in
            try db.fetchRow(sql: "SELECT * FROM holds WHERE id = ? AND user_id = ?", arguments: [holdId, command.userId])
                .map(HoldRecord.init(row:))
        }
        return (state, hold)
    }

    /// Writes `plan` and returns its outcome, worked out from the account as read and the plan
    /// (``CommandOutcome/init(plan:state:hold:entryId:now:)``) instead of read again.
    func apply(_ plan: LedgerPlan, state: AccountState, hold: HoldRecord?, now: Date, _ db: Database) throws -> CommandOutcome {
        let userId = state.user.id
        if let newHold = plan.newHold {
            try db.run(
                SQLiteWrites.openHold, changing: .user(userId), arguments: [newHold.id, userId, newHold.amount, now.millis, newHold.expiresAt.millis])
        }
        if let settle = plan.settleHold, let hold {
            try db.run(
                SQLiteWrites.settleHold, changing: .user(userId), arguments: [settle.status.rawValue, settle.capturedAmount, now.millis, hold.id])
            guard db.changesCount == 1 else { throw StoreError(.holdNotOpen) }
        }
        var entryId: Int64?
        if let planned = plan.entry {
            entryId = try append(planned, userId: userId, from: state.wallet, now: now, db).id
        }
        if let (quota, counter) = plan.counter {
            try db.run(SQLiteWrites.storeQuotaCounter, changing: .user(userId), arguments: [userId, quota, counter.used, counter.windowEnd.millis])
        }
        if let (installation, quota, counter) = plan.installationCounter {
            try db.run(
                SQLiteWrites.storeInstallationCounter, changing: .all, arguments: [installation, quota, counter.used, counter.windowEnd.millis])
        }
        if let user = plan.user {
            try db.run(
                SQLiteWrites.changeProfile, changing: .user(userId), arguments: [user.timezone, user.language, user.premiumUntil?.millis, userId])
        }
        return CommandOutcome(plan: plan, state: state, hold: hold, entryId: entryId, now: now)
    }
}
