import Foundation
import Logging
import PostgresNIO
import TallyStore

/// A response to store under its idempotency key, with the command's writes.
typealias Remembered = (key: IdempotencyKey, response: StoredResponse)

extension PostgresStore {
    /// Applies `plan` to the locked account and stores the response under its key, in one statement for
    /// every plan the planner makes: the entry (wallet and ledger, with the new or settled hold if any), the
    /// counter, or the profile, each together with the key's row (or the key's row alone).
    ///
    /// Every write to what a plan reads rewrites the wallet row — a counter or a profile rewrites it
    /// unchanged — so the row's `xmin` moves and an optimistic action planned from before fails its
    /// compare-and-set (see ``ActionBatchWriteStatement``).
    func apply(
        _ plan: LedgerPlan, to account: LockedAccount, remembering remembered: Remembered?, now: Date,
        on connection: PooledConnection
    ) async throws {
        let movesHolds = plan.newHold != nil || plan.settleHold != nil
        var pending = remembered
        /// The key's row goes with the last statement.
        func take(_ isLast: Bool) -> Remembered? {
            guard isLast else { return nil }
            defer { pending = nil }
            return pending
        }
        if movesHolds {
            try await applyHoldEntry(plan, to: account, remembering: take(plan.counter == nil && plan.user == nil), now: now, on: connection)
        } else if let entry = plan.entry {
            let remember = take(plan.counter == nil && plan.user == nil)
            let after = account.wallet.applying(entry)
            // The hot path (debits, grants): the planning of unused hold statements is worth saving.
            let rows = try await connection.rows(
                """
                WITH moved AS (
                  UPDATE wallets SET balance = \(after.balance), held = \(after.held), version = \(after.version)
                  WHERE user_id = \(account.user.id) AND version = \(account.wallet.version)
                  RETURNING 1
                ), appended AS (
                  INSERT INTO ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
                  OVERRIDING SYSTEM VALUE
                  SELECT \(account.entryId)::BIGINT, \(account.user.id), \(entry.kind.rawValue), \(entry.amount), \(entry.heldChange),
                         \(after.balance), \(after.held), \(entry.reason)::TEXT, \(now.millis)
                  FROM moved
                ), remembered AS (
                  INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
                  SELECT \(remember?.key.scope)::TEXT, \(remember?.key.key)::TEXT, \(remember?.key.fingerprint)::TEXT,
                         \(remember.map { Int64($0.response.status) })::BIGINT, \(remember.map { Data($0.response.body) })::BYTEA,
                         \(now.millis)
                  WHERE \(remember != nil)
                  ON CONFLICT (scope, key) DO NOTHING
                  RETURNING 1
                )
                SELECT (SELECT count(*) FROM remembered), (SELECT count(*) FROM moved)
                """, logger: logger)
            try Self.check(rows, remembered: remember, expected: [1])
        }
        if let (quota, counter) = plan.counter {
            let remember = take(plan.user == nil)
            let installation = plan.installationCounter
            let rows = try await connection.rows(
                """
                WITH touched AS (
                  UPDATE wallets SET version = version WHERE user_id = \(account.user.id)
                ), counted AS (
                  INSERT INTO quota_counters (user_id, quota, used, window_end)
                  VALUES (\(account.user.id), \(quota), \(Int64(counter.used)), \(counter.windowEnd.millis))
                  ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                ), counted_installation AS (
                  INSERT INTO installation_quota_counters (installation, quota, used, window_end)
                  SELECT \(installation?.installation)::TEXT, \(quota), \(installation.map { Int64($0.value.used) })::BIGINT,
                         \(installation?.value.windowEnd.millis)::BIGINT
                  WHERE \(installation != nil)
                  ON CONFLICT (installation, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                ), remembered AS (
                  INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
                  SELECT \(remember?.key.scope)::TEXT, \(remember?.key.key)::TEXT, \(remember?.key.fingerprint)::TEXT,
                         \(remember.map { Int64($0.response.status) })::BIGINT, \(remember.map { Data($0.response.body) })::BYTEA,
                         \(now.millis)
                  WHERE \(remember != nil)
                  ON CONFLICT (scope, key) DO NOTHING
                  RETURNING 1
                )
                SELECT (SELECT count(*) FROM remembered)
                """, logger: logger)
            try Self.check(rows, remembered: remember, expected: [])
        }
        if let user = plan.user {
            let remember = take(true)
            let rows = try await connection.rows(
                """
                WITH touched AS (
                  UPDATE wallets SET version = version WHERE user_id = \(account.user.id)
                ), changed AS (
                  UPDATE users SET timezone = \(user.timezone), language = \(user.language)::TEXT,
                         premium_until = \(user.premiumUntil?.millis)::BIGINT
                  WHERE id = \(account.user.id)
                ), remembered AS (
                  INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
                  SELECT \(remember?.key.scope)::TEXT, \(remember?.key.key)::TEXT, \(remember?.key.fingerprint)::TEXT,
                         \(remember.map { Int64($0.response.status) })::BIGINT, \(remember.map { Data($0.response.body) })::BYTEA,
                         \(now.millis)
                  WHERE \(remember != nil)
                  ON CONFLICT (scope, key) DO NOTHING
                  RETURNING 1
                )
                SELECT (SELECT count(*) FROM remembered)
                """, logger: logger)
            try Self.check(rows, remembered: remember, expected: [])
        }
        if let remember = pending {
            // Nothing to write but the response (a premium action).
            try await self.remember(remember, now: now, on: connection)
        }
    }

