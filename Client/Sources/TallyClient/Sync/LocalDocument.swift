import Foundation
import TallyAPI

/// Where a synced document lives: its collection and its client-chosen id.
struct DocumentKey: Hashable, Sendable, CustomStringConvertible {
    /// The collection's name.
    var collection: String
    /// The document's id in it.
    var id: String

    /// `collection/id`.
    var description: String { "\(collection)/\(id)" }
}

/// A document as the app sees it on the device: the server's state with this device's unacknowledged writes on top.
struct LocalDocument: Hashable, Sendable {
    /// Its collection and id.
    var key: DocumentKey
    /// Its fields (a JSON object).
    var data: JSONValue
    /// The version of the server state underneath (0 when the server has no live document of this id):
    /// what a strict write passes as `ifVersion`.
    var version: Int64
    /// When the server state underneath last changed; `nil` when there is none.
    var updatedAt: Date?
    /// Whether local writes to it wait for the server.
    var pending: Bool
}

/// One local write: the operation of a ``SyncMutation`` before the outbox gives it an id.
struct LocalWrite: Hashable, Sendable {
    /// What it does.
    var op: SyncOperation
    /// The document it changes.
    var key: DocumentKey
    /// The new fields (`put`) or the merge patch (`patch`); `nil` for `delete`.
    var data: JSONValue?
    /// Apply on the server only while the document's version is this (0: only while it does not exist).
    var ifVersion: Int64?

    /// Creates or replaces the document with `data`.
    static func put(_ key: DocumentKey, _ data: JSONValue, ifVersion: Int64? = nil) -> LocalWrite {
        LocalWrite(op: .put, key: key, data: data, ifVersion: ifVersion)
    }

    /// Changes the fields `patch` names (RFC 7386), leaving the others; an absent document stays absent.
    static func patch(_ key: DocumentKey, _ patch: JSONValue, ifVersion: Int64? = nil) -> LocalWrite {
        LocalWrite(op: .patch, key: key, data: patch, ifVersion: ifVersion)
    }

    /// Deletes the document.
    static func delete(_ key: DocumentKey, ifVersion: Int64? = nil) -> LocalWrite {
        LocalWrite(op: .delete, key: key, data: nil, ifVersion: ifVersion)
    }
}

/// A pushed mutation the server refused for good; its local effect has been rolled back. The engine reports
/// these on the app's sync-event stream.
struct PushRefusal: Hashable, Sendable {
    /// Why the server refused it.
    enum Reason: Hashable, Sendable {
        /// Its `ifVersion` did not hold; `current` is the server's document (`nil`: none), now the local base.
        case conflict(current: Document?)
        /// Refused (`document_too_large`, `insufficient_tokens`, …).
        case rejected(ErrorDetail)
    }

    /// The refused mutation, as it was pushed.
    var mutation: SyncMutation
    /// Why.
    var reason: Reason

    /// The document it was for.
    var key: DocumentKey { DocumentKey(collection: mutation.collection, id: mutation.docId) }
}

/// What a committed transaction of a ``LocalDocumentStore`` changed, as its observers learn it.
enum LocalStoreChange: Hashable, Sendable {
    /// The visible state of these documents may have changed.
    case documents(Set<DocumentKey>)
    /// Another process wrote to the file: anything may have changed.
    case everything
}

/// The sync bookkeeping of a ``LocalDocumentStore``, for a "saved / syncing / offline" badge and the next pull.
struct LocalSyncState: Hashable, Sendable {
    /// Where the next pull starts; `nil`: from nothing (first sync, or after a `410 resync_required`).
    var cursor: String?
    /// When a push or a complete pull was last applied.
    var lastSyncAt: Date?
    /// How many mutations wait in the outbox.
    var pendingCount: Int
}

/// The visible state of one document: pure, so the store and its tests compute it the same way.
enum PendingFold {
    /// `current` after `op` with `data`: a put replaces, a patch merges into an existing document (an absent one
    /// stays absent), a delete removes.
    static func apply(_ op: SyncOperation, _ data: JSONValue?, to current: JSONValue?) -> JSONValue? {
        switch op {
        case .put: data
        case .patch: current.map { $0.merging(data ?? .object([:])) }
        case .delete: nil
        }
    }
}
