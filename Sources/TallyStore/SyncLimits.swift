import Foundation

// The bounds of what one user's sync may cost the server, written once for both stores: how much one page of
// documents holds (``PageBound``), and what a user may keep (``SyncBudget``, measured by ``SyncUsage``).

/// How much one page of documents may hold (a pull's changes, a range query's documents): at most `limit`
/// documents, and at most `maxBytes` of their `data` (canonical bytes; a tombstone has none) — except that a
/// page always holds its first document, whatever its size, so paging always moves on.
///
/// A page ends just before the first document it cannot take; that document is the first of the next page
/// (whose cursor is the last document of this one), so no document is skipped or repeated.
public struct PageBound: Sendable, Hashable {
    /// The most documents a page holds.
    public var limit: Int
    /// The most bytes of `data` a page of two or more documents holds.
    public var maxBytes: Int

    /// The default `maxBytes`: 1 MiB.
    public static let defaultMaxBytes = 1 << 20

    /// A bound of `limit` documents (at least 1) and `maxBytes` bytes.
    public init(limit: Int, maxBytes: Int = Self.defaultMaxBytes) {
        self.limit = max(limit, 1)
        self.maxBytes = maxBytes
    }

    /// A page being filled, document by document in page order.
    public struct Filling: Sendable {
        let bound: PageBound
        /// Documents taken.
        public private(set) var count = 0
        /// Bytes of their `data`.
        public private(set) var bytes = 0

        /// Takes `record` into the page and returns true, or returns false: the page ends before it.
        public mutating func take(_ record: DocumentRecord) -> Bool {
            let size = record.data.count
            guard count < bound.limit, count == 0 || bytes + size <= bound.maxBytes else { return false }
            count += 1
            bytes += size
            return true
        }
    }

    /// An empty page to fill.
    public func filling() -> Filling { Filling(bound: self) }

    /// The page `rows` make and whether more documents follow it. `rows` are in page order and hold at least
    /// every document the page takes and, when one exists, the first it refuses (a store reads `limit + 1`
    /// rows, or stops at that one).
    public func cut(_ rows: [DocumentRecord]) -> (documents: [DocumentRecord], hasMore: Bool) {
        var page = filling()
        let taken = rows.prefix { page.take($0) }
        return (Array(taken), taken.count < rows.count)
    }
}

/// What one user may keep in synced collections, everything counted until it is gone: documents and their
/// tombstones (a deleted document's row stays until housekeeping purges it, `tombstoneRetentionDays` later),
/// the bytes of the documents' data, and sync client ids (kept until idle for as long). A write that would
/// take the user past it is refused `.storageFull`, whatever the collection's own limits; a write that
/// adds nothing (a delete, a replacement no larger) is never refused by it.
public struct SyncBudget: Sendable, Hashable {
    /// Documents stored, live ones and tombstones, across all collections.
    public var documents: Int
    /// Bytes of the stored documents' canonical `data`.
    public var bytes: Int
    /// Sync client ids (`clientId` of a push) owned.
    public var clientIds: Int

    /// The default `documents`: 20,000.
    public static let defaultDocuments = 20_000
    /// The default `bytes`: 64 MiB.
    public static let defaultBytes = 64 << 20
    /// The default `clientIds`: 5,000.
    public static let defaultClientIds = 5_000

    /// A budget; the defaults by default.
    public init(documents: Int = Self.defaultDocuments, bytes: Int = Self.defaultBytes, clientIds: Int = Self.defaultClientIds) {
        self.documents = documents
        self.bytes = bytes
        self.clientIds = clientIds
    }
}

/// What a user's stored documents take of their ``SyncBudget``: the counters each store keeps in the user's
/// sync state, changed in the transaction of every document write and tombstone purge.
public struct SyncUsage: Sendable, Hashable {
    /// Document rows (live and tombstones).
    public var documents: Int64
    /// Bytes of their data.
    public var bytes: Int64

    /// A usage; nothing by default.
    public init(documents: Int64 = 0, bytes: Int64 = 0) {
        self.documents = documents
        self.bytes = bytes
    }

    /// The usage once `data` (empty for a tombstone) is stored where `existing` was (`nil`: a new row).
    public func writing(_ data: [UInt8], over existing: DocumentRecord?) -> SyncUsage {
        SyncUsage(
            documents: documents + (existing == nil ? 1 : 0), bytes: bytes + Int64(data.count) - Int64(existing?.data.count ?? 0))
    }

    /// Whether going from this usage to `next` stays within `budget`: each measure that grows must stay at or
    /// below its limit (one that does not grow is fine even above it, e.g. after the budget was lowered).
    public func admits(_ next: SyncUsage, within budget: SyncBudget) -> Bool {
        (next.documents <= documents || next.documents <= Int64(budget.documents))
            && (next.bytes <= bytes || next.bytes <= Int64(budget.bytes))
    }
}
