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
    /// The wallets this process read last; every committed change to one forgets it.
    let wallets = CommittedCache<CachedWallet>()
    /// The live sessions this process looked up last (id → user); every committed revocation forgets them.
    let sessions = CommittedCache<String>()
    /// The range-query pages this process read last, per user; a committed write of a user's documents forgets theirs.
    let pages = DocumentPageCache()
    /// The consumables replayed last, with their accounts; a committed change to either forgets them.
    let replays = ReplayCache()
    /// What the open write transaction changed of the caches above.
    let forgets: PendingForgets
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
    init(path: String, checkpoint: (threshold: Int32, backstop: Int32)) throws {
        ownership = try Self.takeOwnership(of: path)
        forgets = PendingForgets(wallets: wallets, sessions: sessions, pages: pages, replays: replays)
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
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
            try db.run(sql: "INSERT INTO server_secrets (name, value) VALUES (?, ?)", arguments: [name, candidate])
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
            try db.run(sql: "DELETE FROM idempotency_keys WHERE created_at < ?", arguments: [idempotencyBefore.millis])
            try db.run(sql: "DELETE FROM guest_signups WHERE created_at < ?", arguments: [signupsBefore.millis])
            try db.run(sql: "DELETE FROM sign_in_failures WHERE last_failure_at < ?", arguments: [signInFailuresBefore.millis])
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
                try db.run(sql: "DELETE FROM refresh_tokens WHERE token_hash = ?", arguments: [row["token_hash"] as String])
                touched.insert(row["session_id"])
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
                self.forgets.session(id)
                try db.run(sql: "DELETE FROM sessions WHERE id = ?", arguments: [id])
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
    /// when it commits, the caches forget what it changed.
    ///
    /// Measured: GRDB's synchronous API on the caller's thread doubles throughput, but blocks Swift's
    /// cooperative threads behind the writer and sends p99 latency to seconds; the async API keeps tails short.
    func write<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws -> T {
        try await run {
            try await self.pool.writeWithoutTransaction { db in try self.inWriteTransaction(db) { try body(db) } }
        }
    }

    /// Runs `body` in a transaction on the writer connection and, as it ends, tells ``forgets`` whether it
    /// committed: still on the writer's thread, so before the next transaction can begin.
    func inWriteTransaction<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        var result: T?
        do {
            try db.inTransaction {
                result = try body()
                return .commit
            }
        } catch {
            forgets.rolledBack()
            throw error
        }
        forgets.committed()
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

    /// Appends `entry` to the ledger and moves the wallet with it, in the caller's transaction; the wallet
    /// cache forgets the account when that transaction commits (``write(_:)``). Returns the entry's id.
    @discardableResult
    func append(_ entry: PlannedEntry, userId: String, now: Date, _ db: Database) throws -> Int64 {
        forgets.wallet(userId)
        guard
            let wallet = try db.fetchFirst(sql: """
                    UPDATE wallets SET balance = balance + ?, held = held + ?, version = version + 1
                    WHERE user_id = ? RETURNING balance, held, version
                    """,
                arguments: [entry.amount, entry.heldChange, userId], { WalletState(row: $0, at: 0) })
        else { throw StoreError(.userNotFound) }
        try db.run(sql: """
                INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                userId, entry.kind.rawValue, entry.amount, entry.heldChange, wallet.balance, wallet.held, entry.reason,
                now.millis, entry.reference,
            ])
        return db.lastInsertedRowID
    }

    /// Releases the account's holds that expired by `now`; returns how many.
    func expireHolds(_ db: Database, userId: String, now: Date) throws -> Int {
        let holds = try db.fetchRows(sql: "SELECT * FROM holds WHERE user_id = ? AND status = 'open' AND expires_at <= ?",
            arguments: [userId, now.millis]
        ).map(HoldRecord.init(row:))
        for hold in holds {
            try db.run(sql: "UPDATE holds SET status = 'expired', settled_at = ? WHERE id = ? AND status = 'open'",
                arguments: [now.millis, hold.id])
            try append(LedgerPlanner.expiry(of: hold), userId: userId, now: now, db)
        }
        return holds.count
    }
}
