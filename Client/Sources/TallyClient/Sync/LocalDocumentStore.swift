import Foundation
import GRDB
import TallyAPI

/// One signed-in user's synced documents on the device, in one SQLite file (WAL, so an app and its widget or a
/// second process can share it): the server's state (`base`), the local writes the server has not acknowledged
/// (`outbox`), and what the app sees (`visible`: base with the outbox applied on top, in mutation-id order).
///
/// No networking: the sync engine pushes ``pendingMutations(limit:)`` and feeds the answers to
/// ``apply(push:)`` and ``apply(pull:)`` (LocalDocumentStore+Sync.swift). Calls are synchronous; the engine picks
/// the threads. Observers learn what changed after each commit, on the committing thread.
final class LocalDocumentStore: Sendable {
    /// Each collection's range key (`nil`: none). A collection not in it is refused.
    let rangeKeys: [String: String?]
    /// The installation's id for pushes, created with the file and shared by every process that opens it.
    let clientId: String
    /// The file's connections: reached only through ``reading(_:)``, ``writing(_:)`` and ``withConnections(_:)``.
    private let pool: DatabasePool
    /// The connection checkpoints run on (``checkpoint()``).
    private let checkpointer: DatabaseQueue
    /// Whether ``close()`` has begun, how many calls use the connections now, and what a close waiting for them waits on.
    private let use = Locked<(closed: Bool, active: Int, drained: DispatchSemaphore?)>((false, 0, nil))
    /// Writes since the last checkpoint, and whether one runs.
    private let checkpointState = Locked<(writes: Int, running: Bool)>((0, false))
    let clock: any TallyClock
    private let observers = Locked<(next: UInt64, handlers: [UInt64: @Sendable (LocalStoreChange) -> Void])>((0, [:]))
    /// The writer connection's `PRAGMA data_version` when this store last looked: it moves only when another
    /// connection (another process, or another store on the file) commits.
    private let seenDataVersion: Locked<Int64>

    /// Opens (creating and migrating if needed) the store at `path`.
    init(path: String, rangeKeys: [String: String?], clock: any TallyClock = SystemClientClock()) throws {
        try PrivateDatabaseFile.prepare(path: path)
        var configuration = Configuration()
        configuration.label = "TallyClient.documents"
        configuration.busyMode = .timeout(5)
        PrivateDatabaseFile.suspensionObserved(&configuration, path: path)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // A killed process loses nothing committed in WAL mode with NORMAL; only an OS crash or power loss can
            // lose the last commits, and an fsync per local write would cost milliseconds on a phone.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // SQLite would copy the log into the file inside the commit that takes it past 1,000 pages, and a local
            // write must not wait for that (it was every p99 of `bench-sdk`'s write → observer): ``checkpoint()``
            // does it on a connection of its own, after each sync round or every ``checkpointEvery`` writes.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
        var checkpointing = Configuration()
        checkpointing.label = "TallyClient.documents.checkpoint"
        checkpointing.busyMode = .timeout(5)
        PrivateDatabaseFile.suspensionObserved(&checkpointing, path: path)
        checkpointer = try DatabaseQueue(path: path, configuration: checkpointing)
        self.pool = pool
        self.rangeKeys = rangeKeys
        self.clock = clock
        clientId = try pool.read { db in try Self.meta(db, "client_id")[0] }
        seenDataVersion = Locked(try pool.writeWithoutTransaction { db in try Self.dataVersion(db) })
    }

    /// Closes the file's connections (before ``remove(path:)``), once every call using them has returned; from then on
    /// every call throws ``ClientError/Code/unauthorized`` (the user left) and touches nothing. Waits only for calls
    /// already running, which are local reads and writes (no network). A second close does nothing.
    func close() throws {
        let (first, drained) = use.withLock { use -> (Bool, DispatchSemaphore?) in
            guard !use.closed else { return (false, nil) }
            use.closed = true
            guard use.active > 0 else { return (true, nil) }
            use.drained = DispatchSemaphore(value: 0)
            return (true, use.drained)
        }
        guard first else { return }
        drained?.wait()
        try checkpointer.close()
        try pool.close()
    }

