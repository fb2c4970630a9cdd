import Foundation
import Logging
import PostgresNIO
import TallyStore

/// An account as read inside a transaction that holds its wallet's row lock.
struct LockedAccount {
    var user: UserRecord
    var wallet: WalletState
    /// Every quota counter of the account, by quota.
    var counters: [String: QuotaCounter]
    /// A guest's installation and its counters.
    var installation: InstallationCounters?
    /// Whether an open hold has expired by `now` and is not yet released.
    var hasExpiredHolds: Bool
    /// The hold the command names, if any (locked too).
    var hold: HoldRecord?
    /// A ledger entry id taken from the sequence after every earlier entry of the account.
    var entryId: Int64?

    var state: AccountState { AccountState(user: user, wallet: wallet, counters: counters, installation: installation) }
}

/// What the idempotency check found.
enum IdempotencyClaim {
    /// The key is ours and the account's wallet is locked: run the command.
    case proceed
    /// The key was used before with this request.
    case replay(StoredResponse)
}

extension PostgresStore {
    /// Takes the key's advisory lock (without waiting: a concurrent duplicate throws `.idempotencyKeyInUse`),
    /// reads the committed response, and locks the account's wallet, in one statement. The wallet is only
    /// locked when the command is to run, and after the key: a duplicate never queues behind the account.
    /// Without `lockingWallet` (a document write, which locks the user's sync state instead, and the wallet
    /// only to charge an action) the wallet is neither locked nor looked for.
    ///
    /// The lookup reads this statement's snapshot, which may predate the commit of a first request that
    /// released the key a moment ago; that request's row then makes our insert of the key find a conflict,
    /// and the transaction runs again, finding the row.
    func claim(
        _ key: IdempotencyKey, userId: String, lockingWallet: Bool = true, on connection: PooledConnection
    ) async throws -> IdempotencyClaim {
        let rows = try await connection.rows(
            """
            SELECT l.locked, k.fingerprint, k.status, k.body, w.found
            FROM (SELECT pg_try_advisory_xact_lock(hashtextextended(\(key.scope) || ':' || \(key.key), 0)) AS locked) l
            LEFT JOIN idempotency_keys k ON k.scope = \(key.scope) AND k.key = \(key.key)
            LEFT JOIN LATERAL (
              SELECT true AS found FROM wallets
              WHERE user_id = \(userId) AND l.locked AND k.scope IS NULL AND \(lockingWallet) FOR UPDATE
            ) w ON true
            """, logger: logger)
        guard let row = rows.first else { throw PostgresFailure(kind: "no row from the idempotency check") }
        var cells = Cells(row)
        let locked: Bool = try cells.next()
        let fingerprint: String? = try cells.next()
        let status: Int64? = try cells.next()
        let body: Data? = try cells.next()
        let found: Bool? = try cells.next()
        if let fingerprint, let status, let body {
            return .replay(try key.replay(StoredResponse(status: Int(status), body: [UInt8](body)), storedFingerprint: fingerprint))
        }
        guard locked else { throw StoreError(.idempotencyKeyInUse) }
        guard found == true || !lockingWallet else { throw StoreError(.userNotFound) }
        return .proceed
    }

    /// Locks the account's wallet row; `false` when there is no such account.
    func lockWallet(userId: String, on connection: PooledConnection) async throws -> Bool {
        !(try await connection.rows("SELECT 1 FROM wallets WHERE user_id = \(userId) FOR UPDATE", logger: logger)).isEmpty
    }

