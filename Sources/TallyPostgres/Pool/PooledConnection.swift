import Logging
import PostgresNIO
import Synchronization

/// A connection leased from ``PostgresPool``: statements and transactions that end when the connection
/// does, whatever the timing.
///
/// PostgresNIO 1.33 never answers a statement written to a connection that has already closed: it writes
/// the statement with no promise, the closed channel drops it, and the caller waits forever (reproduced:
/// `connection.close()`, then `query` hangs). A close can always race a statement (PostgreSQL stopping, the
/// pool stopping), and an awaited statement that never returns would hold its account's turn and its
/// idempotency key for good. So each statement is awaited against the connection's end: it runs in a task
/// of its own, and when the connection closes first, the caller gets ``PoolFailure/connectionClosed`` at
/// once (the statement, if PostgreSQL got it, fails or commits on its own; an idempotency key makes the
/// caller's retry safe). A statement abandoned that way leaves one suspended task behind.
public struct PooledConnection: Sendable {
    /// The connection.
    public let connection: PostgresConnection
    let watch: ConnectionWatch

    /// Runs `query` and collects its rows.
    @discardableResult
    public func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        let connection = self.connection
        return try await watch.run { try await connection.query(query, logger: logger).collect() }
    }

    /// Runs a prepared statement (prepared once per connection) and collects its rows.
    public func execute<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws -> [PostgresRow]
    where Statement.Row == PostgresRow {
        let connection = self.connection
        return try await watch.run {
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
            return rows
        }
    }

    /// Runs `body` between `BEGIN` and `COMMIT`, with `ROLLBACK` when it throws. A connection whose
    /// `COMMIT` or `ROLLBACK` failed is closed, since its session may still be inside the transaction.
    func transaction<T>(logger: Logger, _ body: (PooledConnection) async throws -> T) async throws -> T {
        try await rows("BEGIN", logger: logger)
        let value: T
        do {
            value = try await body(self)
        } catch {
            do { try await rows("ROLLBACK", logger: logger) } catch { connection.close().whenComplete { _ in } }
            throw error
        }
        do {
            try await rows("COMMIT", logger: logger)
        } catch {
            connection.close().whenComplete { _ in }
            throw error
        }
        return value
    }
}

/// The statements in flight on one connection, failed as soon as the connection closes (see ``PooledConnection``).
final class ConnectionWatch: Sendable {
    private struct State {
        var isClosed = false
        var next = 0
        var pending: [Int: CheckedContinuation<[PostgresRow], any Error>] = [:]
    }

    private let state = Mutex(State())

    /// Runs `work` in a task of its own and returns its result, or throws once the connection is closed.
    /// Whoever takes the continuation out of `pending` (the task, or ``closed()``) resumes it.
    func run(_ work: @escaping @Sendable () async throws -> [PostgresRow]) async throws -> [PostgresRow] {
        try await withCheckedThrowingContinuation { continuation in
            let id: Int? = state.withLock { state in
                guard !state.isClosed else { return nil }
                state.next += 1
                state.pending[state.next] = continuation
                return state.next
            }
            guard let id else {
                continuation.resume(throwing: PoolFailure.connectionClosed)
                return
            }
            Task {
                let result: Result<[PostgresRow], any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                self.state.withLock { $0.pending.removeValue(forKey: id) }?.resume(with: result)
            }
        }
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
