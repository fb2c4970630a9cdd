import Foundation
import Logging
import PostgresNIO
import TallyStore

/// An account as read inside a transaction that holds its wallet's row lock.
struct LockedAccount {
    /// The user, the wallet, every quota counter and a guest's installation with its counters.
    var state: AccountState
    /// Whether an open hold has expired by `now` and is not yet released.
    var hasExpiredHolds: Bool
    /// The hold the command names, if any (locked too).
    var hold: HoldRecord?
    /// A ledger entry id taken from the sequence after every earlier entry of the account.
    var entryId: Int64?
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
        let row = try Self.single(rows, "the idempotency check")
        let locked: Bool = try row["locked"]
        let fingerprint: String? = try row["fingerprint"]
        let status: Int64? = try row["status"]
        let body: Data? = try row["body"]
        let found: Bool? = try row["found"]
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
            SELECT \(unescaped: UserRecord.columns(of: "u")),
                   w.balance, w.held, w.version,
                   c.quotas, c.used, c.window_ends,
                   u.installation, i.installation_quotas, i.installation_used, i.installation_window_ends,
                   w.held > 0 AND EXISTS (
                     SELECT 1 FROM holds WHERE user_id = u.id AND status = 'open' AND expires_at <= \(now.millis)) AS has_expired_holds,
                   \(unescaped: HoldRecord.columns(of: "h")),
                   CASE WHEN \(allocateEntryId) THEN nextval('ledger_entries_id_seq') END AS entry_id
            FROM users u JOIN wallets w ON w.user_id = u.id
            \(unescaped: counterJoins(user: "u"))
            LEFT JOIN LATERAL (
              SELECT id, user_id, amount, status, captured_amount, created_at, expires_at FROM holds
              WHERE id = \(holdId)::TEXT AND user_id = u.id
              FOR UPDATE
            ) h ON true
            WHERE u.id = \(userId)
            """, logger: logger)
        guard let row = rows.first.map(Columns.init) else { return nil }
        return LockedAccount(
            state: AccountState(
                user: try UserRecord(row), wallet: try WalletState(row), counters: try readCounters(row),
                installation: try readInstallation(row)),
            hasExpiredHolds: try row["has_expired_holds"], hold: try HoldRecord.read(row), entryId: try row["entry_id"])
    }

    /// Releases the account's expired holds, as SQLite does at the start of every command (a rare path: one
    /// statement reads and locks them, one releases them all); then takes a new entry id when one was asked
    /// for, so that ids follow the ledger's order.
    func releaseExpired(
        _ account: inout LockedAccount, allocateEntryId: Bool, now: Date, on connection: PooledConnection
    ) async throws {
        guard account.hasExpiredHolds else { return }
        let userId = account.state.user.id
        let rows = try await connection.rows(
            """
            SELECT \(unescaped: HoldRecord.columns(of: "h")) FROM holds h
            WHERE h.user_id = \(userId) AND h.status = 'open' AND h.expires_at <= \(now.millis)
            FOR UPDATE
            """, logger: logger)
        let expired = try rows.compactMap { try HoldRecord.read(Columns($0)) }
        account.hasExpiredHolds = false
        guard !expired.isEmpty else { return }
        let wallets = try await expire(expired, wallets: [userId: account.state.wallet], now: now, on: connection)
        guard let wallet = wallets[userId] else { throw RetryTransaction() }
        account.state.wallet = wallet
        if var hold = account.hold, expired.contains(where: { $0.id == hold.id }) {
            hold.status = .expired
            account.hold = hold
        }
        if allocateEntryId { account.entryId = try await nextEntryId(on: connection) }
    }

    /// A new ledger entry id.
    func nextEntryId(on connection: PooledConnection) async throws -> Int64 {
        guard let id = try await nextEntryIds(1, on: connection).first else {
            throw PostgresFailure(kind: "no id from the ledger sequence")
        }
        return id
    }

    /// `count` new ledger entry ids, in ascending order (for entries appended in that order).
    func nextEntryIds(_ count: Int, on connection: PooledConnection) async throws -> [Int64] {
        let rows = try await connection.rows(
            "SELECT nextval('ledger_entries_id_seq') AS id FROM generate_series(1, \(Int64(count)))", logger: logger)
        return try rows.map { try Columns($0)["id"] as Int64 }.sorted()
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
