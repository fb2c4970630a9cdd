import Foundation
import PostgresNIO
import Synchronization
import TallyStore

// How this process's caches learn of its own committed writes: every write runs through its declaration
// (``PostgresWrite``, declared in `PostgresWriteDeclarations*.swift`), and running it notes what it changed — in the
// transaction's ``TransactionChanges``, handed to the caches when it commits (``PostgresStore/forget(_:)``), or, for a
// statement on its own, once it returns (it has committed then). What a cache forgets is derived from the tables its
// entries read (``CacheReads``) and the declarations, never called by hand at a write site. Other processes learn
// through their own mechanisms (the revocation feed, LISTEN/NOTIFY, polling, the compare-and-set stamp).

/// A bound parameter's placeholder (`$n`), as a declaration's text interpolates it: the declarations in
/// ``Writes`` take their values only as placeholders, so a value can never reach a statement's text.
struct SQLParam: CustomStringConvertible, Sendable {
    /// `$n`.
    let description: String
}

extension BoundStatement {
    /// Binds `value` (NULL when `nil`) and returns its placeholder, for a declaration's text.
    mutating func bind<Value: PostgresDynamicTypeEncodable>(_ value: Value?) -> SQLParam {
        SQLParam(description: self.value(value))
    }
}

/// Which of this process's caches read a table a write changes (derived from ``CacheReads``, once per declaration).
struct CacheSet: OptionSet, Sendable {
    let rawValue: UInt8
    /// ``AccountCache``.
    static let accounts = CacheSet(rawValue: 1)
    /// ``LiveSessions``.
    static let sessions = CacheSet(rawValue: 2)
    /// The range-query pages (``PostgresStore/pageReads``): version-stamped, so nothing to forget.
    static let pages = CacheSet(rawValue: 4)

    /// The caches that read one of `tables`.
    init(reading tables: Set<StoreTable>) {
        var set: CacheSet = []
        if !tables.isDisjoint(with: AccountCache.reads.tables) { set.insert(.accounts) }
        if !tables.isDisjoint(with: LiveSessions.reads.tables) { set.insert(.sessions) }
        if !tables.isDisjoint(with: PostgresStore.pageReads.tables) { set.insert(.pages) }
        self = set
    }

    /// The caches whose bits `rawValue` sets.
    init(rawValue: UInt8) { self.rawValue = rawValue }
}

/// A write statement (or a fragment of one) as the PostgreSQL store runs it: its ``StoreWrite`` declaration, under the
/// name of the ``Writes`` member that declares it, with the declarations of the fragments its text interpolates. The
/// statement changes the tables of all of them (``changes``); running it notes each (``PostgresStore/note(_:_:on:)``).
struct PostgresWrite: Sendable {
    /// The declaring member of ``Writes`` (`revokeSession(id:now:)`, `append`): the key of ``PostgresStore/declarationsRun``.
    let name: String
    /// What its own text changes.
    let declaration: StoreWrite
    /// The fragments its text interpolates, each with its own fragments.
    let fragments: [PostgresWrite]
    /// The tables the whole statement changes: its own and its fragments'.
    let changes: Set<StoreTable>
    /// The caches that read one of ``changes``.
    let caches: CacheSet
    /// Its declaration and every fragment's, transitively, by name (flattened once, for the runs' counting).
    private let flattened: [(name: String, declaration: StoreWrite)]

    /// The statement's text (placeholders for its values: run it with the ``BoundStatement`` that bound them).
    var sql: String { declaration.sql }

    /// `declaration`, whose text interpolates `fragments`, declared by the member `name` of ``Writes`` (a `static func`'s
    /// own name by default; a `static let` names itself).
    init(_ declaration: StoreWrite, with fragments: [PostgresWrite] = [], name: String = #function) {
        assert(fragments.allSatisfy { declaration.sql.contains($0.sql) }, "\(name) does not interpolate a fragment it names")
        self.name = name
        self.declaration = declaration
        self.fragments = fragments
        let changes = fragments.reduce(into: declaration.changes) { $0.formUnion($1.changes) }
        self.changes = changes
        self.caches = CacheSet(reading: changes)
        self.flattened = [(name, declaration)] + fragments.flatMap(\.flattened)
    }

    /// Calls `body` with this declaration and every fragment's, transitively.
    func forEachDeclaration(_ body: (String, StoreWrite) -> Void) {
        for (name, declaration) in flattened { body(name, declaration) }
    }
}

/// The changes of one open transaction (``PendingChanges``), noted as its declared writes run on its connection
/// (``PooledConnection/changes``) and handed to the caches when it commits.
final class TransactionChanges: Sendable {
    private let state = Mutex(PendingChanges())