    /// Runs `body` with the file's connections unless the store is closed (then throws ``ClientError/Code/unauthorized``):
    /// the one door to them, so that ``close()`` never closes a connection in use. GRDB's `DatabasePool.close()` must not
    /// race a read — its reader pool is a plain reference that the close releases — and a client whose app read its
    /// documents while the user who left was being closed crashed (issue 43).
    func withConnections<T>(_ body: (_ pool: DatabasePool, _ checkpointer: DatabaseQueue) throws -> T) throws -> T {
        try use.withLock { use in
            guard !use.closed else { throw ClientError(.unauthorized, message: "signed out: this user's documents are closed") }
            use.active += 1
        }
        defer {
            let drained = use.withLock { use -> DispatchSemaphore? in
                use.active -= 1
                return use.active == 0 ? use.drained : nil
            }
            drained?.signal()
        }
        return try body(pool, checkpointer)
    }

    /// `body` in a read of the file (see ``withConnections(_:)``).
    func reading<T>(_ body: (Database) throws -> T) throws -> T {
        try withConnections { pool, _ in try pool.read(body) }
    }

    /// `body` in a write transaction of the file (see ``withConnections(_:)``).
    func writing<T>(_ body: (Database) throws -> T) throws -> T {
        try withConnections { pool, _ in try pool.write(body) }
    }

    // MARK: Checkpoints

    /// Local writes after which one of them starts a checkpoint in the background, when no sync round has.
    static let checkpointEvery = 1_000

    /// Copies the write-ahead log into the database file (passive: it never blocks a writer or a reader), on a
    /// connection of its own, unless a checkpoint runs already. The sync engine calls it after each round.
    func checkpoint() {
        let start = checkpointState.withLock { state -> Bool in
            guard !state.running else { return false }
            state = (0, true)
            return true
        }
        guard start else { return }
        defer { checkpointState.withLock { $0.running = false } }
        _ = try? withConnections { _, checkpointer in try checkpointer.writeWithoutTransaction { db in try db.checkpoint(.passive) } }
    }

    /// Counts a local write; every ``checkpointEvery``-th starts a checkpoint on a background thread (an app offline
    /// for long still keeps its log bounded).
    private func wrote() {
        let due = checkpointState.withLock { state in
            state.writes += 1
            return state.writes >= Self.checkpointEvery && !state.running
        }
        if due { DispatchQueue.global(qos: .utility).async { self.checkpoint() } }
    }

    // MARK: Files

    /// The file of `userId`'s store in `directory`: named by a SHA-256 prefix, so the user id is not in the name.
    static func path(directory: URL, userId: String) -> URL {
        directory.appendingPathComponent("documents-\(SHA256.hex(Array(userId.utf8)).prefix(32)).sqlite")
    }

