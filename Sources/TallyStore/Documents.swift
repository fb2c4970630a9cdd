import Foundation
import TallyAPI

/// A declared collection (`collections:` in `TALLY_CONFIG`), with its metered action resolved.
public struct CollectionSpec: Sendable, Hashable {
    /// The name (`[a-z][a-z0-9_.-]{0,63}`).
    public var name: String
    /// The top-level string field every document must have; range queries order by it.
    public var rangeKey: String?
    /// The largest canonical `data`, in bytes.
    public var maxDocumentBytes: Int
    /// The most live documents per user.
    public var maxDocuments: Int
    /// The action creating a document performs (in the same transaction), if any.
    public var action: ActionSpec?
    /// The daily limit of the action's quota, if it has one.
    public var quotaLimit: Int?

    /// The default `maxDocumentBytes`.
    public static let defaultMaxDocumentBytes = 16_384
    /// The largest `maxDocumentBytes` a configuration may set.
    public static let maxDocumentBytesLimit = 262_144
    /// The default `maxDocuments`.
    public static let defaultMaxDocuments = 10_000
    /// The longest range value, in UTF-8 bytes: range values are indexed, and a PostgreSQL b-tree entry holds
    /// at most about 2.7 kB (a longer one fails the insert).
    public static let maxRangeValueBytes = 1024

    /// Creates a collection.
    public init(
        name: String, rangeKey: String? = nil, maxDocumentBytes: Int = Self.defaultMaxDocumentBytes,
        maxDocuments: Int = Self.defaultMaxDocuments, action: ActionSpec? = nil, quotaLimit: Int? = nil
    ) {
        self.name = name
        self.rangeKey = rangeKey
        self.maxDocumentBytes = maxDocumentBytes
        self.maxDocuments = maxDocuments
        self.action = action
        self.quotaLimit = quotaLimit
    }

    /// Whether `name` is a valid collection name.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), (0x61...0x7A).contains(bytes[0]) else { return false }
        return bytes.allSatisfy { byte in
            (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x5F || byte == 0x2E || byte == 0x2D
        }
    }

    /// Whether `id` is a valid document id: `[A-Za-z0-9_-]{1,128}`.
    public static func isValidDocumentId(_ id: String) -> Bool {
        guard (1...128).contains(id.utf8.count) else { return false }
        return id.utf8.allSatisfy { byte in
            (0x61...0x7A).contains(byte) || (0x41...0x5A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x5F
                || byte == 0x2D
        }
    }
}

/// A document as stored: the latest state of one (user, collection, id), a tombstone after a delete.
public struct DocumentRecord: Sendable, Hashable {
    /// The collection.
    public var collection: String
    /// The client-chosen id.
    public var id: String
    /// The canonical JSON of `data` (an object); empty on a tombstone.
    public var data: [UInt8]
    /// The value of the collection's range key, if it has one (`nil` on a tombstone).
    public var rangeValue: String?
    /// The user's change sequence number at this change.
    public var version: Int64
    /// When it changed.
    public var updatedAt: Date
    /// Whether it is a tombstone.
    public var deleted: Bool

    /// Creates a record.
    public init(collection: String, id: String, data: [UInt8], rangeValue: String?, version: Int64, updatedAt: Date, deleted: Bool) {
        self.collection = collection
        self.id = id
        self.data = data
        self.rangeValue = rangeValue
        self.version = version
        self.updatedAt = updatedAt
        self.deleted = deleted
    }

    /// The version a precondition compares with: 0 for a tombstone (it does not exist).
    public var liveVersion: Int64 { deleted ? 0 : version }
}

/// One change a user asks for: a REST write or one mutation of a push.
public struct DocumentMutation: Sendable, Hashable {
    /// What it does.
    public enum Operation: Sendable, Hashable {
        /// Create or replace with this object.
        case put(JSONValue)
        /// Merge-patch (RFC 7386) this object into the existing document.
        case patch(JSONValue)
        /// Delete, leaving a tombstone.
        case delete
    }

    /// The collection, as declared.
    public var collection: CollectionSpec
    /// The document id (valid: ``CollectionSpec/isValidDocumentId(_:)``).
    public var docId: String
    /// What to do.
    public var operation: Operation
    /// Apply only when the document's ``DocumentRecord/liveVersion`` is this (0: only when it does not exist).
    public var ifVersion: Int64?

