import Foundation
import TallyAPI
import TallyStore
import Testing

/// The collections the document conformance tests write to.
enum Collections {
    /// No range key, default limits.
    static let notes = CollectionSpec(name: "notes")
    /// Ordered by `date`.
    static let logs = CollectionSpec(name: "habit_logs", rangeKey: "date")
    /// At most 3 documents of at most 64 bytes.
    static let small = CollectionSpec(name: "small", maxDocumentBytes: 64, maxDocuments: 3)
    /// Creating a message uses one of 2 free messages a day, else costs 2 tokens.
    static let chat = CollectionSpec(
        name: "chat_messages", rangeKey: "sentAt", action: ActionSpec(name: "chat.message", quota: "messages", tokens: 2),
        quotaLimit: 2)
    /// Creating a reading uses one of 2 free readings a day, and there is no paying for more.
    static let readings = CollectionSpec(
        name: "readings", action: ActionSpec(name: "reading", quota: "readings"), quotaLimit: 2)
}

/// Parses JSON text the tests write by hand.
func json(_ text: String) throws -> JSONValue { try JSONValue.parse(text) }

/// The record a write of `text` (`nil`: a delete) at `version` leaves.
func record(_ collection: CollectionSpec, _ id: String, _ text: String?, version: Int64, at date: Date) throws -> DocumentRecord {
    let data = try text.map { try json($0) }
    return DocumentRecord(
        collection: collection.name, id: id, data: data?.bytes ?? [], rangeValue: collection.rangeKey.flatMap { data?[$0]?.stringValue },
        version: version, updatedAt: Date(millis: date.millis), deleted: data == nil)
}

/// The body a document write renders: derived from the outcome, so a replay that re-renders shows up.
struct DocumentBody: Codable, Equatable {
    var version: Int64
    var created: Bool
    var deleted: Bool
    var data: String
    var balance: Int64?

    static func render(_ outcome: DocumentWriteOutcome) throws -> StoredResponse {
        let body = DocumentBody(
            version: outcome.document.version, created: outcome.created, deleted: outcome.document.deleted,
            data: String(decoding: outcome.document.data, as: UTF8.self), balance: outcome.charged?.wallet.balance)
        return StoredResponse(status: outcome.created ? 201 : 200, body: Array(try JSONEncoder().encode(body)))
    }
}

/// Where a document lives: (collection, id).
struct DocumentKey: Hashable, Comparable, CustomStringConvertible {
    var collection: String
    var id: String

    init(_ collection: String, _ id: String) {
        self.collection = collection
        self.id = id
    }

    init(_ record: DocumentRecord) { self.init(record.collection, record.id) }

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.collection, lhs.id) < (rhs.collection, rhs.id) }
    var description: String { "\(collection)/\(id)" }
}

extension Fixture {
    /// A REST write; returns the outcome the store rendered, or throws its refusal.
    @discardableResult
    func write(
        _ userId: String, _ collection: CollectionSpec, _ id: String, _ operation: DocumentMutation.Operation,
        ifVersion: Int64? = nil, key: IdempotencyKey? = nil
    ) async throws -> DocumentWriteOutcome {
        let box = OutcomeBox<DocumentWriteOutcome>()
        let mutation = DocumentMutation(collection: collection, docId: id, operation: operation, ifVersion: ifVersion)
        let execution = try await store.writeDocument(mutation, userId: userId, idempotency: key, now: now) { outcome in
            box.set(outcome)
            return try DocumentBody.render(outcome)
        }
        guard case .executed = execution, let outcome = box.outcome else {
            throw HarnessError("[\(kind)] expected the write to run, got \(execution)")
        }
        return outcome
    }

    /// Creates or replaces a document with the JSON `text`.
    @discardableResult
    func put(_ userId: String, _ collection: CollectionSpec, _ id: String, _ text: String, ifVersion: Int64? = nil) async throws
        -> DocumentWriteOutcome
    {
        try await write(userId, collection, id, .put(try json(text)), ifVersion: ifVersion)
    }

