import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
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
            SELECT id, kind, amount, held_change, balance_after, reason, created_at, reference FROM ledger_entries
            WHERE user_id = \(userId) AND id < \(before ?? Int64.max)
            ORDER BY id DESC LIMIT \(limit)::BIGINT
            """
        ).map { try LedgerEntryRecord(Columns($0)) }
    }

    /// A hold of the account.
    public func hold(id: String, userId: String) async throws -> HoldRecord? {
        guard
            let row = try await rows(
                """
                SELECT \(unescaped: HoldRecord.columns(of: "h")) FROM holds h WHERE h.id = \(id) AND h.user_id = \(userId)
                """
            ).first
        else { return nil }
        return try HoldRecord.read(Columns(row))
    }
}
