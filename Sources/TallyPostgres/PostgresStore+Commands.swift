import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// A ledger command (action, grant, hold) first runs on the compare-and-set path
    /// (``performOptimistically(_:idempotency:now:render:)``: one statement, or a read and a write, with no
    /// transaction around them; the commands of one account take turns in this process, see ``AccountGate``).
    /// Profile changes, and what that path hands back, run on the locking path
    /// (``executeLocked(_:idempotency:now:render:)``).
    public func execute(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        if command.isLedgerCommand,
            let execution = try await gate.withTurn(command.userId, {
                try await performOptimistically(command, idempotency: idempotency, now: now, render: render)
            })
        {
            return execution
        }
        // Not a write of this process (those are forgotten as their declarations say, when they commit): the
        // compare-and-set path gave up on what it knew of the account, so it is not written from again before a read.
        accounts.remove(command.userId)
        return try await executeLocked(command, idempotency: idempotency, now: now, render: render)
    }

    /// The locking path: one transaction, three statements between BEGIN and COMMIT in the common case: the
    /// key's advisory lock with its stored response and the wallet's row lock (or the row lock alone without
    /// a key); the account read after the lock (counters, expired and named holds, the next entry id); the
    /// planned writes with the response stored under the key. A replay is BEGIN, one statement, COMMIT.
    func executeLocked(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        try await transaction { connection in
            let userId = command.userId
            if let idempotency {
                if case .replay(let response) = try await claim(idempotency, userId: userId, on: connection) {
                    return .replayed(response)
                }
            } else {
                guard try await lockWallet(userId: userId, on: connection) else { throw StoreError(.userNotFound) }
            }
            let planned = try await planLocked(
                command, from: try await lockedAccount(for: command, now: now, on: connection), now: now, on: connection)
            let outcome = planned.outcome
            let response: StoredResponse
            do {
                response = try render(outcome)
            } catch {
                throw CallerError(error: error)
            }
            try await apply(
                planned.plan, to: planned.account, remembering: idempotency.map { ($0, response) }, now: now, on: connection)
            return .executed(response)
        }
    }

    /// The account `command` plans from, for a transaction that holds its wallet row lock: read
    /// (``lockedAccount(userId:holdId:allocateEntryId:now:on:)``) with its expired holds released.
    func lockedAccount(for command: Command, now: Date, on connection: PooledConnection) async throws -> LockedAccount {
        let allocate = command.mayAppend
        guard
            var account = try await lockedAccount(
                userId: command.userId, holdId: command.settledHoldId, allocateEntryId: allocate, now: now, on: connection)
        else { throw StoreError(.userNotFound) }
        try await releaseExpired(&account, allocateEntryId: allocate, now: now, on: connection)
        return account
    }

    /// The locking path's plan of `command` from `account` (as read under the wallet lock, or as this
    /// transaction's previous plan left it: ``LockedPlan/applied``): a refusal throws with the account's
    /// state, and an entry id is taken when the plan appends an entry and the account has none at hand.
    /// ``apply(_:to:remembering:now:on:)`` writes it. Commands and the charges of metered collections
    /// (``DocumentWriter``) plan this way.
    func planLocked(_ command: Command, from account: LockedAccount, now: Date, on connection: PooledConnection) async throws
        -> LockedPlan
    {
        var account = account
        let state = account.state
        let plan = try LedgerPlanner.plan(command, state: state, hold: account.hold, now: now)
        if plan.entry != nil, account.entryId == nil { account.entryId = try await nextEntryId(on: connection) }
        let outcome = CommandOutcome(plan: plan, state: state, hold: account.hold, entryId: account.entryId, now: now)
        return LockedPlan(account: account, plan: plan, outcome: outcome)
    }
}

/// A command planned under its account's wallet lock: the account as read, the plan, and what it does.
struct LockedPlan {
    var account: LockedAccount
    var plan: LedgerPlan
    var outcome: CommandOutcome

    /// The account as ``PostgresStore/apply(_:to:remembering:now:on:)`` leaves it, for the next plan of the
    /// same transaction: profile, wallet and counters moved, its entry id used (a command that names no hold).
    var applied: LockedAccount {
        var after = account
        after.state = outcome.state
        if plan.entry != nil { after.entryId = nil }
        return after
    }
}
