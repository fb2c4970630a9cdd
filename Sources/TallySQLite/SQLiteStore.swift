import Foundation
import GRDB
import TallyStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The embedded store: one SQLite file in WAL mode, written through GRDB's single serialized writer,
/// so every transaction sees the books exactly as the previous one left them.
///
/// One process owns the file (an exclusive lock on `<path>.lock`, held until the store is released), which
/// is what lets it cache wallets and sessions in memory (``CommittedCache``); to scale past one machine, use the PostgreSQL
/// store.
public final class SQLiteStore: MaintenanceStore {
    let pool: DatabasePool
    /// The wallets this process read last, by user; a committed change to what they read (``walletReads``) forgets them.
    let wallets = CommittedCache<CachedWallet>()
    /// The live sessions this process looked up last (id → user); a committed change to ``sessionReads`` forgets them.
    let sessions = CommittedCache<String>()
    /// The range-query pages this process read last, per user; a committed change to ``pageReads`` forgets them.
    let pages = DocumentPageCache()
    /// The consumables replayed last, with their accounts; a committed change to ``replayReads`` forgets them.
    let replays = ReplayCache()
    /// What the open write transaction changed of the tables the caches above read.
    let changes: WriterChanges

    /// What a ``CachedWallet`` reads: the wallet row, and the account's open holds (the first one's expiry).
    static let walletReads = CacheReads(.wallets, .holds)
    /// What a session's liveness reads (``liveSessionUser(sessionId:)``): its row.
    static let sessionReads = CacheReads(.sessions)
    /// What a range page reads (``documents(userId:query:)``): the user's documents.
    static let pageReads = CacheReads(.documents)
    /// What a replay's answer reads (``replayQuery``): the purchase row, and the account and wallet that hold it.
    static let replayReads = CacheReads(.purchases, .users, .wallets)
    /// Ledger commands that wait for the writer at the same time share one transaction (``WriterQueue``).
    let writerQueue = WriterQueue()
    /// The open lock file that marks this process as the database's owner.
    private let ownership: Int32
    /// Checkpoints the write-ahead log beside the writer.
    private let checkpointer: Checkpointer
    /// Read-only connections for the hot reads that memory cannot answer, used on the calling thread.
    let quickReaders: QuickReaders

    /// Opens (creating if needed) the database at `path`. Call ``migrate()`` before use. Throws
    /// ``DatabaseInUse`` when another store (in this or another process) has the database open.
    public convenience init(path: String) throws {
        try self.init(path: path, checkpoint: (1_000, 3_000))
    }

    /// `checkpoint`: the log pages after which a background checkpoint is asked for, and after which the
    /// writer checkpoints itself (``Checkpointer``).
    /// `countingWrites`: keep a tally of the declared writes run (``WriterChanges/tally``, for tests).
    init(path: String, checkpoint: (threshold: Int32, backstop: Int32), countingWrites: Bool = false) throws {
        ownership = try Self.takeOwnership(of: path)
        changes = WriterChanges(wallets: wallets, sessions: sessions, pages: pages, replays: replays, counting: countingWrites)
        var configuration = Configuration()
        configuration.busyMode = .timeout(TimeInterval(Self.busyMilliseconds) / 1000)
        configuration.foreignKeysEnabled = true
        configuration.prepareDatabase { db in
            try db.run(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            checkpointer = try Checkpointer(path: path, threshold: checkpoint.threshold, backstop: checkpoint.backstop)
            quickReaders = try QuickReaders(path: path, count: 2, configuration: configuration)
            pool.writeWithoutTransaction { db in checkpointer.watch(db) }
        } catch {
            close(ownership)
            throw StoreError(.unavailable, underlying: error)
        }
    }

    deinit {
        close(ownership)
    }

    /// How long a connection waits for a lock another holds, in milliseconds (the writer's, the readers' and the
    /// checkpointer's; the writer's checkpoint at the ceiling runs without one, then restores it).
    static let busyMilliseconds: Int32 = 10_000

    /// The database file is in use by another store.
    public struct DatabaseInUse: Error, CustomStringConvertible {
        /// The lock file held by the other store.
        public let lockPath: String
        /// Which lock file another process holds.
        public var description: String { "another Tally process has \(lockPath) locked (one process owns an embedded database)" }
    }

    private static func takeOwnership(of path: String) throws -> Int32 {
        let lockPath = path + ".lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError(.unavailable, underlying: POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw DatabaseInUse(lockPath: lockPath)
        }
        return descriptor
    }