    /// Notes that every declaration of `write` changed `rows`.
    func note(_ write: PostgresWrite, _ rows: some Sequence<ChangedRows>) {
        state.withLock { pending in
            for changed in rows { write.forEachDeclaration { _, declaration in pending.note(declaration, changed) } }
        }
    }

    /// What was noted.
    var pending: PendingChanges { state.withLock { $0 } }
}

/// A task's session-remembering in progress (``PostgresStore/remembering(_:)``): the ``LiveSessions`` epoch its
/// lookup stands on, moved along by the forgetting of its own commits (not by anyone else's), so that a session it
/// has just created is still remembered after its own transaction made the cache forget that id.
final class RememberingEpoch: Sendable {
    private let value: Mutex<UInt64>

    /// Stands on `epoch`.
    init(_ epoch: UInt64) { value = Mutex(epoch) }

    /// The epoch to pass to ``LiveSessions/remember(_:user:readAt:)``.
    var epoch: UInt64 { value.withLock { $0 } }

    /// Moves from `before` to `after` when it stood on `before` (nothing else forgot since).
    func moved(from before: UInt64, to after: UInt64) {
        value.withLock { if $0 == before { $0 = after } }
    }

    /// The remembering the current task is doing, if any.
    @TaskLocal static var current: RememberingEpoch?
}

/// Counts how many times each declaration ran in one store (``PostgresStore/declarationsRun``): the property tests
/// check that every declaration a cache depends on was exercised.
final class DeclarationCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// Counts one run of `write` and of each of its fragments.
    func ran(_ write: PostgresWrite) {
        counts.withLock { counts in write.forEachDeclaration { name, _ in counts[name, default: 0] += 1 } }
    }

    /// The runs so far, by declaration name.
    var runs: [String: Int] { counts.withLock { $0 } }
}

extension PostgresStore {
    /// What the range-query pages (``pages``) read. They need nothing more: a page is stamped with the user's change
    /// counter (`sync_state.version`), which every document change moves, and a request asks for the counter it reads.
    static let pageReads = CacheReads(.documents, .syncState)

    /// Runs the declared `write` on its own (committed when it returns; retried after a conflict like
    /// ``rows(_:)``), its values bound in `statement`; its changes reach the caches then, as `rows`.
    @discardableResult
    func run(_ write: PostgresWrite, _ statement: BoundStatement, changing rows: [ChangedRows]) async throws -> [PostgresRow] {
        let result = try await self.rows(statement.query(write.sql))
        note(write, rows, on: nil)
        return result
    }

    /// Runs the declared `write` on `connection` (in its transaction, noted there; else on its own), its values bound in
    /// `statement`, as changing `rows`.
    @discardableResult
    func run(
        _ write: PostgresWrite, _ statement: BoundStatement, changing rows: [ChangedRows], on connection: PooledConnection
    ) async throws -> [PostgresRow] {
        let result = try await connection.rows(statement.query(write.sql), logger: logger)
        note(write, rows, on: connection)
        return result
    }

    /// Notes that the declared `write` ran and changed `rows` (for rows a statement's result names, once it returned):
    /// in the transaction of `connection`, for the caches to forget when it commits, or — on its own connection
    /// (`nil`, or one in no store transaction) — at once, since it has committed. A write no cache depends on is only counted.
    func note(_ write: PostgresWrite, _ rows: some Collection<ChangedRows>, on connection: PooledConnection?) {
        declarationsRun.ran(write)
        guard !write.caches.isDisjoint(with: [.accounts, .sessions]) else { return }
        if let changes = connection?.changes {
            changes.note(write, rows)
        } else {
            // One write: every table it changes changed in `rows`, so each cache reading one forgets exactly those.
            if write.caches.contains(.accounts) { accounts.forget(rows) }
            if write.caches.contains(.sessions) { forgetSessions(rows) }
        }
    }

    /// Makes this process's caches forget what a committed transaction changed, as each cache's ``CacheReads`` says.
    func forget(_ changes: PendingChanges) {
        guard !changes.isEmpty else { return }
        let accountRows = changes.changed(for: AccountCache.reads)
        if !accountRows.isEmpty { accounts.forget(accountRows) }
        let sessionRows = changes.changed(for: LiveSessions.reads)
        if !sessionRows.isEmpty { forgetSessions(sessionRows) }
    }

    /// ``LiveSessions/forget(_:)``, moving the current task's ``RememberingEpoch`` along with it.
    private func forgetSessions(_ rows: some Collection<ChangedRows>) {
        let (before, after) = sessions.forget(rows)
        RememberingEpoch.current?.moved(from: before, to: after)
    }
}
