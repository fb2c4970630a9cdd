import Foundation

/// A collection the server declares (`GET /v1/collections`).
public struct CollectionInfo: Codable, Hashable, Sendable {
    /// The collection's name, in `/v1/collections/{name}/…`.
    public var name: String
    /// The top-level string field every document has and range queries order by, if any.
    public var rangeKey: String?
    /// The largest document, in bytes of canonical JSON `data`.
    public var maxDocumentBytes: Int
    /// The most live documents one user may have in it.
    public var maxDocuments: Int
    /// The metered action creating a document performs, if any.
    public var action: String?

    /// Creates a description.
    public init(name: String, rangeKey: String? = nil, maxDocumentBytes: Int, maxDocuments: Int, action: String? = nil) {
        self.name = name
        self.rangeKey = rangeKey
        self.maxDocumentBytes = maxDocumentBytes
        self.maxDocuments = maxDocuments
        self.action = action
    }
}

/// `GET /v1/collections`.
public struct CollectionList: Codable, Hashable, Sendable {
    /// The declared collections, in configuration order.
    public var items: [CollectionInfo]
    /// Creates a list.
    public init(items: [CollectionInfo]) { self.items = items }
}

/// A synced document: a JSON object owned by one user, addressed by collection and a client-chosen id.
public struct Document: Codable, Hashable, Sendable {
    /// The client-chosen id (`[A-Za-z0-9_-]{1,128}`).
    public var id: String
    /// The collection it belongs to.
    public var collection: String
    /// The document's fields; an empty object on a tombstone.
    public var data: JSONValue
    /// The user's change sequence number at the document's last change.
    public var version: Int64
    /// When it last changed.
    public var updatedAt: Date
    /// Whether this is a tombstone (the document was deleted).
    public var deleted: Bool

    /// Creates a document.
    public init(id: String, collection: String, data: JSONValue, version: Int64, updatedAt: Date, deleted: Bool = false) {
        self.id = id
        self.collection = collection
        self.data = data
        self.version = version
        self.updatedAt = updatedAt
        self.deleted = deleted
    }
}

