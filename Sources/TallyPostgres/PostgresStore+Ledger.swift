import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// A ledger command (action, grant, hold) first runs optimistically
    /// (``performOptimistically(_:idempotency:now:render:)``: one statement, or a read and a write, with no
    /// transaction around them; the commands of one account take turns in this process, see ``AccountGate``).
    /// Profile changes, and what the optimistic path hands back, run in one locking transaction, three statements between BEGIN and COMMIT in the common case:
    /// the key's advisory lock with its stored response and the wallet's row lock (or the row lock alone
    /// without a key); the account read after the lock (counters, expired and named holds, the next entry
    /// id); the planned writes with the response stored under the key. A replay is BEGIN, one statement,
    /// COMMIT.
    public func execute(
        _ command: Command, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (CommandOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        if Self.isLedgerCommand(command),
            let execution = try await gate.withTurn(command.userId, {
                try await performOptimistically(command, idempotency: idempotency, now: now, render: render)
            })
        {
            return execution
        }
        accounts.remove(command.userId)
        return try await transaction { connection in
            let userId = command.userId
            if let idempotency {
                if case .replay(let response) = try await claim(idempotency, userId: userId, on: connection) {
                    return .replayed(response)
                }
            } else {
                guard try await lockWallet(userId: userId, on: connection) else { throw StoreError(.userNotFound) }
            }
            let allocate = Self.mayAppend(command)
            guard
                var account = try await lockedAccount(
                    userId: userId, holdId: Self.holdId(of: command), allocateEntryId: allocate, now: now, on: connection)
            else { throw StoreError(.userNotFound) }
            try await releaseExpired(&account, allocateEntryId: allocate, now: now, on: connection)

            var snapshot = LedgerSnapshot(
                user: account.user, wallet: account.wallet, hold: account.hold, installation: account.installation)
            if case .performAction(_, let action, _) = command, let quota = action.quota {
                snapshot.counter = account.counters[quota]
            }
            let plan: LedgerPlan
            do throws(StoreError) {
                plan = try LedgerPlanner.plan(command, snapshot: snapshot, now: now)
            } catch {
                throw StoreError(error.code, state: account.state)
            }
            if plan.entry != nil, account.entryId == nil { account.entryId = try await nextEntryId(on: connection) }

            let outcome = Self.outcome(of: plan, on: account, now: now)
            let response: StoredResponse
            do {
                response = try render(outcome)
            } catch {
                throw CallerError(error: error)
            }
            try await apply(
                plan, to: account, remembering: idempotency.map { ($0, response) }, now: now, on: connection)
            return .executed(response)
        }
    }

    /// One statement (``WalletBatchReadStatement``, with the wallet reads waiting at the same time) reads the
    /// wallet and whether an open hold has expired; only then a transaction locks the wallet and releases
    /// the expired holds.
    public func wallet(userId: String, now: Date) async throws -> WalletState? {
        let read = WalletRead(userId: userId, now: now)
        let found = try await retrying { try await walletReads.submitOrSendAlone(read, send: readWallets) }
        guard let found else { return nil }
        guard found.hasExpiredHolds else { return found.wallet }
        return try await releaseExpiredHolds(userId: userId, now: now)?.wallet
    }

    /// One batch of wallet reads as one statement.
    private func readWallets(_ reads: [WalletRead]) async throws -> [WalletReadResult?] {
        let statement = WalletBatchReadStatement(reads: reads)
        return try statement.results(try await prepared(statement))
    }

    /// One statement (``AccountBatchReadStatement``, with the account reads waiting at the same time) reads
    /// the account, wallet and counters, and whether an open hold has expired; only then a transaction locks
    /// the wallet and releases the expired holds.
    public func accountState(userId: String, now: Date) async throws -> AccountState? {
        let read = AccountRead(userId: userId, now: now, allocateEntryId: false, key: nil, holdId: nil)
        guard let found = try await retrying({ try await readAccount(read) }) else { return nil }
        guard found.hasExpiredHolds else { return found.account.state }
        return try await releaseExpiredHolds(userId: userId, now: now)
    }

    /// Reads one account through the batcher of account reads (`nil`: no such user).
    func readAccount(_ read: AccountRead) async throws -> AccountReadResult? {
        try await accountReads.submitOrSendAlone(read) { reads in
            let statement = AccountBatchReadStatement(reads: reads)
            return try statement.results(try await prepared(statement))
        }
    }

    /// Ledger entries of the account, newest first, with ids below `before` when given.
    public func entries(userId: String, before: Int64?, limit: Int) async throws -> [LedgerEntryRecord] {
        // A negative limit means no limit, as in SQLite.
        let limit: Int? = limit < 0 ? nil : limit
        return try await rows(
            """
            SELECT id, kind, amount, held_change, balance_after, reason, created_at FROM ledger_entries
            WHERE user_id = \(userId) AND id < \(before ?? Int64.max)
            ORDER BY id DESC LIMIT \(limit)::BIGINT
            """
        ).map { row in
            var cells = Cells(row)
            return try LedgerEntryRecord(&cells)
        }
    }

    /// A hold of the account.
    public func hold(id: String, userId: String) async throws -> HoldRecord? {
        guard
            let row = try await rows(
                """
                SELECT id, user_id, amount, status, captured_amount, created_at, expires_at FROM holds
                WHERE id = \(id) AND user_id = \(userId)
                """
            ).first
        else { return nil }
        var cells = Cells(row)
        return try HoldRecord.read(&cells)
    }

    // MARK: Planning helpers

    /// Whether the command can append a ledger entry (then the snapshot takes an entry id in passing).
    static func mayAppend(_ command: Command) -> Bool {
        switch command {
        case .grant, .createHold, .captureHold, .releaseHold: return true
        case .performAction(_, let action, _): return action.tokens != nil
        case .setPremium, .updateProfile: return false
        }
    }

    /// Whether the command only moves the ledger (so the optimistic path may run it), not the profile.
    static func isLedgerCommand(_ command: Command) -> Bool {
        switch command {
        case .grant, .createHold, .captureHold, .releaseHold, .performAction: return true
        case .setPremium, .updateProfile: return false
        }
    }

    /// The existing hold the command settles.
    static func holdId(of command: Command) -> String? {
        switch command {
        case .captureHold(_, let holdId, _), .releaseHold(_, let holdId): return holdId
        default: return nil
        }
    }

    /// What the command does, computed from the locked account and the plan exactly as the writes will
    /// leave the rows (instants truncated to milliseconds), so the response is rendered before they run.
    static func outcome(of plan: LedgerPlan, on account: LockedAccount, now: Date) -> CommandOutcome {
        var state = account.state
        var entry: LedgerEntryRecord?
        if let planned = plan.entry, let id = account.entryId {
            state.wallet = account.wallet.applying(planned)
            entry = LedgerEntryRecord(
                id: id, kind: planned.kind, amount: planned.amount, heldChange: planned.heldChange,
                balanceAfter: state.wallet.balance, reason: planned.reason, createdAt: now)
        }
        var hold = plan.newHold
        if let settle = plan.settleHold, var settled = account.hold {
            settled.status = settle.status
            settled.capturedAmount = settle.capturedAmount
            hold = settled
        }
        if let (quota, counter) = plan.counter { state.counters[quota] = counter.stored }
        if let (_, quota, counter) = plan.installationCounter { state.installation?.counters[quota] = counter.stored }
        if let user = plan.user { state.user = user.stored }
        return CommandOutcome(state: state, entry: entry, hold: hold, payment: plan.payment)
    }
}
