import Logging
import PostgresNIO
import Synchronization
import TallyStore

/// A connection leased from ``PostgresPool``: statements and transactions that end when the connection
/// does, whatever the timing.
///
/// PostgresNIO 1.33 never answers a statement written to a connection that has already closed: it writes
/// the statement with no promise, the closed channel drops it, and the caller waits forever (reproduced:
/// `connection.close()`, then `query` hangs). A close can always race a statement (PostgreSQL stopping, the
/// pool stopping), and an awaited statement that never returns would hold its account's turn and its
/// idempotency key for good. So each statement is awaited against the connection's end: an unnamed one is
/// sent through PostgresNIO's future API, a named one runs in a task of its own (on the connection's event loop, like
/// the lease's body: ``ConnectionExecutor``), and when the connection closes
/// first, the caller gets ``PoolFailure/connectionClosed`` at once (the statement, if PostgreSQL got it, fails or
/// commits on its own; an idempotency key makes the caller's retry safe). A statement abandoned that way leaves
/// a future that never completes, or one suspended task, behind.
///
/// The store's named statements (``PostgresPreparedStatement``s) all go through ``execute(_:logger:)``, the one
/// place that sends them as the pool's ``PostgresStatements`` says: prepared once per connection, or unnamed
/// on every call (through a transaction pooler). A connection whose prepared statements no longer match the
/// server session it talks to (SQLSTATE 26000 or 42P05) is marked broken there, and the pool closes it
/// instead of taking it back (PostgresNIO remembers a failed prepare for the connection's life).
public struct PooledConnection: Sendable {
    /// The connection.
    public let connection: PostgresConnection
    let watch: ConnectionWatch
    /// How ``execute(_:logger:)`` sends a named statement.
    let statements: PostgresStatements
    /// Runs tasks on the connection's event loop (``PostgresPool/withConnection(_:)``'s bodies, named statements).
    let executor: ConnectionExecutor
    /// The changes of the transaction this connection is in (``transaction(logger:committed:_:)``), noted as its
    /// declared writes run; `nil` outside one, where a statement commits when it returns.
    var changes: TransactionChanges?

    init(connection: PostgresConnection, watch: ConnectionWatch, statements: PostgresStatements = .prepared) {
        self.connection = connection
        self.executor = ConnectionExecutor(connection.eventLoop)
        self.watch = watch
        self.statements = statements
    }

    /// Runs `query` and collects its rows (on the connection's event loop: no task and no row sequence).
    @discardableResult
    public func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        let connection = self.connection
        return try await watch.run { connection.query(query, logger: logger).map(\.rows) }
    }

    /// Runs a named statement and collects its rows: ``PostgresStatements/prepared``, prepared once per
    /// connection; ``PostgresStatements/unnamed``, its SQL and bindings as an unnamed extended-protocol query.
    public func execute<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws -> [PostgresRow]
    where Statement.Row == PostgresRow {
        switch statements {
        case .unnamed:
            return try await rows(PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings()), logger: logger)
        case .prepared:
            let connection = self.connection
            do {
                return try await watch.run(on: executor) {
                    var rows: [PostgresRow] = []
                    for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
                    return rows
                }
            } catch {
                if let sqlState = PostgresStatements.lostStatement(error) { watch.broke(.statementLost(sqlState: sqlState)) }
                throw error
            }
        }
    }

    /// Runs `body` between `BEGIN` and `COMMIT`, with `ROLLBACK` when it throws. A connection whose
    /// `COMMIT` or `ROLLBACK` failed is closed, since its session may still be inside the transaction.
    ///
    /// `body` gets the connection with a fresh ``TransactionChanges``, where the declared writes it runs note what
    /// they change; `committed` is handed them once `COMMIT` returns (and also when `COMMIT` failed, since it may
    /// have committed all the same: forgetting more than needed is harmless), never after a `ROLLBACK`.
    func transaction<T>(
        logger: Logger, committed: (PendingChanges) -> Void = { _ in }, _ body: (PooledConnection) async throws -> T
    ) async throws -> T {
        var inTransaction = self
        let changes = TransactionChanges()
        inTransaction.changes = changes
        try await rows("BEGIN", logger: logger)
        let value: T
        do {
            value = try await body(inTransaction)
        } catch {
            do { try await rows("ROLLBACK", logger: logger) } catch { connection.close().whenComplete { _ in } }
            throw error
        }
        do {
            try await rows("COMMIT", logger: logger)
        } catch {
            connection.close().whenComplete { _ in }
            committed(changes.pending)
            throw error
        }
        committed(changes.pending)
        return value
    }
}

