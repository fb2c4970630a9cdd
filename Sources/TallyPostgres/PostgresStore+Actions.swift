import Foundation
import Logging
import PostgresNIO
import TallyStore

/// What the optimistic read found.
enum ActionRead {
    /// The key was used before with this request.
    case replay(StoredResponse)
    /// The account, ready to plan, and the hold the command names (if it exists).
    case account(CachedAccount, hold: HoldRecord?)
    /// No such user, or an open hold has expired: the locking path handles it.
    case fallBack
}

extension PostgresStore {
    /// How many times a command reads its account afresh to try again optimistically before it takes the
    /// locking path (which, under contention on one wallet, wastes no writes: it queues on the row lock).
    static let optimisticReads = 1

    /// Runs a ledger command (an action, a grant, a hold created, captured or released) without a
    /// transaction of its own: plans from the account as this process last wrote it (``AccountCache``; not
    /// for a command on an existing hold, which is read), or as one statement reads it with the idempotency
    /// lookup and the named hold, then applies the plan
    /// in one statement whose wallet compare-and-set covers everything the plan read
    /// (``ActionBatchWriteStatement``, sent with the writes of other accounts waiting at the same time, see
    /// ``StatementBatcher``). The wallet row is locked only for that statement and its commit.
    ///
    /// A cached account that moved meanwhile (another process wrote it) is read afresh once. A refusal is
    /// answered only from a fresh read, which also looked the key up; a concurrent duplicate of the key
    /// makes the write fail or miss, and the next read replays its response. Returns `nil` when the locking
    /// path must run it: the account has an expired hold to release, or is missing (a replay of a deleted
    /// user's key, or `.userNotFound`), or the wallet moved under a write planned from a fresh read
    /// (contention across processes: the locking path queues on the row lock instead of retrying).
    func performOptimistically(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution? {
        let userId = command.userId
        let holdId = Self.holdId(of: command)
        var quota: String?
        if case .performAction(_, let action, _) = command { quota = action.quota }
        let known = holdId == nil ? accounts.account(userId) : nil
        var cached = known?.trusted == true ? known?.account : nil
        // An untrusted account is checked against the next read: if nobody else wrote it, trust it again.
        var expectedStamp = known?.trusted == false ? known?.account.stamp : nil
        var trusted = known?.trusted ?? true
        var reads = 0
        while true {
            let fresh = cached == nil
            if fresh {
                guard reads < Self.optimisticReads else { return nil }
                reads += 1
            }
            let account: CachedAccount
            var hold: HoldRecord?
            if let cached {
                account = cached
            } else {
                let read: ActionRead
                do {
                    read = try await readForAction(
                        userId: userId, allocateEntryId: Self.mayAppend(command), key: idempotency, holdId: holdId, now: now)
                } catch is Conflict {
                    continue
                }
                switch read {
                case .replay(let response): return .replayed(response)
                case .fallBack: return nil
                case .account(let read, let named): (account, hold) = (read, named)
                }
                if let expectedStamp, expectedStamp == account.stamp { trusted = true }
            }
            cached = nil

            var snapshot = LedgerSnapshot(user: account.user, wallet: account.wallet, hold: hold, installation: account.installation)
            if let quota { snapshot.counter = account.counters[quota] }
            let plan: LedgerPlan
            do throws(StoreError) {
                plan = try LedgerPlanner.plan(command, snapshot: snapshot, now: now)
            } catch {
                guard fresh else { continue }
                throw StoreError(error.code, state: account.state)
            }
            // A profile change, or a hold that moves without an entry, takes the locking path.
            guard plan.user == nil, plan.entry != nil || (plan.newHold == nil && plan.settleHold == nil) else { return nil }
            if plan.entry != nil, account.entryId == nil {
                guard fresh else { continue }
                return nil
            }

            var locked = account.locked
            locked.hold = hold
            let response = try render(Self.outcome(of: plan, on: locked, now: now))
            if fresh, plan.entry == nil, plan.counter == nil, idempotency == nil {
                // Nothing to write (a premium use without a key): the read was the whole command.
                return .executed(response)
            }
            let write = ActionWrite(
                account: account, hold: hold, plan: plan, remembered: idempotency.map { ($0, response) }, now: now)
            let written: ActionWritten?
            do {
                written = try await send(write)
            } catch is Conflict {
                trusted = fresh && trusted
                continue
            }
            guard let written else {
                // The wallet moved: another process wrote it (this one's actions take turns).
                (trusted, expectedStamp) = (false, nil)
                continue
            }
            accounts.store(Self.written(plan, on: account, result: written), trusted: trusted)
            return .executed(response)
        }
    }

    /// The account as the write left it: the plan applied, the wallet's new stamp, and (after an entry) the
    /// id for the next one, from the write's row.
    private static func written(_ plan: LedgerPlan, on account: CachedAccount, result: ActionWritten) -> CachedAccount {
        var after = account
        after.stamp = result.stamp
        if let entry = plan.entry {
            after.wallet = account.wallet.applying(entry)
            after.entryId = result.nextEntryId
        }
        if let (quota, counter) = plan.counter { after.counters[quota] = counter.stored }
        if let (_, quota, counter) = plan.installationCounter { after.installation?.counters[quota] = counter.stored }
        return after
    }

    /// Sends `write` through the ``StatementBatcher`` with the writes waiting at the same time; when their batch
    /// failed as a whole, sends it again on its own. `nil`: the wallet moved.
    private func send(_ write: ActionWrite) async throws -> ActionWritten? {
        try await conflicting { try await ledgerWrites.submitOrSendAlone(write, send: sendBatch) }
    }

    /// One batch of writes as one statement (``ActionBatchWriteStatement``), of the smallest shape that carries them.
    private func sendBatch(_ writes: [ActionWrite]) async throws -> [ActionWritten?] {
        func send<Shape: BatchShape>(_: Shape.Type) async throws -> [ActionWritten?] {
            let statement = ActionBatchWriteStatement<Shape>(writes: writes)
            return try statement.results(try await prepared(statement))
        }
        let movesHolds = writes.contains { $0.plan.newHold != nil || $0.plan.settleHold != nil }
        let countsInstallations = writes.contains { $0.plan.installationCounter != nil }
        switch (movesHolds, countsInstallations) {
        case (false, false): return try await send(LedgerWrites.self)
        case (true, false): return try await send(HoldWrites.self)
        case (false, true): return try await send(InstallationWrites.self)
        case (true, true): return try await send(HoldAndInstallationWrites.self)
        }
    }

    /// The account, the idempotency lookup and the named hold, read with the reads waiting at the same time
    /// (``AccountBatchReadStatement``).
    private func readForAction(
        userId: String, allocateEntryId: Bool, key: IdempotencyKey?, holdId: String?, now: Date
    ) async throws -> ActionRead {
        let read = AccountRead(userId: userId, now: now, allocateEntryId: allocateEntryId, key: key, holdId: holdId)
        guard let found = try await conflicting({ try await readAccount(read) }) else { return .fallBack }
        if let key, let stored = found.stored {
            guard stored.fingerprint == key.fingerprint else { throw StoreError(.idempotencyMismatch) }
            return .replay(stored.response)
        }
        guard !found.hasExpiredHolds else { return .fallBack }
        return .account(found.account, hold: found.hold)
    }

    /// Runs `work`, turning what another writer caused (the key stored meanwhile, a serialization failure, a
    /// deadlock) into ``Conflict`` and every other error into what the store reports.
    private func conflicting<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch let error as PSQLError where error.serverInfo?[.constraintName] == "idempotency_keys_pkey" {
            throw Conflict()
        } catch {
            switch ErrorDisposition.classify(error) {
            case .fail(let error): throw error
            case .retry: throw Conflict()
            }
        }
    }
}

/// Internal signal of the optimistic path: another writer got there first; read again.
private struct Conflict: Error {}