    /// Stores a response under its key on its own, in the transaction of `connection` (whose claim took the
    /// key's advisory lock); a key stored meanwhile by another instance makes the transaction run again.
    func remember(_ remember: Remembered, now: Date, on connection: PooledConnection) async throws {
        let rows = try await connection.rows(
            """
            WITH remembered AS (
              INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
              VALUES (\(remember.key.scope), \(remember.key.key), \(remember.key.fingerprint),
                      \(Int64(remember.response.status)), \(Data(remember.response.body)), \(now.millis))
              ON CONFLICT (scope, key) DO NOTHING
              RETURNING 1
            )
            SELECT (SELECT count(*) FROM remembered)
            """, logger: logger)
        try Self.check(rows, remembered: remember, expected: [])
    }

    /// The wallet, its new ledger entry (with the id the snapshot took), a new hold and a settled hold.
    /// The wallet moves only from the version read under the lock.
    private func applyHoldEntry(
        _ plan: LedgerPlan, to account: LockedAccount, remembering remember: Remembered?, now: Date,
        on connection: PooledConnection
    ) async throws {
        let userId = account.user.id
        let entry = plan.entry
        let after = entry.map { account.wallet.applying($0) } ?? account.wallet
        let newHold = plan.newHold
        let settle = plan.settleHold
        let rows = try await connection.rows(
            """
            WITH moved AS (
              UPDATE wallets SET balance = \(after.balance), held = \(after.held), version = \(after.version)
              WHERE \(entry != nil) AND user_id = \(userId) AND version = \(account.wallet.version)
              RETURNING 1
            ), appended AS (
              INSERT INTO ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
              OVERRIDING SYSTEM VALUE
              SELECT \(account.entryId)::BIGINT, \(userId), \(entry?.kind.rawValue)::TEXT, \(entry?.amount)::BIGINT,
                     \(entry?.heldChange)::BIGINT, \(after.balance), \(after.held), \(entry?.reason)::TEXT, \(now.millis)
              FROM moved
            ), opened AS (
              INSERT INTO holds (id, user_id, amount, status, created_at, expires_at)
              SELECT \(newHold?.id)::TEXT, \(userId), \(newHold?.amount)::BIGINT, 'open', \(now.millis),
                     \(newHold?.expiresAt.millis)::BIGINT
              WHERE \(newHold != nil)
            ), settled AS (
              UPDATE holds SET status = \(settle?.status.rawValue)::TEXT, captured_amount = \(settle?.capturedAmount)::BIGINT,
                     settled_at = \(now.millis)
              WHERE \(settle != nil) AND id = \(account.hold?.id)::TEXT AND user_id = \(userId) AND status = 'open'
              RETURNING 1
            ), remembered AS (
              INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
              SELECT \(remember?.key.scope)::TEXT, \(remember?.key.key)::TEXT, \(remember?.key.fingerprint)::TEXT,
                     \(remember.map { Int64($0.response.status) })::BIGINT, \(remember.map { Data($0.response.body) })::BYTEA,
                     \(now.millis)
              WHERE \(remember != nil)
              ON CONFLICT (scope, key) DO NOTHING
              RETURNING 1
            )
            SELECT (SELECT count(*) FROM remembered), (SELECT count(*) FROM moved), (SELECT count(*) FROM settled)
            """, logger: logger)
        // Under the wallet lock the hold read open stays open; SQLite checks anyway, and so do we.
        if settle != nil, let row = rows.first {
            var cells = Cells(row)
            _ = try cells.next(Int64.self)
            _ = try cells.next(Int64.self)
            guard try cells.next(Int64.self) == 1 else { throw StoreError(.holdNotOpen) }
        }
        try Self.check(rows, remembered: remember, expected: [entry != nil ? 1 : 0])
    }

    /// Checks a write's counts: first whether the key's row was stored, then `expected` row counts.
    /// A key stored meanwhile by another instance, or a wallet that moved, makes the transaction run again.
    private static func check(_ rows: [PostgresRow], remembered: Remembered?, expected: [Int64]) throws {
        guard let row = rows.first else { throw RetryTransaction() }
        var cells = Cells(row)
        let stored: Int64 = try cells.next()
        guard stored == (remembered == nil ? 0 : 1) else { throw RetryTransaction() }
        for count in expected {
            guard try cells.next(Int64.self) == count else { throw RetryTransaction() }
        }
    }
}