/// `GET /v1/collections/{c}/docs`: one page of a range query.
public struct DocumentPage: Codable, Hashable, Sendable {
    /// The documents, ordered by (rangeKey, id).
    public var items: [Document]
    /// Pass as `cursor` for the next page; `nil` on the last one.
    public var nextCursor: String?
    /// Creates a page.
    public init(items: [Document], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// `PUT /v1/collections/{c}/docs/{id}`.
public struct PutDocumentRequest: Codable, Hashable, Sendable {
    /// The document's fields (a JSON object).
    public var data: JSONValue
    /// Creates a request.
    public init(data: JSONValue) { self.data = data }
}

/// What a sync mutation does.
public enum SyncOperation: String, Codable, Hashable, Sendable {
    /// Create or replace `data`.
    case put
    /// Merge-patch `data` (RFC 7386) into an existing document.
    case patch
    /// Delete, leaving a tombstone.
    case delete
}

/// One change in a `POST /v1/sync/push`.
public struct SyncMutation: Codable, Hashable, Sendable {
    /// The client's mutation id: increasing per `clientId`; ids at or below the server's `lastMutationId` are skipped.
    public var id: Int64
    /// What to do.
    public var op: SyncOperation
    /// The collection.
    public var collection: String
    /// The document's id.
    public var docId: String
    /// The new data (`put`) or the merge patch (`patch`).
    public var data: JSONValue?
    /// Apply only if the document's version is this (0: only if it does not exist).
    public var ifVersion: Int64?

    /// Creates a mutation.
    public init(id: Int64, op: SyncOperation, collection: String, docId: String, data: JSONValue? = nil, ifVersion: Int64? = nil) {
        self.id = id
        self.op = op
        self.collection = collection
        self.docId = docId
        self.data = data
        self.ifVersion = ifVersion
    }
}

/// `POST /v1/sync/push`.
public struct SyncPushRequest: Codable, Hashable, Sendable {
    /// The installation's random id (16–128 characters), kept with its outbox.
    public var clientId: String
    /// At most 100 mutations, in order.
    public var mutations: [SyncMutation]
    /// Creates a push.
    public init(clientId: String, mutations: [SyncMutation]) {
        self.clientId = clientId
        self.mutations = mutations
    }

    /// The request's JSON, each mutation's `data` exactly as it is (object keys apart code point by code point,
    /// numbers as written): a `JSONEncoder` would merge keys that are canonically equivalent and round numbers
    /// through `Double`.
    public var exactBody: [UInt8] {
        let mutations = mutations.map { mutation -> JSONValue in
            var fields: [JSONKey: JSONValue] = [
                "id": .int(mutation.id), "op": .string(mutation.op.rawValue), "collection": .string(mutation.collection),
                "docId": .string(mutation.docId),
            ]
            fields["data"] = mutation.data
            fields["ifVersion"] = mutation.ifVersion.map { .int($0) }
            return .object(fields)
        }
        return JSONValue.object(["clientId": .string(clientId), "mutations": .array(mutations)]).bytes
    }
}

extension JSONValue {
    /// The `data` of the documents of an answer parsed exactly (``parse(_:)``), to put in place of what a
    /// `JSONDecoder` decoded (it merges object keys that are canonically equivalent and rounds numbers through
    /// `Double`): for each element of the array `self`, the `data` of the element, or of its field `document`
    /// when given (a push result's `current`); nil where there is none, or when `self` is not an array of `count`.
    public func documentsData(count: Int, in document: String? = nil) -> [JSONValue?] {
        guard case .array(let items) = self, items.count == count else { return Array(repeating: nil, count: count) }
        return items.map { item in (document.map { item[$0] } ?? item)?["data"] }
    }
}

/// How the server took one pushed mutation.
public enum SyncMutationStatus: String, Codable, Hashable, Sendable {
    /// Applied now; `version` is the document's new version.
    case applied
    /// `ifVersion` did not match; `current` is the document as it is (or `nil`). Final.
    case conflict
    /// Refused (`error` says why: too large, collection full, 402, …). Final.
    case rejected
    /// At or below the client's `lastMutationId`: applied (or refused) by an earlier push.
    case duplicate
}

/// The result of one pushed mutation.
public struct SyncMutationResult: Codable, Hashable, Sendable {
    /// The mutation's id.
    public var id: Int64
    /// How it was taken.
    public var status: SyncMutationStatus
    /// The document's version after it, when `applied`.
    public var version: Int64?
    /// The document as it is, when `conflict` (`nil` if it does not exist).
    public var current: Document?
    /// Why, when `rejected`.
    public var error: ErrorDetail?

    /// Creates a result.
    public init(id: Int64, status: SyncMutationStatus, version: Int64? = nil, current: Document? = nil, error: ErrorDetail? = nil) {
        self.id = id
        self.status = status
        self.version = version
        self.current = current
        self.error = error
    }
}

/// The answer to `POST /v1/sync/push`.
public struct SyncPushResponse: Codable, Hashable, Sendable {
    /// The highest mutation id of this client the server has taken.
    public var lastMutationId: Int64
    /// One result per pushed mutation, in order.
    public var results: [SyncMutationResult]
    /// Creates a response.
    public init(lastMutationId: Int64, results: [SyncMutationResult]) {
        self.lastMutationId = lastMutationId
        self.results = results
    }
}

/// `GET /v1/sync/pull`.
public struct SyncPullResponse: Codable, Hashable, Sendable {
    /// Every change after the cursor, in version order, each document once at its latest state (tombstones
    /// included, except on a pull without a cursor).
    public var changes: [Document]
    /// Pass as `cursor` next time.
    public var cursor: String
    /// Whether more changes are waiting: pull again at once.
    public var hasMore: Bool
    /// The `lastMutationId` of each of the user's clients.
    public var lastMutationIds: [String: Int64]

    /// Creates a response.
    public init(changes: [Document], cursor: String, hasMore: Bool, lastMutationIds: [String: Int64]) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.lastMutationIds = lastMutationIds
    }
}

/// The data of an `event: changed` on `GET /v1/sync/events`: the user's documents changed up to `cursor`.
public struct SyncChangedEvent: Codable, Hashable, Sendable {
    /// A cursor that includes the change; pull from your own cursor to get it.
    public var cursor: String
    /// Creates the event.
    public init(cursor: String) { self.cursor = cursor }
}

/// The data of an `event: wallet` on `GET /v1/sync/events`: the wallet, quotas or premium changed.
public struct SyncWalletEvent: Codable, Hashable, Sendable {
    /// The wallet now.
    public var wallet: Wallet
    /// The quotas now.
    public var quotas: [Quota]
    /// When the user's premium ends, as `GET /v1/me` would say it now; nil when the user has none (never had it, or
    /// it was revoked) — or when the event does not say (``reportsPremium``).
    public var premiumUntil: Date?
    /// Whether the event says the user's premium: `premiumUntil` is on the wire, `null` for none. A server that
    /// predates the field leaves it out, and its nil ``premiumUntil`` must not be read as "no premium".
    public var reportsPremium: Bool