    // MARK: MaintenanceStore

    /// Applies pending schema migrations.
    public func migrate() async throws {
        try await run { try Schema.migrator.migrate(self.pool) }
    }

    /// Succeeds when the database answers a read.
    public func ping() async throws {
        _ = try await read { db in try db.fetchValue(Int.self, sql: "SELECT 1") }
    }

    /// A server-wide secret, created by `make` on first use.
    public func secret(named name: String, orCreate make: @Sendable () -> String) async throws -> String {
        let candidate = make()
        return try await write { db in
            if let value = try db.fetchValue(String.self, sql: "SELECT value FROM server_secrets WHERE name = ?", arguments: [name]) {
                return value
            }
            try db.run(SQLiteWrites.createSecret, changing: .all, arguments: [name, candidate])
            return candidate
        }
    }

    /// Releases holds expired by `now` of up to `limit` accounts (oldest first); returns how many it released of each.
    public func expireHolds(now: Date, limit: Int) async throws -> [String: Int] {
        try await write { db in
            let users = try db.fetchValues(String.self, sql: """
                    SELECT DISTINCT user_id FROM (SELECT user_id FROM holds
                    WHERE status = 'open' AND expires_at <= ? ORDER BY expires_at LIMIT ?)
                    """,
                arguments: [now.millis, limit])
            var expired: [String: Int] = [:]
            for user in users {
                let count = try self.expireHolds(db, userId: user, now: now)
                if count > 0 { expired[user] = count }
            }
            return expired
        }
    }

    /// Deletes idempotency records, guest sign-up records and sign-in failures older than the given instants.
    public func purge(idempotencyBefore: Date, signupsBefore: Date, signInFailuresBefore: Date) async throws {
        try await write { db in
            try db.run(SQLiteWrites.purgeResponses, changing: .all, arguments: [idempotencyBefore.millis])
            try db.run(SQLiteWrites.purgeGuestSignups, changing: .all, arguments: [signupsBefore.millis])
            try db.run(SQLiteWrites.purgeSignInFailures, changing: .all, arguments: [signInFailuresBefore.millis])
        }
    }

    /// Deletes one batch of ended sessions and expired refresh tokens (see ``MaintenanceStore``); the
    /// session cache forgets every session deleted, as the transaction commits.
    public func purgeSessions(before cutoff: Date, limit: Int) async throws -> Int {
        try await write { db in
            let expired = try db.fetchRows(sql: """
                    SELECT token_hash, session_id FROM refresh_tokens WHERE expires_at < ? ORDER BY expires_at LIMIT ?
                    """,
                arguments: [cutoff.millis, limit])
            var deleted = 0
            var touched = Set<String>()
            for row in expired {
                let sessionId: String = row["session_id"]
                try db.run(SQLiteWrites.deleteRefreshToken, changing: .session(sessionId), arguments: [row["token_hash"] as String])
                touched.insert(sessionId)
                deleted += 1
            }
            var ended = try db.fetchValues(String.self, sql: """
                    SELECT id FROM sessions WHERE revoked_at < ? ORDER BY revoked_at LIMIT ?
                    """,
                arguments: [cutoff.millis, limit])
            for id in touched.sorted() where try db.fetchValue(Bool.self, sql: """
                    SELECT NOT EXISTS (SELECT 1 FROM refresh_tokens WHERE session_id = ? AND expires_at >= ?)
                    """,
                arguments: [id, cutoff.millis]) == true
            {
                ended.append(id)
            }
            for id in Set(ended) {
                try db.run(SQLiteWrites.deleteSession, changing: .session(id), arguments: [id])
                deleted += db.changesCount
            }
            return deleted
        }
    }

    // MARK: Helpers shared by the extensions

    /// Runs `body` on a reader connection, off the cooperative threads. Every read goes this way: GRDB's async read
    /// gives its reader back only after it resumes on a cooperative thread, so a synchronous wait for a reader on a
    /// cooperative thread (`unsafeRead`) can hold the very threads those readers need — with every cooperative thread
    /// waiting and every reader held, the process hangs (`ReaderPoolTests`).
    func read<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws -> T {
        try await run { try await self.pool.read(body) }
    }

    /// One SELECT on a free ``QuickReaders`` connection, on the calling thread, or through ``read(_:)`` when none is
    /// free. `body` must run a single statement: outside a transaction, only a statement alone reads one snapshot.
    func quickRead<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws -> T {
        do {
            if let answer = try quickReaders.read(body) { return answer }
        } catch {
            throw Self.storeError(error)
        }
        return try await read(body)
    }

