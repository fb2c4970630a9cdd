import Foundation
import Logging
import PostgresNIO
import TallyStore

/// What the read of the compare-and-set path found.
enum ActionRead {
    /// The key was used before with this request.
    case replay(StoredResponse)
    /// The account, ready to plan, and the hold the command names (if it exists).
    case account(CachedAccount, hold: HoldRecord?)
    /// No such user, an open hold has expired, or another writer got in the way: the locking path handles it.
    case fallBack
}

/// How one try (plan, then write) of the compare-and-set path ended: what "on conflict" decides on.
private enum Try {
    /// The command ran: its response.
    case executed(StoredResponse)
    /// Planned from the cache, which is out of date: a refusal, or an entry with no id at hand. Nothing was
    /// written, and the cache is no less trusted: read, then plan again.
    case readAgain
    /// The write lost: another writer got there first (the wallet moved, the key was stored meanwhile, a
    /// serialization failure or a deadlock). Nothing was written.
    case conflict
    /// Only the locking path can run the plan (a profile change, a hold that moves without an entry, an
    /// entry with no id after a read).
    case lockingPath
}

extension PostgresStore {
    /// Runs a ledger command (an action, a grant, a hold created, captured or released) on the compare-and-set
    /// path, without a transaction of its own, in four steps:
    /// - **read**: the account as this process last wrote it (``AccountCache``; not for a command on an
    ///   existing hold, which is read), else one statement that reads it with the idempotency lookup and the
    ///   named hold (``read(_:key:now:)``; a replay ends here);
    /// - **plan**: ``LedgerPlanner`` (``plan(_:state:hold:now:)``), and the response rendered from the outcome;
    /// - **write**: one statement whose wallet compare-and-set covers everything the plan read
    ///   (``write(_:outcome:trusted:)``: ``ActionBatchWriteStatement``, sent with the writes of other
    ///   accounts waiting at the same time, see ``StatementBatcher``); the wallet row is locked only for that
    ///   statement and its commit;
    /// - **on conflict** (``Try``): a try planned from the cache reads afresh and tries once more (a refusal,
    ///   too, is answered only from a fresh read, which also looked the key up; a concurrent duplicate of the
    ///   key makes the write fail or miss, and the read replays its response); a try planned from a fresh
    ///   read hands the command to the locking path (contention across processes: it queues on the row lock
    ///   instead of retrying).
    ///
    /// Returns `nil` when the locking path must run it: also when the account has an expired hold to release,
    /// or is missing (a replay of a deleted user's key, or `.userNotFound`).
    func performOptimistically(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution? {
        let known = command.settledHoldId == nil ? accounts.account(command.userId) : nil
        var trusted = known?.trusted ?? true
        if let known, known.trusted {
            // Read: nothing to send. Plan and write from the cache.
            let tried = try await attempt(
                command, from: known.account, hold: nil, fromCache: true, trusted: true, key: idempotency, now: now, render: render)
            // On conflict: read afresh, and no longer write from the cache without a read.
            switch tried {
            case .executed(let response): return .executed(response)
            case .lockingPath: return nil
            case .readAgain: break
            case .conflict: trusted = false
            }
        }
        // Read.
        let account: CachedAccount
        let hold: HoldRecord?
        switch try await read(command, key: idempotency, now: now) {
        case .replay(let response): return .replayed(response)
        case .fallBack: return nil
        case .account(let read, let named): (account, hold) = (read, named)
        }
        // An account other writers moved is trusted again once a read finds it as this process left it.
        if let known, !known.trusted, known.account.stamp == account.stamp { trusted = true }
        // Plan and write.
        let tried = try await attempt(
            command, from: account, hold: hold, fromCache: false, trusted: trusted, key: idempotency, now: now, render: render)
        // On conflict: the locking path.
        guard case .executed(let response) = tried else { return nil }
        return .executed(response)
    }

    /// Read: the account, the idempotency lookup and the named hold, in one statement with the reads waiting
    /// at the same time (``AccountBatchReadStatement``); the entry id is taken when the command may append.
    @inline(__always)
    private func read(_ command: Command, key: IdempotencyKey?, now: Date) async throws -> ActionRead {
        let read = AccountRead(
            userId: command.userId, now: now, allocateEntryId: command.mayAppend, key: key, holdId: command.settledHoldId)
        let found: AccountReadResult?
        do {
            found = try await conflicting { try await readAccount(read) }
        } catch is Conflict {
            return .fallBack
        }
        guard let found else { return .fallBack }
        if let key, let stored = found.stored {
            return .replay(try key.replay(stored.response, storedFingerprint: stored.fingerprint))
        }
        guard !found.hasExpiredHolds else { return .fallBack }
        return .account(found.account, hold: found.hold)
    }

    /// One try from `account` (`fromCache`: as this process last wrote it; else as just read, with `hold`):
    /// plan, render the response from the outcome, write (unless there is nothing to write). A refusal from
    /// a fresh read is thrown, with the account's state. (The steps are inlined: the hot path runs in as
    /// few frames as before they were named.)
    @inline(__always)
    private func attempt(
        _ command: Command, from account: CachedAccount, hold: HoldRecord?, fromCache: Bool, trusted: Bool,
        key: IdempotencyKey?, now: Date, render: (CommandOutcome) throws -> StoredResponse
    ) async throws -> Try {
        let state = account.state
        let plan: LedgerPlan
        do throws(StoreError) {
            guard let planned = try Self.plan(command, state: state, hold: hold, now: now) else { return .lockingPath }
            plan = planned
        } catch {
            if fromCache { return .readAgain }
            throw error
        }
        if plan.entry != nil, account.entryId == nil { return fromCache ? .readAgain : .lockingPath }
        let outcome = CommandOutcome(plan: plan, state: state, hold: hold, entryId: account.entryId, now: now)
        let response = try render(outcome)
        if !fromCache, plan.entry == nil, plan.counter == nil, key == nil {
            // Nothing to write (a premium use without a key): the read was the whole command.
            return .executed(response)
        }
        let action = ActionWrite(account: account, hold: hold, plan: plan, remembered: key.map { ($0, response) }, now: now)
        return try await write(action, outcome: outcome, trusted: trusted) ? .executed(response) : .conflict
    }

    /// Plan: ``LedgerPlanner``'s plan for the account `state` (a refusal carries the state); `nil` when only
    /// the locking path can write it (a profile change, or a hold that moves without an entry).
    @inline(__always)
    private static func plan(_ command: Command, state: AccountState, hold: HoldRecord?, now: Date) throws(StoreError) -> LedgerPlan? {
        let plan = try LedgerPlanner.plan(command, state: state, hold: hold, now: now)
        guard plan.user == nil, plan.entry != nil || (plan.newHold == nil && plan.settleHold == nil) else { return nil }
        return plan
    }

    /// Write: `action` in one statement with the writes waiting at the same time; the account as it left it
    /// is cached (`trusted`: written from without a read next time), after the statement's own declared changes
    /// made the cache forget what it knew of it (``PostgresStore/note(_:_:on:)``). `false`: another writer got
    /// there first.
    @inline(__always)
    private func write(_ action: ActionWrite, outcome: CommandOutcome, trusted: Bool) async throws -> Bool {
        let written: ActionWritten?
        do {
            written = try await send(action)
        } catch is Conflict {
            return false
        }
        // No row: the wallet moved, another process wrote it (this one's actions take turns).
        guard let written else { return false }
        var after = action.account
        (after.state.wallet, after.state.counters, after.state.installation) =
            (outcome.state.wallet, outcome.state.counters, outcome.state.installation)
        after.stamp = written.stamp
        if action.plan.entry != nil { after.entryId = written.nextEntryId }
        accounts.store(after, trusted: trusted)
        return true
    }

    /// Sends `write` through the ``StatementBatcher`` with the writes waiting at the same time; when their batch
    /// failed as a whole, sends it again on its own. `nil`: the wallet moved.
    private func send(_ write: ActionWrite) async throws -> ActionWritten? {
        try await conflicting { try await ledgerWrites.submitOrSendAlone(write) { try await writeActions($0) } }
    }

    /// Runs `work`, turning what another writer caused (the key stored meanwhile, a serialization failure, a
    /// deadlock: ``ErrorDisposition/retry(_:)``) into ``Conflict`` and every other error into what the store reports.
    private func conflicting<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch {
            switch ErrorDisposition.classify(error) {
            case .fail(let error): throw error
            case .retry: throw Conflict()
            }
        }
    }
}

/// Internal signal of the compare-and-set path: another writer got there first.
private struct Conflict: Error {}