    /// Creates a mutation.
    public init(collection: CollectionSpec, docId: String, operation: Operation, ifVersion: Int64? = nil) {
        self.collection = collection
        self.docId = docId
        self.operation = operation
        self.ifVersion = ifVersion
    }
}

/// What ``DocumentPlanner`` decides for one mutation.
public enum DocumentPlan: Sendable, Hashable {
    /// Write the document: `data` (canonical, empty for a tombstone) and its range value. `creates`: a live
    /// document appears where there was none (it counts against `maxDocuments` and performs the collection's
    /// action); `removes`: a live document becomes a tombstone.
    case write(data: [UInt8], rangeValue: String?, deleted: Bool, creates: Bool, removes: Bool)
    /// The precondition failed: the document as it is (`nil`: absent or deleted).
    case conflict(current: DocumentRecord?)
    /// Refused: `.documentNotFound`, `.documentTooLarge`, `.collectionFull`, `.storageFull` or `.invalidDocument`.
    case refused(StoreError.Code)
}

/// The rules of document writes, written once for every store: preconditions, merge patches, size,
/// range key and collection limits.
public enum DocumentPlanner {
    /// The plan for `mutation` on `existing` (its stored record, tombstone included; `nil` if never written)
    /// when the user has `liveCount` live documents in the collection. With `usage` (what the user's documents
    /// take, as this transaction left them), a write that would take them past `budget` is refused
    /// `.storageFull`; without it (models of the other rules) no budget applies.
    public static func plan(
        _ mutation: DocumentMutation, existing: DocumentRecord?, liveCount: Int, usage: SyncUsage? = nil,
        budget: SyncBudget = SyncBudget()
    ) -> DocumentPlan {
        let collection = mutation.collection
        // What is wrong whatever the document's state is refused before the precondition is looked at: a
        // client told "conflict" would retry the same bad data.
        var checkedPut: Checked?
        switch mutation.operation {
        case .put(let data):
            switch check(data, in: collection) {
            case .success(let checked): checkedPut = checked
            case .failure(let refusal): return .refused(refusal.code)
            }
        case .patch(let patch):
            guard case .object = patch else { return .refused(.invalidDocument) }
        case .delete:
            break
        }
        let live = existing.flatMap { $0.deleted ? nil : $0 }
        if let ifVersion = mutation.ifVersion, ifVersion != (live?.version ?? 0) {
            return .conflict(current: live)
        }
        let checked: Checked
        switch mutation.operation {
        case .delete:
            guard live != nil else { return .refused(.documentNotFound) }
            return .write(data: [], rangeValue: nil, deleted: true, creates: false, removes: true)
        case .put:
            checked = checkedPut!
        case .patch(let patch):
            guard let live else { return .refused(.documentNotFound) }
            guard let current = try? JSONValue.parse(live.data) else { return .refused(.invalidDocument) }
            switch check(current.merging(patch), in: collection) {
            case .success(let merged): checked = merged
            case .failure(let refusal): return .refused(refusal.code)
            }
        }
        let creates = live == nil
        if creates, liveCount >= collection.maxDocuments { return .refused(.collectionFull) }
        if let usage, !usage.admits(usage.writing(checked.bytes, over: existing), within: budget) { return .refused(.storageFull) }
        return .write(data: checked.bytes, rangeValue: checked.rangeValue, deleted: false, creates: creates, removes: false)
    }

    /// A document's data as it will be stored: canonical bytes and range value.
    private struct Checked {
        var bytes: [UInt8]
        var rangeValue: String?
    }

    private struct Refusal: Error {
        var code: StoreError.Code
    }

    /// The data's shape against the collection: an object, with its range key, within the size limit.
    private static func check(_ data: JSONValue, in collection: CollectionSpec) -> Result<Checked, Refusal> {
        guard case .object(let fields) = data else { return .failure(Refusal(code: .invalidDocument)) }
        var rangeValue: String?
        if let rangeKey = collection.rangeKey {
            // Without NUL, which PostgreSQL text cannot hold.
            guard let value = fields[rangeKey]?.stringValue, value.utf8.count <= CollectionSpec.maxRangeValueBytes,
                !value.utf8.contains(0)
            else { return .failure(Refusal(code: .invalidDocument)) }
            rangeValue = value
        }
        let bytes = data.bytes
        guard bytes.count <= collection.maxDocumentBytes else { return .failure(Refusal(code: .documentTooLarge)) }
        return .success(Checked(bytes: bytes, rangeValue: rangeValue))
    }
}

/// A push's mutation: the client's id for it, and the change.
public struct ClientMutation: Sendable, Hashable {
    /// The client's mutation id.
    public var id: Int64
    /// The change.
    public var mutation: DocumentMutation

