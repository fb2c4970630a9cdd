import Foundation

/// The rule of a pull page (``DocumentStore/changes(userId:after:limit:maxBytes:)``), written once for both
/// stores: which documents a page reads, when a cursor must resync, and where the next page starts. Each store
/// only reads, in one snapshot, the user's version and purge mark, the clients' last mutation ids and the
/// documents after ``since`` in version order (tombstones only when ``includesTombstones``) that ``bound``
/// takes, plus the first it refuses: at most ``readLimit`` rows.
public struct ChangePaging: Sendable, Hashable {
    /// The cursor the page starts after (`nil`: a pull of the whole live state, for a new device).
    public let after: Int64?
    /// How much the page holds: documents (at least 1) and bytes of their data.
    public let bound: PageBound

    /// A page of at most `limit` documents (1 when less) and `maxBytes` of their data (its first document
    /// whatever its size) after `after`.
    public init(after: Int64?, limit: Int, maxBytes: Int = PageBound.defaultMaxBytes) {
        self.after = after
        bound = PageBound(limit: limit, maxBytes: maxBytes)
    }

    /// The version the documents read are above.
    public var since: Int64 { after ?? 0 }
    /// Whether tombstones are read: only after a cursor (a new device needs only what is live).
    public var includesTombstones: Bool { after != nil }
    /// How many documents a store reads at most: one more than the page, which says whether more are waiting.
    public var readLimit: Int { bound.limit + 1 }

    /// Throws `.resyncRequired` when the cursor is below the newest tombstone purged (`purgedThrough`: the
    /// changes after it are no longer all there) or above the user's current `version` (it was never given out).
    public func check(version: Int64, purgedThrough: Int64) throws(StoreError) {
        if let after, after < purgedThrough || after > version { throw StoreError(.resyncRequired) }
    }

    /// The page from what the store read in one snapshot: the documents ``bound`` took (in version order) and
    /// whether more follow (``PageBound/cut(_:)`` of the rows read, or the store's own reading that stops at the
    /// first document refused), the user's `version` and purge mark, and the clients' last mutation ids. Its
    /// cursor is the last document's version when more are waiting, else the user's version.
    public func page(
        _ taken: (documents: [DocumentRecord], hasMore: Bool), version: Int64, purgedThrough: Int64, lastMutationIds: [String: Int64]
    ) throws(StoreError) -> ChangePage {
        try check(version: version, purgedThrough: purgedThrough)
        let (changes, hasMore) = taken
        return ChangePage(
            changes: changes, cursor: hasMore ? changes[changes.count - 1].version : version, hasMore: hasMore,
            lastMutationIds: lastMutationIds)
    }
}