    /// Deletes the store at `path` with its -wal, -shm and -journal files (sign-out, account deletion). Close it first.
    static func remove(path: URL) throws {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let file = URL(fileURLWithPath: path.path + suffix)
            if FileManager.default.fileExists(atPath: file.path) { try FileManager.default.removeItem(at: file) }
        }
    }

    // MARK: Observation

    /// Calls `handler` after every commit of this store with what it changed, and with `.everything` when
    /// ``refreshFromOtherProcesses()`` finds another process's commits. Returns the id for ``removeObserver(_:)``.
    func addObserver(_ handler: @escaping @Sendable (LocalStoreChange) -> Void) -> UInt64 {
        observers.withLock { state in
            state.next += 1
            state.handlers[state.next] = handler
            return state.next
        }
    }

    /// Stops calling the observer `id`.
    func removeObserver(_ id: UInt64) {
        _ = observers.withLock { $0.handlers.removeValue(forKey: id) }
    }

    func notify(_ change: LocalStoreChange) {
        if case .documents(let keys) = change, keys.isEmpty { return }
        for handler in observers.withLock({ Array($0.handlers.values) }) { handler(change) }
    }

    /// Whether another process (or another store on the same file) committed since this store last looked; if so,
    /// observers hear `.everything`. An app calls it when it becomes active: no network round trip.
    @discardableResult
    func refreshFromOtherProcesses() throws -> Bool {
        let current = try withConnections { pool, _ in try pool.writeWithoutTransaction { db in try Self.dataVersion(db) } }
        let changed = seenDataVersion.withLock { seen in
            defer { seen = current }
            return seen != current
        }
        if changed { notify(.everything) }
        return changed
    }

    private static func dataVersion(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0
    }

    // MARK: Local writes

    /// Applies `write` to the visible state and appends it to the outbox in one transaction (a crash keeps both or
    /// neither), then tells observers. Returns the document as the app now sees it (`nil`: absent).
    @discardableResult
    func write(_ write: LocalWrite) throws -> LocalDocument? {
        try validate(write)
        let now = clock.now.timeIntervalSince1970
        let document = try writing { db -> LocalDocument? in
            let key = write.key
            let current = try visibleDocument(db, key)
            var underneath: (version: Int64, updatedAt: Date?) = (0, nil)
            if let current {
                underneath = (current.version, current.updatedAt)
            } else if let base = try liveBase(db, key) {
                underneath = (base.version, base.updatedAt)
            }
            let data = PendingFold.apply(write.op, write.data, to: current?.data)
            if let data, let rangeKey = rangeKeys[key.collection] ?? nil, data[rangeKey]?.stringValue == nil {
                throw ClientError(.invalidInput, message: "a \(key.collection) document needs the string field \(rangeKey)")
            }
            try db.execute(
                sql: "INSERT INTO outbox (op, collection, doc_id, data, if_version, created) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [write.op.rawValue, key.collection, key.id, write.data.map { Data($0.bytes) }, write.ifVersion, now])
            let document = data.map {
                LocalDocument(key: key, data: $0, version: underneath.version, updatedAt: underneath.updatedAt, pending: true)
            }
            try storeVisible(db, key, document)
            return document
        }
        notify(.documents([write.key]))
        wrote()
        return document
    }

    private func validate(_ write: LocalWrite) throws {
        guard rangeKeys.keys.contains(write.key.collection) else {
            throw ClientError(.invalidInput, message: "unknown collection \(write.key.collection)")
        }
        let id = write.key.id.utf8
        guard (1...128).contains(id.count), id.allSatisfy(Self.isIdByte) else {
            throw ClientError(.invalidInput, message: "a document id is 1 to 128 of A-Z a-z 0-9 _ -")
        }
        switch write.op {
        case .put, .patch:
            guard write.data?.objectValue != nil else { throw ClientError(.invalidInput, message: "document data must be a JSON object") }
        case .delete:
            guard write.data == nil else { throw ClientError(.invalidInput, message: "a delete carries no data") }
        }
        if let ifVersion = write.ifVersion, ifVersion < 0 { throw ClientError(.invalidInput, message: "ifVersion must not be negative") }
    }

    private static func isIdByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"), UInt8(ascii: "-"): true
        default: false
        }
    }

    // MARK: Reads

    /// The document `key` as the app sees it, or `nil`.
    func document(_ key: DocumentKey) throws -> LocalDocument? {
        try reading { db in try visibleDocument(db, key) }
    }

    /// The visible documents of `collection` whose range value is in `from..<to` (either bound optional), ordered by
    /// (range value, id), descending if asked, at most `limit`. Without bounds: the whole collection. Index-driven.
    func documents(in collection: String, from: String? = nil, to: String? = nil, descending: Bool = false,
                   limit: Int? = nil) throws -> [LocalDocument] {
        let (sql, arguments) = Self.rangeQuery(collection: collection, from: from, to: to, descending: descending, limit: limit)
        return try reading { db in
            try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map(Self.localDocument)
        }
    }

    /// The SQL of ``documents(in:from:to:descending:limit:)`` (tests check its query plan).
    static func rangeQuery(collection: String, from: String?, to: String?, descending: Bool, limit: Int?)
        -> (String, StatementArguments)
    {
        var sql = "SELECT \(visibleColumns) FROM visible WHERE collection = ?"
        var arguments: StatementArguments = [collection]
        for case let (bound?, comparison) in [(from, ">="), (to, "<")] {
            sql += " AND range_value \(comparison) ?"
            arguments += [bound]
        }
        sql += descending ? " ORDER BY range_value DESC, id DESC" : " ORDER BY range_value, id"
        if let limit {
            sql += " LIMIT ?"
            arguments += [max(limit, 0)]
        }
        return (sql, arguments)
    }

    /// The oldest `limit` outbox mutations, in id order: the next push.
    func pendingMutations(limit: Int) throws -> [SyncMutation] {
        try reading { db in
            try Row.fetchAll(
                db.cachedStatement(sql: "SELECT id, op, collection, doc_id, data, if_version FROM outbox ORDER BY id LIMIT ?"),
                arguments: [max(limit, 0)]
            ).map(Self.mutation)
        }
    }

    /// The cursor, the last sync and the outbox's size.
    func syncState() throws -> LocalSyncState {
        try reading { db in
            let row = try Self.meta(db, "cursor, last_sync_at, (SELECT count(*) FROM outbox)")
            return LocalSyncState(cursor: row[0], lastSyncAt: (row[1] as Double?).map(Date.init(timeIntervalSince1970:)),
                                  pendingCount: row[2])
        }
    }

    // MARK: Rows

    static let visibleColumns = "collection, id, data, version, updated_at, pending"

    func visibleDocument(_ db: Database, _ key: DocumentKey) throws -> LocalDocument? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.visibleColumns) FROM visible WHERE collection = ? AND id = ?"),
                         arguments: [key.collection, key.id]).map(Self.localDocument)
    }

    static func localDocument(_ row: Row) throws -> LocalDocument {
        LocalDocument(key: DocumentKey(collection: row[0], id: row[1]), data: try json(row[2]), version: row[3],
                      updatedAt: (row[4] as Double?).map(Date.init(timeIntervalSince1970:)), pending: row[5])
    }

    /// `columns` of the one meta row.
    static func meta(_ db: Database, _ columns: String) throws -> Row {
        guard let row = try Row.fetchOne(db, sql: "SELECT \(columns) FROM meta") else {
            throw ClientError(.unexpected, message: "the document store has no meta row")
        }
        return row
    }

    static func mutation(_ row: Row) throws -> SyncMutation {
        guard let op = SyncOperation(rawValue: row[1]) else { throw ClientError(.unexpected, message: "unknown outbox operation") }
        return SyncMutation(id: row[0], op: op, collection: row[2], docId: row[3], data: try (row[4] as Data?).map(json), ifVersion: row[5])
    }

    static func json(_ data: Data) throws -> JSONValue {
        do {
            return try JSONValue.parse(data)
        } catch {
            throw ClientError(.unexpected, message: "stored document data: \(error)")
        }
    }

    /// The server's live document `key`, if any.
    func liveBase(_ db: Database, _ key: DocumentKey) throws -> (data: JSONValue, version: Int64, updatedAt: Date)? {
        guard let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT data, version, updated_at FROM base WHERE collection = ? AND id = ? AND deleted = 0"),
            arguments: [key.collection, key.id])
        else { return nil }
        return (try Self.json(row[0]), row[1], Date(timeIntervalSince1970: row[2]))
    }

    /// Writes (or, for `nil`, deletes) the visible row of `key`.
    func storeVisible(_ db: Database, _ key: DocumentKey, _ document: LocalDocument?) throws {
        guard let document else {
            try db.cachedStatement(sql: "DELETE FROM visible WHERE collection = ? AND id = ?").execute(arguments: [key.collection, key.id])
            return
        }
        let rangeValue = (rangeKeys[key.collection] ?? nil).flatMap { document.data[$0]?.stringValue }
        try db.cachedStatement(sql: """
            INSERT INTO visible (collection, id, data, version, updated_at, range_value, pending) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (collection, id) DO UPDATE SET data = excluded.data, version = excluded.version,
                updated_at = excluded.updated_at, range_value = excluded.range_value, pending = excluded.pending
            """).execute(arguments: [key.collection, key.id, Data(document.data.bytes), document.version,
                                     document.updatedAt?.timeIntervalSince1970, rangeValue, document.pending])
    }
}
