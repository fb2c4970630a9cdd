import Foundation
import GRDB
import Synchronization

/// A few read-only connections of their own, each taken without waiting and used on the calling thread: one SELECT
/// with no hop to a reader's dispatch queue and back, and no `BEGIN`/`COMMIT` (a statement alone reads one
/// snapshot of a WAL database). For the hot reads that cannot be answered from memory, such as a purchase replay.
///
/// Never waits: when every connection is in use, ``read(_:)`` answers `nil` and the caller reads through the pool's
/// async API instead. (GRDB's synchronous pool read waits for a reader, and a reader is only handed back after its
/// async caller resumes on a cooperative thread: with every cooperative thread waiting, none ever is.) A SELECT here
/// blocks its thread for the statement alone: in WAL mode a reader waits for no writer.
final class QuickReaders: Sendable {
    private let free: Mutex<[DatabaseQueue]>

    /// `count` read-only connections to the database at `path` (which the pool has opened in WAL mode).
    init(path: String, count: Int, configuration: Configuration) throws {
        var configuration = configuration
        configuration.readonly = true
        configuration.label = "tally.quick-reader"
        free = Mutex(try (0..<count).map { _ in try DatabaseQueue(path: path, configuration: configuration) })
    }

    /// `body`'s answer from a free connection, on the calling thread; `nil` when every connection is in use.
    func read<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let connection = free.withLock({ $0.popLast() }) else { return nil }
        defer { free.withLock { $0.append(connection) } }
        return try connection.inDatabase(body)
    }
}
