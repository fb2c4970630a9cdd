import Foundation
import TallyAPI

/// Where the signed-in user's synced documents stand, for a "saved / syncing / offline" badge
/// (``Client/syncStatus``, ``Client/syncStatusChanges``).
public struct SyncStatus: Sendable, Hashable {
    /// Local changes the server has not confirmed yet (0: everything is saved).
    public var pendingMutations: Int
    /// When a push was last answered or a pull last completed; nil before the first sync.
    public var lastSyncedAt: Date?
    /// Whether the last attempt to reach the server (a push, a pull, the event stream) failed; local writes go on.
    public var isOffline: Bool
    /// Whether a push or a pull is under way.
    public var isSyncing: Bool

    /// Creates a status.
    public init(pendingMutations: Int = 0, lastSyncedAt: Date? = nil, isOffline: Bool = false, isSyncing: Bool = false) {
        self.pendingMutations = pendingMutations
        self.lastSyncedAt = lastSyncedAt
        self.isOffline = isOffline
        self.isSyncing = isSyncing
    }
}

/// A local change the server refused for good (``Client/syncEvents``). It has been rolled back: the document
/// shows the server's state again.
public enum SyncEvent: Sendable, Hashable {
    /// A strict write (`ifVersion`) found the document changed: `current` is the server's document (nil: none).
    case conflict(collection: String, id: String, current: Document?)
    /// The server refused the change: `error.code` is e.g. `document_too_large`, `collection_full`,
    /// `insufficient_tokens` or `quota_exhausted` (a metered collection), `not_found`.
    case rejected(collection: String, id: String, error: ErrorDetail)

    /// The refused change's collection.
    public var collection: String {
        switch self {
        case .conflict(let collection, _, _), .rejected(let collection, _, _): collection
        }
    }

    /// The refused change's document id.
    public var id: String {
        switch self {
        case .conflict(_, let id, _), .rejected(_, let id, _): id
        }
    }

    init(_ refusal: PushRefusal) {
        switch refusal.reason {
        case .conflict(let current): self = .conflict(collection: refusal.key.collection, id: refusal.key.id, current: current)
        case .rejected(let error): self = .rejected(collection: refusal.key.collection, id: refusal.key.id, error: error)
        }
    }
}
