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
            let planned = try await planLocked(command, now: now, on: connection)
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

    /// The locking path's plan, for a transaction that holds the account's wallet row lock: reads the account
    /// (``lockedAccount(userId:holdId:allocateEntryId:now:on:)``), releases its expired holds, plans the
    /// command (a refusal throws with the account's state) and takes an entry id when the plan appends one.
    /// ``apply(_:to:remembering:now:on:)`` writes it. Commands and document writes that charge a metered
    /// collection's action (`PostgresStore+Documents.swift`) plan this way.
    func planLocked(_ command: Command, now: Date, on connection: PooledConnection) async throws -> LockedPlan {
        let allocate = command.mayAppend
        guard
            var account = try await lockedAccount(
                userId: command.userId, holdId: command.settledHoldId, allocateEntryId: allocate, now: now, on: connection)
        else { throw StoreError(.userNotFound) }
        try await releaseExpired(&account, allocateEntryId: allocate, now: now, on: connection)
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
}
