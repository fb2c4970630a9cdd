import Foundation

/// One cached value as persisted: the JSON bytes the server sent, its ETag and when it was confirmed.
public struct PersistedEntry: Sendable, Hashable {
    /// The cache key of the query.
    public var key: String
    /// The JSON bytes the server sent.
    public var data: Data
    /// The ETag the server sent with them, if any.
    public var etag: String?
    /// When the server last confirmed these bytes.
    public var confirmedAt: Date

    /// Creates an entry.
    public init(key: String, data: Data, etag: String?, confirmedAt: Date) {
        self.key = key
        self.data = data
        self.etag = etag
        self.confirmedAt = confirmedAt
    }
}

/// Durable storage for the values the server confirmed, namespaced by user: a user's id, or
/// ``CacheNamespace/shared`` for data that belongs to no user (the price list).
public protocol CacheStore: Sendable {
    /// Every entry stored for `userId` (a user's id or ``CacheNamespace/shared``), ordered by the keys' UTF-8 bytes.
    func entries(userId: String) throws -> [PersistedEntry]
    /// Inserts `entry`, or replaces the one with the same key, for `userId`.
    func save(_ entry: PersistedEntry, userId: String) throws
    /// Removes the entry under `key` for `userId`, if any.
    func remove(key: String, userId: String) throws
    /// Removes everything stored for `userId` (sign-out).
    func removeAll(userId: String) throws
    /// Removes everything for every user.
    func removeEverything() throws
}

/// The namespaces of a ``CacheStore`` that are not a user's.
public enum CacheNamespace {
    /// Data that belongs to no user (the price list): sign-out keeps it, ``CacheStore/removeEverything()``
    /// removes it. Server user ids are never empty.
    public static let shared = ""
}

/// A failure of a ``CacheStore``; its description names the operation and the cause, never stored data.
public struct CacheStoreError: Error, CustomStringConvertible {
    /// What the store was doing, such as "save" or "open".
    public var operation: String
    /// Why it failed, without stored data.
    public var reason: String

    /// Creates an error.
    public init(operation: String, reason: String) {
        self.operation = operation
        self.reason = reason
    }

    /// A short description without stored data.
    public var description: String { "cache store \(operation) failed: \(reason)" }
}

/// A ``CacheStore`` in memory, for tests and for apps that want nothing on disk.
public final class MemoryCacheStore: CacheStore {
    private let storage = Locked<[String: [String: PersistedEntry]]>([:])

    /// Creates an empty store.
    public init() {}

    /// Every entry stored for `userId`, ordered by the keys' UTF-8 bytes (as SQLite orders them).
    public func entries(userId: String) -> [PersistedEntry] {
        let entries = storage.withLock { Array(($0[userId] ?? [:]).values) }
        return entries.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    /// Inserts or replaces `entry` for `userId`.
    public func save(_ entry: PersistedEntry, userId: String) {
        storage.withLock { $0[userId, default: [:]][entry.key] = entry }
    }

    /// Removes the entry under `key` for `userId`.
    public func remove(key: String, userId: String) {
        storage.withLock { _ = $0[userId]?.removeValue(forKey: key) }
    }

    /// Removes everything stored for `userId`.
    public func removeAll(userId: String) {
        storage.withLock { _ = $0.removeValue(forKey: userId) }
    }

    /// Removes everything for every user.
    public func removeEverything() {
        storage.withLock { $0.removeAll() }
    }
}