/// The statements in flight on one connection, failed as soon as the connection closes (see ``PooledConnection``).
final class ConnectionWatch: Sendable {
    private struct State {
        var isClosed = false
        var broken: BrokenConnection?
        var next = 0
        var pending: [Int: CheckedContinuation<[PostgresRow], any Error>] = [:]
    }

    private let state = Mutex(State())

    /// Why the connection must not be used again, once something found it so.
    var broken: BrokenConnection? { state.withLock { $0.broken } }

    /// Marks the connection as not to be reused (the first reason is kept): the pool closes it at its release.
    func broke(_ reason: BrokenConnection) {
        state.withLock { state in if state.broken == nil { state.broken = reason } }
    }

    /// Runs `work` in a task of its own on `executor` (the connection's event loop) and returns its result, or throws
    /// once the connection is closed. Whoever takes the continuation out of `pending` (the task, or ``closed()``) resumes it.
    func run(on executor: ConnectionExecutor, _ work: @escaping @Sendable () async throws -> [PostgresRow]) async throws -> [PostgresRow] {
        try await withCheckedThrowingContinuation { continuation in
            guard let id = register(continuation) else { return }
            Task(executorPreference: executor) {
                let result: Result<[PostgresRow], any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                self.finish(id, with: result)
            }
        }
    }

    /// Starts `work` and returns its future's result, or throws once the connection is closed; the future
    /// completes on the connection's event loop, which resumes the caller directly.
    func run(_ work: () -> EventLoopFuture<[PostgresRow]>) async throws -> [PostgresRow] {
        try await withCheckedThrowingContinuation { continuation in
            guard let id = register(continuation) else { return }
            work().whenComplete { self.finish(id, with: $0) }
        }
    }

    /// Puts `continuation` in `pending`; `nil` (and the continuation resumed) when the connection is closed.
    private func register(_ continuation: CheckedContinuation<[PostgresRow], any Error>) -> Int? {
        let id: Int? = state.withLock { state in
            guard !state.isClosed else { return nil }
            state.next += 1
            state.pending[state.next] = continuation
            return state.next
        }
        if id == nil { continuation.resume(throwing: PoolFailure.connectionClosed) }
        return id
    }

    /// Resumes the statement `id` with `result`, unless ``closed()`` already did.
    private func finish(_ id: Int, with result: Result<[PostgresRow], any Error>) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.resume(with: result)
    }

    /// The connection closed: every statement still waiting fails now, and no new one starts.
    func closed() {
        let pending = state.withLock { state in
            state.isClosed = true
            defer { state.pending.removeAll() }
            return Array(state.pending.values)
        }
        for continuation in pending { continuation.resume(throwing: PoolFailure.connectionClosed) }
    }
}

/// Why a pooled connection is closed at its release instead of being reused.
enum BrokenConnection: Equatable, Sendable {
    /// A named statement is missing on the server session (26000) or is there already (42P05): the session is
    /// not the one the statements were prepared on, as behind a transaction pooler.
    case statementLost(sqlState: String)
    /// Opened before a setting its sessions should start with (``PostgresPool/retireConnections()``).
    case retired
}

/// How the store sends its named statements (`TALLY_POSTGRES_STATEMENTS`).
public enum PostgresStatements: String, Sendable, CaseIterable {
    /// Named prepared statements, parsed and planned once per connection: each call is one Bind/Execute. Needs
    /// a session of its own per connection: PostgreSQL directly, a pooler in session mode, or PgBouncer 1.21 or
    /// later with `max_prepared_statements` set.
    case prepared
    /// The same statements as unnamed extended-protocol queries, parsed and planned on every call: works
    /// through any transaction pooler (PgBouncer 1.18 in `pool_mode=transaction`).
    case unnamed

    /// The SQLSTATE of an error that says a named statement does not match the server session — missing
    /// (`26000`, invalid_sql_statement_name) or already there (`42P05`, duplicate_prepared_statement) —, else `nil`.
    static func lostStatement(_ error: any Error) -> String? {
        guard let error = error as? PSQLError, error.code == .server, let sqlState = error.serverInfo?[.sqlState],
            sqlState == "26000" || sqlState == "42P05"
        else { return nil }
        return sqlState
    }
}

extension PostgresPreparedStatement where Row == PostgresRow {
    /// The store's statements decode their rows by column name (``Columns``): each row as it came.
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}