    /// Runs `body` in a write transaction on the single writer connection, off the cooperative threads;
    /// when it commits, the caches forget what it changed, and then `committed` sees its result, still on the
    /// writer's thread (so before any later commit).
    ///
    /// Measured: GRDB's synchronous API on the caller's thread doubles throughput, but blocks Swift's
    /// cooperative threads behind the writer and sends p99 latency to seconds; the async API keeps tails short.
    func write<T: Sendable>(
        _ body: @Sendable @escaping (Database) throws -> T, committed: (@Sendable (T) -> Void)? = nil
    ) async throws -> T {
        try await run {
            try await self.pool.writeWithoutTransaction { db in try self.inWriteTransaction(db, committed: committed) { try body(db) } }
        }
    }

    /// Runs `body` in a transaction on the writer connection, its declared writes noting in ``changes`` what they
    /// change, and, as it ends, tells ``changes`` whether it committed (then the caches forget what it changed): still
    /// on the writer's thread, so before the next transaction can begin. Then `committed` sees the result.
    func inWriteTransaction<T>(_ db: Database, committed: ((T) -> Void)? = nil, _ body: () throws -> T) throws -> T {
        var result: T?
        do {
            try changes.open {
                try db.inTransaction {
                    result = try body()
                    return .commit
                }
            }
        } catch {
            changes.rolledBack()
            throw error
        }
        changes.committed()
        committed?(result!)
        return result!
    }

    /// Maps GRDB's errors to ``StoreError``; lets ``StoreError`` through.
    private func run<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw Self.storeError(error)
        }
    }

    /// A GRDB error as the ``StoreError`` it means; any other error as it is.
    static func storeError(_ error: any Error) -> any Error {
        guard let error = error as? DatabaseError else { return error }
        switch error.resultCode {
        case .SQLITE_CONSTRAINT: return StoreError(.invalidInput, underlying: error)
        default: return StoreError(.unavailable, underlying: error)
        }
    }

    /// Appends `entry` to the ledger of `userId`, whose wallet the caller's transaction read as `wallet`, and moves
    /// the wallet with it; the caches that read the wallet forget the account when that transaction commits.
    /// The entry's `balance_after`/`held_after` and the wallet's new row are `wallet.applying(entry)`: TallyStore's
    /// one rule (``WalletState/applying(_:)``), PostgreSQL's `LedgerRows` too; the row is written over the version
    /// read only (under the single writer nothing moves it between; no row: the account is gone). Returns the
    /// entry's id and the wallet after it, for the next entry of the same wallet.
    @discardableResult
    func append(_ entry: PlannedEntry, userId: String, from wallet: WalletState, now: Date, _ db: Database) throws
        -> (id: Int64, wallet: WalletState)
    {
        let after = wallet.applying(entry)
        try db.run(
            SQLiteWrites.moveWallet, changing: .user(userId), arguments: [after.balance, after.held, after.version, userId, wallet.version])
        guard db.changesCount == 1 else { throw StoreError(.userNotFound) }
        try db.run(
            SQLiteWrites.appendEntry, changing: .user(userId),
            arguments: [
                userId, entry.kind.rawValue, entry.amount, entry.heldChange, after.balance, after.held, entry.reason,
                now.millis, entry.reference,
            ])
        return (db.lastInsertedRowID, after)
    }

    /// Releases the account's holds that expired by `now`; returns how many.
    func expireHolds(_ db: Database, userId: String, now: Date) throws -> Int {
        // The wallet comes with the holds (the same statement): each release is appended from it as the last one left it.
        let rows = try db.fetchRows(sql: """
                SELECT h.*, w.balance AS wallet_balance, w.held AS wallet_held, w.version AS wallet_version
                FROM holds h JOIN wallets w ON w.user_id = h.user_id
                WHERE h.user_id = ? AND h.status = 'open' AND h.expires_at <= ?
                """,
            arguments: [userId, now.millis])
        guard let first = rows.first else { return 0 }
        var wallet = WalletState(balance: first["wallet_balance"], held: first["wallet_held"], version: first["wallet_version"])
        for hold in rows.map(HoldRecord.init(row:)) {
            try db.run(SQLiteWrites.settleHold, changing: .user(userId), arguments: [HoldStatus.expired.rawValue, nil, now.millis, hold.id])
            wallet = try append(LedgerPlanner.expiry(of: hold), userId: userId, from: wallet, now: now, db).wallet
        }
        return rows.count
    }
}