    /// Creates the event, saying the user's premium (`premiumUntil`, nil: none).
    public init(wallet: Wallet, quotas: [Quota], premiumUntil: Date? = nil) {
        self.wallet = wallet
        self.quotas = quotas
        self.premiumUntil = premiumUntil
        reportsPremium = true
    }

    private enum CodingKeys: String, CodingKey {
        case wallet, quotas, premiumUntil
    }

    /// Decodes the event; `premiumUntil` may be absent (an older server), `null` (no premium) or a date.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        wallet = try container.decode(Wallet.self, forKey: .wallet)
        quotas = try container.decode([Quota].self, forKey: .quotas)
        reportsPremium = container.contains(.premiumUntil)
        premiumUntil = try container.decodeIfPresent(Date.self, forKey: .premiumUntil)
    }

    /// Encodes the event; `premiumUntil` as `null` when the event says there is none, left out when it does not say.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(wallet, forKey: .wallet)
        try container.encode(quotas, forKey: .quotas)
        if reportsPremium {
            if let premiumUntil { try container.encode(premiumUntil, forKey: .premiumUntil) } else { try container.encodeNil(forKey: .premiumUntil) }
        }
    }
}

extension ErrorCode {
    /// No collection of that name is declared.
    public static let unknownCollection = ErrorCode(rawValue: "unknown_collection")
    /// The document's `data` is not an object, or lacks the collection's range key as a string.
    public static let invalidDocument = ErrorCode(rawValue: "invalid_document")
    /// The document is larger than the collection's `maxDocumentBytes`.
    public static let documentTooLarge = ErrorCode(rawValue: "document_too_large")
    /// The user has the collection's `maxDocuments` live documents.
    public static let collectionFull = ErrorCode(rawValue: "collection_full")
    /// The user's synced storage is full: the server's per-user budget of documents (tombstones included), bytes
    /// or sync client ids. Deleting documents frees bytes; tombstones and idle client ids go after the server's
    /// tombstone retention.
    public static let storageFull = ErrorCode(rawValue: "storage_full")
    /// `If-Match`, `If-None-Match: *` or `ifVersion` did not hold; the error carries `current`.
    public static let versionConflict = ErrorCode(rawValue: "version_conflict")
    /// The cursor is older than the server's tombstone retention: pull again without one.
    public static let resyncRequired = ErrorCode(rawValue: "resync_required")
    /// The `clientId` belongs to another user.
    public static let clientIdInUse = ErrorCode(rawValue: "client_id_in_use")
}