    /// Creates one.
    public init(id: Int64, mutation: DocumentMutation) {
        self.id = id
        self.mutation = mutation
    }
}

/// How a store took one pushed mutation.
public enum MutationResult: Sendable, Hashable {
    /// Applied: the document as written (tombstone for a delete).
    case applied(DocumentRecord)
    /// The precondition failed: the document as it is (`nil`: absent or deleted).
    case conflict(current: DocumentRecord?)
    /// Refused: the code, and the account state for `.insufficientTokens` / `.quotaExhausted`.
    case rejected(StoreError.Code, state: AccountState?)
    /// At or below the client's last mutation id: skipped.
    case duplicate
}

/// The answer to a push.
public struct PushOutcome: Sendable, Hashable {
    /// The client's last mutation id after the push.
    public var lastMutationId: Int64
    /// One result per mutation, in order.
    public var results: [MutationResult]
    /// The account after the push, when an applied mutation charged it (a metered collection).
    public var charged: AccountState?

    /// Creates an outcome.
    public init(lastMutationId: Int64, results: [MutationResult], charged: AccountState?) {
        self.lastMutationId = lastMutationId
        self.results = results
        self.charged = charged
    }
}

/// What a REST write did, for its response.
public struct DocumentWriteOutcome: Sendable, Hashable {
    /// The document as written (a tombstone after a delete).
    public var document: DocumentRecord
    /// Whether a live document appeared (201).
    public var created: Bool
    /// The account after the write, when it charged the collection's action.
    public var charged: AccountState?

    /// Creates an outcome.
    public init(document: DocumentRecord, created: Bool, charged: AccountState?) {
        self.document = document
        self.created = created
        self.charged = charged
    }
}

/// A page of live documents of one collection, ordered by (range value, id), or by id without a range key.
public struct DocumentRangeQuery: Sendable, Hashable {
    /// The collection.
    public var collection: String
    /// Inclusive lower bound on the range value.
    public var from: String?
    /// Exclusive upper bound on the range value.
    public var to: String?
    /// Newest first.
    public var descending: Bool
    /// Documents after this position (exclusive, in the query's order): a range value (`nil` without a range
    /// key) and an id.
    public var after: (rangeValue: String?, id: String)?
    /// At most this many.
    public var limit: Int
    /// At most this many bytes of `data` in a page of two or more (``PageBound``).
    public var maxBytes: Int

    /// Creates a query.
    public init(collection: String, from: String? = nil, to: String? = nil, descending: Bool = false,
        after: (rangeValue: String?, id: String)? = nil, limit: Int, maxBytes: Int = PageBound.defaultMaxBytes)
    {
        self.collection = collection
        self.from = from
        self.to = to
        self.descending = descending
        self.after = after
        self.limit = limit
        self.maxBytes = maxBytes
    }

    /// The bound of its page.
    public var bound: PageBound { PageBound(limit: limit, maxBytes: maxBytes) }

    /// Equal when every field is.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.collection == rhs.collection && lhs.from == rhs.from && lhs.to == rhs.to && lhs.descending == rhs.descending
            && lhs.after?.rangeValue == rhs.after?.rangeValue && lhs.after?.id == rhs.after?.id && lhs.limit == rhs.limit
            && lhs.maxBytes == rhs.maxBytes
    }

    /// Hashes every field.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(collection)
        hasher.combine(from)
        hasher.combine(to)
        hasher.combine(descending)
        hasher.combine(after?.rangeValue)
        hasher.combine(after?.id)
        hasher.combine(limit)
        hasher.combine(maxBytes)
    }
}

/// A page of a range query: live documents in the query's order, within its ``PageBound``.
public struct RangePage: Sendable, Hashable {
    /// The documents.
    public var documents: [DocumentRecord]
    /// Whether more documents follow the last one.
    public var hasMore: Bool

    /// Creates a page.
    public init(documents: [DocumentRecord], hasMore: Bool) {
        self.documents = documents
        self.hasMore = hasMore
    }
}

/// A page of a pull.
public struct ChangePage: Sendable, Hashable {
    /// Documents changed after the cursor, in version order (live ones only on a pull without a cursor).
    public var changes: [DocumentRecord]
    /// The version the client has everything up to after applying `changes`.
    public var cursor: Int64
    /// Whether more changes are waiting.
    public var hasMore: Bool
    /// The last mutation id of each of the user's clients.
    public var lastMutationIds: [String: Int64]

