import GRDB
import GRDBSQLite
import Synchronization

/// Copies the write-ahead log into the database file on a connection of its own, so that the single writer
/// seldom stops for it.
///
/// SQLite's default checkpoints inside the commit that takes the log past 1,000 pages: that commit copies
/// the pages and syncs both files while every other write waits behind it (the writer thread spent about a
/// tenth of its time in `fdatasync`, and the machine sat partly idle). Here the writer's WAL hook, which
/// replaces the automatic checkpoint, asks for a passive checkpoint on this connection (it copies what it can
/// without blocking the writer or the readers). The log starts over from its beginning only once a checkpoint
/// has copied all of it, which a checkpoint racing steady writes rarely does; so when the log passes
/// ``backstop`` pages the writer checkpoints it itself, as SQLite would, with most of it already copied.
/// Passive checkpoints give way to each other and to readers, so on a starved machine the log could still grow
/// with every commit; past ``ceiling`` pages the writer waits for a checkpoint that copies the whole log and lets
/// the next commit start it over (the bound holds however the threads are scheduled).
final class Checkpointer: Sendable {
    /// Log pages after which a background checkpoint is asked for (SQLite's automatic one runs at 1,000).
    let threshold: Int32
    /// Log pages after which the writer checkpoints in its own commit.
    let backstop: Int32
    /// Log pages after which the writer waits for the whole log to be copied (four backstops).
    var ceiling: Int32 { backstop * 4 }
    private let connection: DatabaseQueue
    private let pending = Atomic<Bool>(false)

    /// Opens the checkpointing connection to the database at `path` (which must exist already), with the store's busy
    /// timeout (``SQLiteStore/busyMilliseconds``).
    init(path: String, threshold: Int32, backstop: Int32) throws {
        precondition(0 < threshold && threshold < backstop)
        (self.threshold, self.backstop) = (threshold, backstop)
        var configuration = Configuration()
        configuration.label = "tally.checkpointer"
        configuration.busyMode = .timeout(Double(SQLiteStore.busyMilliseconds) / 1000)
        connection = try DatabaseQueue(path: path, configuration: configuration)
    }

    /// Replaces the automatic checkpoint of `db` (the writer) with this checkpointer.
    ///
    /// The hook holds the checkpointer weakly (through a small box that stays with the connection), so the
    /// connection may outlive it: then the hook does nothing and the backstop is the writer's own.
    func watch(_ db: Database) {
        let box = Unmanaged.passRetained(WeakCheckpointer(self)).toOpaque()
        sqlite3_wal_hook(db.sqliteConnection, { box, connection, _, pages in
            guard let box else { return SQLITE_OK }
            let checkpointer = Unmanaged<WeakCheckpointer>.fromOpaque(box).takeUnretainedValue().checkpointer
            if let checkpointer, pages >= checkpointer.ceiling {
                // Without a busy timeout: a long read must not stall every write (the log starts over at a later
                // commit, once readers have left it). A checkpoint under way elsewhere makes this one fail at once:
                // wait for the background one, which never waits for the writer, then copy the rest.
                sqlite3_busy_timeout(connection, 0)
                if sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_RESTART, nil, nil) == SQLITE_BUSY {
                    checkpointer.waitForBackground()
                    sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_RESTART, nil, nil)
                }
                sqlite3_busy_timeout(connection, SQLiteStore.busyMilliseconds)
            } else if pages >= checkpointer?.backstop ?? 1_000 {
                sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            } else if pages >= checkpointer?.threshold ?? .max {
                checkpointer?.checkpointInBackground()
            }
            return SQLITE_OK
        }, box)
    }

    /// Returns once the background checkpoint that is pending, if any, is done (its connection's queue is serial).
    private func waitForBackground() {
        try? connection.inDatabase { _ in }
    }

    /// Puts one passive checkpoint on the checkpointing connection, unless one is pending already.
    private func checkpointInBackground() {
        guard pending.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        connection.asyncWriteWithoutTransaction { db in
            _ = try? db.checkpoint(.passive)
            self.pending.store(false, ordering: .releasing)
        }
    }
}

/// What the writer's WAL hook holds on to.
private final class WeakCheckpointer: Sendable {
    weak let checkpointer: Checkpointer?
    init(_ checkpointer: Checkpointer) { self.checkpointer = checkpointer }
}