    /// Merge-patches a document with the JSON `text`.
    @discardableResult
    func patch(_ userId: String, _ collection: CollectionSpec, _ id: String, _ text: String, ifVersion: Int64? = nil) async throws
        -> DocumentWriteOutcome
    {
        try await write(userId, collection, id, .patch(try json(text)), ifVersion: ifVersion)
    }

    /// Deletes a document.
    @discardableResult
    func delete(_ userId: String, _ collection: CollectionSpec, _ id: String, ifVersion: Int64? = nil) async throws
        -> DocumentWriteOutcome
    {
        try await write(userId, collection, id, .delete, ifVersion: ifVersion)
    }

    /// Every change after `after`, read in pages of `pageSize`, checking each page: within its limit, in strictly
    /// increasing versions above the previous cursor, each document at most once, and the cursor following the
    /// last change while more are waiting. Returns the changes and the final cursor.
    func allChanges(_ userId: String, after: Int64? = nil, pageSize: Int = 7, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> (changes: [DocumentRecord], cursor: Int64)
    {
        var changes: [DocumentRecord] = []
        var cursor = after
        for _ in 0..<10_000 {
            let page = try await store.changes(userId: userId, after: cursor, limit: pageSize)
            #expect(page.changes.count <= pageSize, "[\(kind)] a page exceeds its limit", sourceLocation: sourceLocation)
            var previous = cursor ?? 0
            for change in page.changes {
                #expect(change.version > previous, "[\(kind)] changes out of version order", sourceLocation: sourceLocation)
                previous = change.version
            }
            #expect(
                Set(page.changes.map(DocumentKey.init)).count == page.changes.count, "[\(kind)] a page has a document twice",
                sourceLocation: sourceLocation)
            if page.hasMore {
                #expect(page.changes.count == pageSize, "[\(kind)] a short page says more", sourceLocation: sourceLocation)
                #expect(page.cursor == page.changes.last?.version, "[\(kind)] the cursor is not the last change", sourceLocation: sourceLocation)
            }
            #expect(page.cursor >= previous, "[\(kind)] the cursor is behind a change", sourceLocation: sourceLocation)
            changes += page.changes
            cursor = page.cursor
            if !page.hasMore { return (changes, page.cursor) }
        }
        throw HarnessError("[\(kind)] the changes never end")
    }

    /// The user's current version: the cursor after the last page.
    func currentVersion(_ userId: String) async throws -> Int64 {
        try await allChanges(userId, pageSize: 1_000).cursor
    }

    /// Every live document of a collection, read in pages of `pageSize` through `after`.
    func allDocuments(_ userId: String, _ collection: String, descending: Bool = false, pageSize: Int = 5) async throws -> [DocumentRecord] {
        var documents: [DocumentRecord] = []
        var query = DocumentRangeQuery(collection: collection, descending: descending, limit: pageSize)
        for _ in 0..<10_000 {
            let page = try await store.documents(userId: userId, query: query)
            #expect(!page.hasMore || page.documents.count == pageSize, "[\(kind)] a short page says more")
            documents += page.documents
            guard page.hasMore, let last = page.documents.last else { return documents }
            query.after = (last.rangeValue, last.id)
        }
        throw HarnessError("[\(kind)] the pages never end")
    }
}

/// Applies pulled changes to a replica, as a client does: a tombstone removes the document.
func replay(_ changes: [DocumentRecord], into replica: inout [DocumentKey: DocumentRecord]) {
    for change in changes {
        replica[DocumentKey(change)] = change.deleted ? nil : change
    }
}

/// A push's mutation.
func mutation(
    _ id: Int64, _ collection: CollectionSpec, _ docId: String, _ operation: DocumentMutation.Operation, ifVersion: Int64? = nil
) -> ClientMutation {
    ClientMutation(id: id, mutation: DocumentMutation(collection: collection, docId: docId, operation: operation, ifVersion: ifVersion))
}

extension MutationResult {
    /// The version written, for an applied mutation.
    var appliedVersion: Int64? {
        if case .applied(let record) = self { return record.version }
        return nil
    }
}