    /// Creates a page.
    public init(changes: [DocumentRecord], cursor: Int64, hasMore: Bool, lastMutationIds: [String: Int64]) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.lastMutationIds = lastMutationIds
    }
}

/// Each user's synced documents: one change counter per user, tombstones, and the clients' last mutation ids.
///
/// Invariants (each store keeps them in its schema and in one transaction per call): a user's versions are
/// unique and strictly increasing across all their collections; a document row holds its latest state; a
/// client id belongs to one user; a mutation id at or below its client's last one is never applied again;
/// creating a document in a metered collection writes the document and the action's ledger effect together
/// or neither.
public protocol DocumentStore: Sendable {
    /// One write of the REST API in one transaction: replays the response stored under `idempotency` (as
    /// ``LedgerStore/execute(_:idempotency:now:render:)`` does), else plans it (``DocumentPlanner``), performs
    /// the collection's action when it creates a document, writes the document at the user's next version
    /// and stores `render`'s response under the key. Throws a ``StoreError`` with nothing written:
    /// `.versionConflict` (with ``StoreError/current``), `.documentNotFound`, `.documentTooLarge`,
    /// `.collectionFull`, `.storageFull` (past `budget`), `.invalidDocument`, `.insufficientTokens` /
    /// `.quotaExhausted` (with the state), `.userNotFound`.
    func writeDocument(
        _ mutation: DocumentMutation, userId: String, budget: SyncBudget, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (DocumentWriteOutcome) throws -> StoredResponse
    ) async throws -> Execution

    /// Applies a push in one transaction: each mutation whose id is above the client's last mutation id, in
    /// order, as ``writeDocument(_:userId:idempotency:now:render:)`` would (a conflict or a refusal is its
    /// result, writes nothing, and still counts as taken); then records the client's new last mutation id.
    /// The first push of a `clientId` gives it to `userId`; another user's push with it throws `.clientIdInUse`,
    /// and one that would take the user past `budget.clientIds` throws `.storageFull` (nothing applied). A
    /// mutation that would take the user's documents past `budget` is rejected `.storageFull`.
    func push(userId: String, clientId: String, mutations: [ClientMutation], budget: SyncBudget, now: Date) async throws
        -> PushOutcome

    /// The stored record of a document (a tombstone included), or `nil`.
    func document(userId: String, collection: String, id: String) async throws -> DocumentRecord?

    /// Live documents of a collection in the query's order, a page within ``DocumentRangeQuery/bound``.
    func documents(userId: String, query: DocumentRangeQuery) async throws -> RangePage

    /// The documents changed after version `after`, in version order, read in one snapshot, a page within
    /// `PageBound(limit: limit, maxBytes: maxBytes)`; with `after == nil`, the live documents only (the whole
    /// state, for a new device). When the last page is reached, `cursor` is the user's current version. Throws
    /// `.resyncRequired` when `after` is below the newest tombstone purged for the user, or above the user's
    /// current version.
    func changes(userId: String, after: Int64?, limit: Int, maxBytes: Int) async throws -> ChangePage

    /// Deletes up to `limit` tombstones older than `before`, remembering per user the newest version
    /// purged (so older cursors get `.resyncRequired`). Returns how many it deleted.
    func purgeTombstones(before: Date, limit: Int) async throws -> Int

    /// Forgets up to `limit` sync clients none of whose mutations was taken since `before` (their last mutation
    /// ids; a push with such a client id later starts it again from 0). Returns how many it forgot.
    func purgeClients(before: Date, limit: Int) async throws -> Int
}

extension DocumentStore {
    /// A REST write within the default ``SyncBudget``.
    public func writeDocument(
        _ mutation: DocumentMutation, userId: String, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (DocumentWriteOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        try await writeDocument(mutation, userId: userId, budget: SyncBudget(), idempotency: idempotency, now: now, render: render)
    }

    /// A push within the default ``SyncBudget``.
    public func push(userId: String, clientId: String, mutations: [ClientMutation], now: Date) async throws -> PushOutcome {
        try await push(userId: userId, clientId: clientId, mutations: mutations, budget: SyncBudget(), now: now)
    }

    /// A page of changes of at most ``PageBound/defaultMaxBytes``.
    public func changes(userId: String, after: Int64?, limit: Int) async throws -> ChangePage {
        try await changes(userId: userId, after: after, limit: limit, maxBytes: PageBound.defaultMaxBytes)
    }
}
