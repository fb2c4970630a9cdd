#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import TallyStore

/// What the writer's open transaction changed of the tables the caches read, handed to the caches as it commits.
///
/// Every write runs through its declaration (``SQLiteWrites``, `Database.run(_:changing:arguments:)`), which notes
/// here the declared tables with the rows the call site changes; on commit each cache forgets what
/// ``PendingChanges/changed(for:)`` answers for its ``CacheReads``, on rollback nothing. The writer calls
/// ``committed()`` or ``rolledBack()`` on its own thread as the transaction ends (``SQLiteStore/inWriteTransaction(_:committed:_:)``),
/// before the next one can begin. No GRDB transaction observer: GRDB consults observers on every statement, which
/// cost O(n²) per batch with one per wallet, and still showed with one per transaction.
final class WriterChanges: Sendable {
    private let pending = Mutex(PendingChanges())
    private let wallets: CommittedCache<CachedWallet>
    private let sessions: CommittedCache<String>
    private let pages: DocumentPageCache
    private let replays: ReplayCache
    /// How many times each declaration ran, when counting (tests).
    let tally: WriteTally?

    /// The tables some cache reads: only their changes are noted (a write of another table costs no more than the look-up).
    static let cachedTables = SQLiteStore.walletReads.tables.union(SQLiteStore.sessionReads.tables)
        .union(SQLiteStore.pageReads.tables).union(SQLiteStore.replayReads.tables)

    /// The holder of `wallets`, `sessions`, `pages` and `replays`; `counting`: keep a ``tally`` of the writes run.
    init(
        wallets: CommittedCache<CachedWallet>, sessions: CommittedCache<String>, pages: DocumentPageCache, replays: ReplayCache,
        counting: Bool = false
    ) {
        (self.wallets, self.sessions, self.pages, self.replays) = (wallets, sessions, pages, replays)
        tally = counting ? WriteTally() : nil
    }

    // MARK: The open transaction

    /// The thread-specific slot holding the ``WriterChanges`` of the transaction open on the thread (the writer's).
    private static let openKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0)
        return key
    }()

    /// Runs `body` (the writer's transaction) with this holder as the one its declared writes note into.
    func open<T>(_ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(Self.openKey)
        pthread_setspecific(Self.openKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(Self.openKey, previous) }
        return try body()
    }

    /// Notes that `write` changed `rows`, in the transaction open on this thread; traps outside one (a write that
    /// noted nothing would leave the caches stale).
    static func note(_ write: StoreWrite, _ rows: ChangedRows) {
        guard let holder = pthread_getspecific(Self.openKey) else { preconditionFailure("a declared write outside the writer's transaction") }
        Unmanaged<WriterChanges>.fromOpaque(holder)._withUnsafeGuaranteedRef { $0.note(write, rows) }
    }

    /// Notes that `write` changed each of `rows` (none: it changed nothing a key names, such as an empty list).
    static func note(_ write: StoreWrite, _ rows: [ChangedRows]) {
        guard let holder = pthread_getspecific(Self.openKey) else { preconditionFailure("a declared write outside the writer's transaction") }
        Unmanaged<WriterChanges>.fromOpaque(holder)._withUnsafeGuaranteedRef { changes in
            changes.tally?.count(write)
            for changed in rows { changes.noteTables(write, changed) }
        }
    }

    private func note(_ write: StoreWrite, _ rows: ChangedRows) {
        tally?.count(write)
        noteTables(write, rows)
    }

    private func noteTables(_ write: StoreWrite, _ rows: ChangedRows) {
        for table in write.changes where Self.cachedTables.contains(table) {
            pending.withLock { $0.note(table, rows) }
        }
    }

    // MARK: The end of the transaction

    /// The transaction committed: each cache forgets what it changed of the tables the cache reads.
    func committed() {
        var changes = PendingChanges()
        pending.withLock { swap(&$0, &changes) }
        guard !changes.isEmpty else { return }
        Self.forget(wallets, changes.changed(for: SQLiteStore.walletReads)) { if case .user(let id) = $0 { id } else { nil } }
        forgetReplays(changes.changed(for: SQLiteStore.replayReads))
        forgetPages(changes.changed(for: SQLiteStore.pageReads))
        Self.forget(sessions, changes.changed(for: SQLiteStore.sessionReads)) { if case .session(let id) = $0 { id } else { nil } }
    }

    /// The transaction rolled back: nothing it did stays, so nothing is forgotten.
    func rolledBack() { pending.withLock { $0 = PendingChanges() } }

    /// `cache` forgets the entries of `changed` by their `key`, or everything for rows it has no key of.
    private static func forget<Value>(_ cache: CommittedCache<Value>, _ changed: Set<ChangedRows>, key: (ChangedRows) -> String?) {
        guard !changed.isEmpty else { return }
        var keys = Set<String>()
        for rows in changed {
            guard let key = key(rows) else { return cache.forgetAll() }
            keys.insert(key)
        }
        cache.forget(keys)
    }

    /// The page cache (by user) forgets `changed`.
    private func forgetPages(_ changed: Set<ChangedRows>) {
        guard !changed.isEmpty else { return }
        var users = Set<String>()
        for rows in changed {
            guard case .user(let id) = rows else { return pages.forgetAll() }
            users.insert(id)
        }
        pages.forget(users)
    }

    /// The replay cache (by user and by transaction) forgets `changed`.
    private func forgetReplays(_ changed: Set<ChangedRows>) {
        guard !changed.isEmpty else { return }
        var (users, transactions) = (Set<String>(), Set<String>())
        for rows in changed {
            switch rows {
            case .user(let id): users.insert(id)
            case .transaction(let id): transactions.insert(id)
            case .session, .all: return replays.forgetAll()
            }
        }
        replays.forget(users: users, transactions: transactions)
    }
}

/// How many times each declared write ran (by its SQL), for the test that every cached table is exercised through
/// every write.
final class WriteTally: Sendable {
    private let counts = Mutex([String: Int]())

    /// Counts one run of `write`.
    func count(_ write: StoreWrite) { counts.withLock { $0[write.sql, default: 0] += 1 } }

    /// The runs so far, by SQL.
    var runs: [String: Int] { counts.withLock { $0 } }
}

