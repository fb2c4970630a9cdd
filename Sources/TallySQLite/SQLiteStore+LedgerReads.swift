import Foundation
import GRDB
import TallyStore

extension SQLiteStore {
    /// From the wallet cache when it has the account; else a reader answers and fills the cache. The single
    /// writer is used only when a hold has expired and must be released first.
    public func wallet(userId: String, now: Date) async throws -> WalletState? {
        if let wallet = wallets.value(userId)?.wallet(at: now) { return wallet }
        let epoch = wallets.epoch
        let (entry, mustExpire) = try await read { db -> (CachedWallet?, Bool) in
            guard let row = try db.fetchRow(sql: "SELECT balance, held, version FROM wallets WHERE user_id = ?", arguments: [userId])
            else { return (nil, false) }
            let wallet = WalletState(row: row)
            guard wallet.held > 0 else { return (CachedWallet(wallet: wallet, firstExpiry: nil), false) }
            let firstExpiry = try db.fetchValue(Int64.self, sql: "SELECT min(expires_at) FROM holds WHERE user_id = ? AND status = 'open'",
                arguments: [userId]).map(Date.init(millis:))
            return (CachedWallet(wallet: wallet, firstExpiry: firstExpiry), firstExpiry.map { $0 <= now } ?? false)
        }
        guard let entry else { return nil }
        guard mustExpire else {
            wallets.store(entry, for: userId, readAt: epoch)
            return entry.wallet
        }
        return try await write { db in
            _ = try self.expireHolds(db, userId: userId, now: now)
            return try db.fetchRow(sql: "SELECT balance, held, version FROM wallets WHERE user_id = ?", arguments: [userId])
                .map(WalletState.init(row:))
        }
    }

    /// Like ``wallet(userId:now:)``: a reader, and the writer only to release an expired hold first.
    public func accountState(userId: String, now: Date) async throws -> AccountState? {
        let (state, mustExpire) = try await read { db -> (AccountState?, Bool) in
            guard let state = try Self.accountState(db, userId: userId) else { return (nil, false) }
            return (state, try Self.hasExpiredHold(db, wallet: state.wallet, userId: userId, now: now))
        }
        guard mustExpire else { return state }
        return try await write { db in
            _ = try self.expireHolds(db, userId: userId, now: now)
            return try Self.accountState(db, userId: userId)
        }
    }

    private static func hasExpiredHold(_ db: Database, wallet: WalletState, userId: String, now: Date) throws -> Bool {
        guard wallet.held > 0 else { return false }
        return try db.fetchValue(Bool.self, sql: "SELECT EXISTS (SELECT 1 FROM holds WHERE user_id = ? AND status = 'open' AND expires_at <= ?)",
            arguments: [userId, now.millis]) ?? false
    }

    /// Ledger entries of the account, newest first, with ids below `before` when given.
    public func entries(userId: String, before: Int64?, limit: Int) async throws -> [LedgerEntryRecord] {
        try await read { db in
            try db.fetchRows(sql: "SELECT * FROM ledger_entries WHERE user_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                arguments: [userId, before ?? Int64.max, limit]
            ).map(LedgerEntryRecord.init(row:))
        }
    }

    /// A hold of the account.
    public func hold(id: String, userId: String) async throws -> HoldRecord? {
        try await read { db in
            try db.fetchRow(sql: "SELECT * FROM holds WHERE id = ? AND user_id = ?", arguments: [id, userId])
                .map(HoldRecord.init(row:))
        }
    }

    // MARK: Shared with the commands

    static func accountState(_ db: Database, userId: String) throws -> AccountState? {
        guard let account = try db.fetchFirst(sql: accountQuery, arguments: [userId], AccountRow.decode)
        else { return nil }
        let (counters, installation) = try counters(db, userId: userId, installation: account.installation)
        return AccountState(user: account.user, wallet: account.wallet, counters: counters, installation: installation)
    }

    /// The user and wallet of one account (``AccountRow``).
    static let accountQuery = "SELECT \(AccountRow.columns) FROM users u JOIN wallets w ON w.user_id = u.id WHERE u.id = ?"

    /// Every quota counter of the account and, for a guest, of its installation (`installation`), by quota,
    /// in one statement (a command runs no more statements than before installations counted).
    static func counters(_ db: Database, userId: String, installation: String?) throws
        -> ([String: QuotaCounter], InstallationCounters?)
    {
        var own: [String: QuotaCounter] = [:]
        var installed: [String: QuotaCounter] = [:]
        try db.forEachRow(sql: """
                SELECT 0, quota, used, window_end FROM quota_counters WHERE user_id = ?
                UNION ALL SELECT 1, quota, used, window_end FROM installation_quota_counters WHERE installation = ?
                """,
            arguments: [userId, installation]
        ) { row in
            let counter = QuotaCounter(used: row[2], windowEnd: Date(millis: row[3]))
            if (row[0] as Int) == 0 { own[row[1]] = counter } else { installed[row[1]] = counter }
        }
        return (own, installation.map { InstallationCounters(id: $0, counters: installed) })
    }
}
