import Foundation
import Logging
import PostgresNIO
import TallyStore

/// A response to store under its idempotency key, with the command's writes.
typealias Remembered = (key: IdempotencyKey, response: StoredResponse)

extension PostgresStore {
    /// Applies `plan` to the locked account and stores the response under its key, in one statement: a profile
    /// change (``changeProfile(_:of:remembering:now:on:)``), or everything else the planner plans — the entry
    /// (wallet and ledger, with the new or settled hold if any), the counters, or the key alone — as the
    /// compare-and-set path's ``ActionBatchWriteStatement`` for this one command, moving the wallet from the
    /// version read under its lock.
    ///
    /// Every write to what a plan reads rewrites the wallet row — a counter or a profile rewrites it
    /// unchanged — so the row's `xmin` moves and an optimistic action planned from before fails its
    /// compare-and-set (see ``ActionBatchWriteStatement``).
    func apply(
        _ plan: LedgerPlan, to account: LockedAccount, remembering remembered: Remembered?, now: Date,
        on connection: PooledConnection
    ) async throws {
        if let user = plan.user {
            // The planner changes a profile alone (`setPremium`, `updateProfile`): its statement writes nothing else.
            guard plan.entry == nil, plan.counter == nil, plan.newHold == nil, plan.settleHold == nil else {
                throw PostgresFailure(kind: "a plan that changes the profile and the ledger")
            }
            try await changeProfile(user, of: account, remembering: remembered, now: now, on: connection)
            return
        }
        let locked = CachedAccount(state: account.state, stamp: "", entryId: account.entryId)
        let write = ActionWrite(account: locked, hold: account.hold, plan: plan, remembered: remembered, now: now)
        // Under the wallet's lock the wallet is as read; if it moved anyway, start over.
        guard case .some(.some) = try await writeActions([write], on: connection).first else { throw RetryTransaction() }
    }

    /// The profile `user` (time zone, language, premium) of the locked `account`, with its wallet row rewritten
    /// unchanged and the response under its key, in one statement.
    private func changeProfile(
        _ user: UserRecord, of account: LockedAccount, remembering remembered: Remembered?, now: Date, on connection: PooledConnection
    ) async throws {
        var ledger = LedgerRows(), keys = KeyRows()
        ledger.move(userId: account.state.user.id, from: account.state.wallet, now: now)
        keys.append(remembered)
        var statement = BoundStatement()
        let source = statement.relation([ledger, keys], as: "b")
        let write = Writes.changeProfile(
            source: source, timezone: statement.bind(user.timezone), language: statement.bind(user.language),
            premiumUntil: statement.bind(user.premiumUntil?.millis))
        let rows = try await run(write, statement, changing: [.user(account.state.user.id)], on: connection)
        guard try Self.single(rows, "a profile change")["moved"] == Int64(1) else { throw RetryTransaction() }
    }

    /// Stores a response under its key on its own, in the transaction of `connection` (whose claim took the
    /// key's advisory lock); a key stored meanwhile by another instance makes the transaction run again.
    func remember(_ remember: Remembered, now: Date, on connection: PooledConnection) async throws {
        var keys = KeyRows()
        keys.append(remember)
        var statement = BoundStatement()
        let source = statement.relation([keys, MomentRows(createdAt: [now.millis])], as: "k")
        try await run(Writes.rememberAlone(source: source), statement, changing: [.user(remember.key.scope)], on: connection)
    }
}
