import Foundation
import TallyAPI

/// Where the signed-in user's synced documents stand, for a "saved / syncing / offline" badge
/// (``Client/syncStatus``, ``Client/syncStatusChanges``).
public struct SyncStatus: Sendable, Hashable {
    /// What sync is doing.
    public enum Phase: Sendable, Hashable {
        /// Nothing under way: everything was sent and pulled, or there is nothing to do.
        case idle
        /// A push or a pull is under way, and the server answered the last request.
        case syncing
        /// The server could not be reached (no answer, or the event stream dropped). Local writes go on; the next
        /// check is at ``SyncStatus/retryAt`` — sooner at any sign that the server is back: an answered request,
        /// the event stream reconnecting, a network change, the app coming forward, a new write, ``SyncClient/now()``.
        case offline
        /// The server answered "not now" (429, 503…): the next attempt is at ``SyncStatus/retryAt`` (never before
        /// the server's `Retry-After`), unless ``SyncClient/now()`` asks sooner.
        case waitingToRetry
    }

    /// Local changes the server has not confirmed yet (0: everything is saved).
    public var pendingMutations: Int
    /// When a push was last answered or a pull last completed; nil before the first sync.
    public var lastSyncedAt: Date?
    /// What sync is doing now.
    public var phase: Phase
    /// When the next attempt (``Phase/waitingToRetry``) or reachability check (``Phase/offline``) is due, on the
    /// client's clock; nil while a request is under way or nothing is scheduled.
    public var retryAt: Date?

    /// Whether a sync round is under way: sending, or waiting to send again after a failure (then ``phase`` is
    /// ``Phase/offline`` or ``Phase/waitingToRetry``). False once the round ended, so `pendingMutations == 0 &&
    /// !isSyncing` after a sync means every change is on the server and the server's changes are pulled.
    public var isSyncing: Bool

    /// Whether the server could not be reached (``Phase/offline``); local writes go on. Setting it sets the phase.
    public var isOffline: Bool {
        get { phase == .offline }
        set { phase = newValue ? .offline : phase == .offline ? .idle : phase }
    }

    /// Creates a status; `isOffline` wins over `isSyncing` for the phase (a request under way while offline is not
    /// known to reach).
    public init(pendingMutations: Int = 0, lastSyncedAt: Date? = nil, isOffline: Bool = false, isSyncing: Bool = false) {
        self.init(
            pendingMutations: pendingMutations, lastSyncedAt: lastSyncedAt, phase: isOffline ? .offline : isSyncing ? .syncing : .idle,
            isSyncing: isSyncing)
    }

    /// Creates a status in `phase`; `isSyncing` defaults to whether that phase is part of a round (syncing, or a
    /// retry scheduled at `retryAt`).
    public init(pendingMutations: Int = 0, lastSyncedAt: Date? = nil, phase: Phase, retryAt: Date? = nil, isSyncing: Bool? = nil) {
        self.pendingMutations = pendingMutations
        self.lastSyncedAt = lastSyncedAt
        self.phase = phase
        self.retryAt = retryAt
        self.isSyncing = isSyncing ?? (phase == .syncing || retryAt != nil)
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