    /// Reads everything a command may need, in one statement that runs after the wallet lock was taken (so its
    /// snapshot includes every earlier command on the account): user, wallet, counters, a guest's installation
    /// with its counters, whether an open hold has expired, the named hold (locked), and, when asked, the id of
    /// the entry the command may append.
    func lockedAccount(
        userId: String, holdId: String?, allocateEntryId: Bool, now: Date, on connection: PooledConnection
    ) async throws -> LockedAccount? {
        let rows = try await connection.rows(
            """
            SELECT u.id, u.email, u.timezone, u.language, u.premium_until, u.created_at,
                   w.balance, w.held, w.version,
                   c.quotas, c.used, c.window_ends,
                   u.installation, i.quotas, i.used, i.window_ends,
                   w.held > 0 AND EXISTS (
                     SELECT 1 FROM holds WHERE user_id = u.id AND status = 'open' AND expires_at <= \(now.millis)),
                   h.id, h.user_id, h.amount, h.status, h.captured_amount, h.created_at, h.expires_at,
                   CASE WHEN \(allocateEntryId) THEN nextval('ledger_entries_id_seq') END
            FROM users u JOIN wallets w ON w.user_id = u.id
            LEFT JOIN LATERAL (
              SELECT array_agg(quota) AS quotas, array_agg(used) AS used, array_agg(window_end) AS window_ends
              FROM quota_counters WHERE user_id = u.id
            ) c ON true
            LEFT JOIN LATERAL (
              SELECT array_agg(quota) AS quotas, array_agg(used) AS used, array_agg(window_end) AS window_ends
              FROM installation_quota_counters WHERE installation = u.installation
            ) i ON true
            LEFT JOIN LATERAL (
              SELECT id, user_id, amount, status, captured_amount, created_at, expires_at FROM holds
              WHERE id = \(holdId)::TEXT AND user_id = u.id
              FOR UPDATE
            ) h ON true
            WHERE u.id = \(userId)
            """, logger: logger)
        guard let row = rows.first else { return nil }
        var cells = Cells(row)
        let user = try UserRecord(&cells)
        let wallet = try WalletState(&cells)
        let counters = try readCounters(&cells)
        let installation = try readInstallation(&cells)
        let hasExpired: Bool = try cells.next()
        let hold = try HoldRecord.read(&cells)
        let entryId: Int64? = try cells.next()
        return LockedAccount(
            user: user, wallet: wallet, counters: counters, installation: installation, hasExpiredHolds: hasExpired, hold: hold,
            entryId: entryId)
    }

    /// Releases the account's expired holds, as SQLite does at the start of every command (a rare path: one
    /// statement reads and locks them, one releases them all); then takes a new entry id when one was asked
    /// for, so that ids follow the ledger's order.
    func releaseExpired(
        _ account: inout LockedAccount, allocateEntryId: Bool, now: Date, on connection: PooledConnection
    ) async throws {
        guard account.hasExpiredHolds else { return }
        let userId = account.user.id
        let rows = try await connection.rows(
            """
            SELECT id, amount, created_at, expires_at FROM holds
            WHERE user_id = \(userId) AND status = 'open' AND expires_at <= \(now.millis)
            FOR UPDATE
            """, logger: logger)
        let expired = try rows.map { row in
            var cells = Cells(row)
            let id: String = try cells.next()
            let amount: Int64 = try cells.next()
            let createdAt: Int64 = try cells.next()
            let expiresAt: Int64 = try cells.next()
            return HoldRecord(
                id: id, userId: userId, amount: amount, status: .open, capturedAmount: nil,
                createdAt: Date(millis: createdAt), expiresAt: Date(millis: expiresAt))
        }
        account.hasExpiredHolds = false
        guard !expired.isEmpty else { return }
        let wallets = try await Self.expire(expired, wallets: [userId: account.wallet], now: now, on: connection, logger: logger)
        guard let wallet = wallets[userId] else { throw RetryTransaction() }
        account.wallet = wallet
        if var hold = account.hold, expired.contains(where: { $0.id == hold.id }) {
            hold.status = .expired
            account.hold = hold
        }
        if allocateEntryId { account.entryId = try await nextEntryId(on: connection) }
    }

    /// A new ledger entry id.
    func nextEntryId(on connection: PooledConnection) async throws -> Int64 {
        let rows = try await connection.rows("SELECT nextval('ledger_entries_id_seq')", logger: logger)
        guard let row = rows.first else { throw PostgresFailure(kind: "no id from the ledger sequence") }
        var cells = Cells(row)
        return try cells.next(Int64.self)
    }

    /// Reads the account's state and releases its expired holds, under the wallet lock: the slow path of
    /// ``wallet(userId:now:)`` and ``accountState(userId:now:)`` when a hold has expired.
    func releaseExpiredHolds(userId: String, now: Date) async throws -> AccountState? {
        try await transaction { connection in
            guard try await lockWallet(userId: userId, on: connection),
                var account = try await lockedAccount(userId: userId, holdId: nil, allocateEntryId: false, now: now, on: connection)
            else { return nil }
            try await releaseExpired(&account, allocateEntryId: false, now: now, on: connection)
            return account.state
        }
    }
}
