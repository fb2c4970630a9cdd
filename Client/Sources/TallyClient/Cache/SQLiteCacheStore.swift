import Foundation
import GRDB

/// A ``CacheStore`` in one SQLite file, so a cold start or no network still shows the last known values.
///
/// Deleted rows are overwritten (`secure_delete`) and sign-out vacuums the file, so nothing of a
/// previous user stays in it. The file is readable by its owner only where the platform allows.
public final class SQLiteCacheStore: CacheStore {
    private let queue: DatabaseQueue
    /// Whether the file is in an App Group container: suspended while the app is in the background.
    let isShared: Bool

    /// Opens (creating if needed) the database at `path`, with its directory, and migrates it. A path in an App Group
    /// container (shared with the app's extensions) is suspended while the app is in the background
    /// (``Client/appDidEnterBackground()``), so iOS never suspends the app holding a lock on it.
    public init(path: String) throws {
        do {
            try PrivateDatabaseFile.prepare(path: path)
        } catch {
            throw Self.wrap(error, "open")
        }
        var configuration = Configuration()
        configuration.label = "TallyClient.cache"
        isShared = PrivateDatabaseFile.isInSharedContainer(path)
        configuration.observesSuspensionNotifications = isShared
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        queue = try Self.run("open") {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try Self.migrator.migrate(queue)
            return queue
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE cache_entry (
                    user_id TEXT NOT NULL,
                    key TEXT NOT NULL,
                    data BLOB NOT NULL,
                    etag TEXT,
                    confirmed_at REAL NOT NULL,
                    PRIMARY KEY (user_id, key)
                )
                """)
        }
        return migrator
    }

    /// Every entry stored for `userId`, ordered by key.
    public func entries(userId: String) throws -> [PersistedEntry] {
        try Self.run("read") {
            try queue.read { db in
                try Row.fetchAll(db, sql: """
                        SELECT key, data, etag, confirmed_at FROM cache_entry WHERE user_id = ? ORDER BY key
                        """, arguments: [userId])
                    .map { row in
                        PersistedEntry(key: row[0], data: row[1] ?? Data(), etag: row[2],
                                       confirmedAt: Date(timeIntervalSince1970: row[3]))
                    }
            }
        }
    }

    /// Inserts or replaces `entry` for `userId`.
    public func save(_ entry: PersistedEntry, userId: String) throws {
        try Self.run("save") {
            try queue.write { db in
                try db.execute(sql: """
                    INSERT INTO cache_entry (user_id, key, data, etag, confirmed_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, key) DO UPDATE SET
                        data = excluded.data, etag = excluded.etag, confirmed_at = excluded.confirmed_at
                    """, arguments: [userId, entry.key, entry.data, entry.etag, entry.confirmedAt.timeIntervalSince1970])
            }
        }
    }

    /// Removes the entry under `key` for `userId`.
    public func remove(key: String, userId: String) throws {
        try Self.run("remove") {
            try queue.write { db in
                try db.execute(sql: "DELETE FROM cache_entry WHERE user_id = ? AND key = ?", arguments: [userId, key])
            }
        }
    }

    /// Removes everything stored for `userId`, then vacuums so no freed page keeps old bytes.
    public func removeAll(userId: String) throws {
        try Self.run("remove all") {
            try queue.write { db in
                try db.execute(sql: "DELETE FROM cache_entry WHERE user_id = ?", arguments: [userId])
            }
            try queue.vacuum()
        }
    }

    /// Removes everything for every user, then vacuums.
    public func removeEverything() throws {
        try Self.run("remove everything") {
            try queue.write { db in try db.execute(sql: "DELETE FROM cache_entry") }
            try queue.vacuum()
        }
    }

    // MARK: Errors

    private static func run<T>(_ operation: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw wrap(error, operation)
        }
    }

    /// SQLite's own messages name tables and constraints, never bound values; statement
    /// arguments are left out on purpose.
    private static func wrap(_ error: any Error, _ operation: String) -> CacheStoreError {
        if let error = error as? CacheStoreError { return error }
        if let error = error as? DatabaseError {
            let message = error.message.map { ": \($0)" } ?? ""
            return CacheStoreError(operation: operation, reason: "SQLite error \(error.extendedResultCode.rawValue)\(message)")
        }
        return CacheStoreError(operation: operation, reason: (error as NSError).localizedDescription)
    }
}
