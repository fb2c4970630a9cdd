import Foundation
import HTTPTypes
import Hummingbird
import Synchronization
import TallyAPI
import TallyStore

/// `/v1/collections`: the declared collections, and each user's documents in them over plain REST
/// (put, merge-patch, delete, get with ETags, range queries).
struct CollectionsController {
    let store: any TallyStorage
    let clock: any TallyClock
    /// Runs writes under their idempotency keys.
    let runner: CommandRunner
    /// Told of the documents and wallets a write changed.
    let notifier: any ChangeNotifier
    /// The declared collections, each user's budget, and the keys that seal range cursors.
    let sync: SyncSetup

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.get("collections", use: list)
        group.get("collections/:collection/docs", use: query)
        group.get("collections/:collection/docs/:docId", use: get)
        group.put("collections/:collection/docs/:docId", use: put)
        group.patch("collections/:collection/docs/:docId", use: patch)
        group.delete("collections/:collection/docs/:docId", use: delete)
    }

    /// The media type of a JSON Merge Patch (RFC 7386), the only body `PATCH` takes.
    static let mergePatchType = "application/merge-patch+json"

    @Sendable func list(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let items = sync.collections.all.map {
            CollectionInfo(
                name: $0.name, rangeKey: $0.rangeKey, maxDocumentBytes: $0.maxDocumentBytes, maxDocuments: $0.maxDocuments,
                action: $0.action?.name)
        }
        return JSONResponse.make(body: CollectionList(items: items))
    }

    @Sendable func get(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let (collection, docId) = try address(context)
        let stored = try await store.document(userId: context.identity.userId, collection: collection.name, id: docId)
        guard let record = stored, !record.deleted else { throw APIError(.notFound, "No such document.") }
        let etag = "\"\(record.version)\""
        let headers: HTTPFields = [.eTag: etag, .cacheControl: "private, no-cache"]
        if let match = request.headers[.ifNoneMatch], WalletController.matches(match, etag: etag) {
            return Response(status: .notModified, headers: headers)
        }
        var json = JSONWriter(capacity: record.data.count + 160)
        json.document(record)
        return JSONResponse.make(status: .ok, bytes: json.bytes, headers: headers)
    }

    @Sendable func put(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let (collection, docId) = try address(context)
        let ifVersion = try SyncInput.precondition(request)
        let body = try await RequestBody.json(request, upTo: SyncInput.bodyLimit(for: collection))
        guard case .object(let fields) = body else { throw APIError(.invalidJSON, "The body must be an object {\"data\": {…}}.") }
        guard let data = fields["data"] else { throw APIError(.invalidJSON, "Missing field 'data'.") }
        let mutation = DocumentMutation(collection: collection, docId: docId, operation: .put(data), ifVersion: ifVersion)
        return try await write(mutation, request: request, context: context, canonicalBody: data.text)
    }

    @Sendable func patch(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let (collection, docId) = try address(context)
        let mediaType = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard mediaType == Self.mergePatchType else {
            throw APIError(.unsupportedMediaType, "PATCH takes a JSON Merge Patch: send Content-Type: \(Self.mergePatchType).")
        }
        let ifVersion = try SyncInput.precondition(request)
        let patch = try await RequestBody.json(request, upTo: SyncInput.bodyLimit(for: collection))
        guard case .object = patch else {
            throw APIError(.invalidDocument, "A merge patch of a document's data must be a JSON object.")
        }
        let mutation = DocumentMutation(collection: collection, docId: docId, operation: .patch(patch), ifVersion: ifVersion)
        return try await write(mutation, request: request, context: context, canonicalBody: patch.text)
    }

    @Sendable func delete(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let (collection, docId) = try address(context)
        let ifVersion = try SyncInput.precondition(request)
        let mutation = DocumentMutation(collection: collection, docId: docId, operation: .delete, ifVersion: ifVersion)
        return try await write(mutation, request: request, context: context, canonicalBody: "")
    }

    @Sendable func query(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let collection = try sync.collections.named(context.parameters.get("collection") ?? "")
        let parameters = request.uri.queryParameters
        let limit = try WalletController.limit(parameters["limit"].map(String.init))
        let descending: Bool
        switch parameters["order"].map(String.init) ?? "asc" {
        case "asc": descending = false
        case "desc": descending = true
        default: throw APIError(.invalidQuery, "'order' must be asc or desc.")
        }
        let from = parameters["from"].map(String.init)
        let to = parameters["to"].map(String.init)
        if collection.rangeKey == nil, from != nil || to != nil {
            throw APIError(.invalidQuery, "'from' and 'to' bound the range key, and '\(collection.name)' has none.")
        }
        if [from, to].contains(where: { $0?.utf8.contains(0) == true }) {
            throw APIError(.invalidQuery, "'from' and 'to' must not contain the NUL character.")
        }
        let userId = context.identity.userId
        let after = try parameters["cursor"].map {
            try RangeCursor.decode(
                String($0), collection: collection.name, rangeKeyed: collection.rangeKey != nil, userId: userId, keys: sync.cursors)
        }
        let fields = try parameters["fields"].map { try Self.fields(String($0)) }
        let query = DocumentRangeQuery(collection: collection.name, from: from, to: to, descending: descending, after: after, limit: limit)
        let page = try await store.documents(userId: userId, query: query)
        let next = try page.hasMore ? page.documents.last.map { try RangeCursor.encode(after: $0, userId: userId, keys: sync.cursors) } : nil
        let body = DocumentPageBody(records: page.documents[...], nextCursor: next, fields: fields)
        var json = JSONWriter(capacity: page.documents.reduce(64) { $0 + $1.data.count + 160 })
        body.write(to: &json)
        return JSONResponse.make(status: .ok, bytes: json.bytes)
    }

    /// `fields=a,b`: the top-level fields of `data` to return (at most 100 names, each matched code point by code point).
    static func fields(_ list: String) throws -> Set<JSONKey> {
        let names = list.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard (1...100).contains(names.count), names.allSatisfy({ !$0.isEmpty }) else {
            throw APIError(.invalidQuery, "'fields' must be 1 to 100 comma-separated top-level field names, none empty.")
        }
        return Set(names.map { JSONKey($0) })
    }

    /// The collection and document id a route's path names: 404 `unknown_collection`, 400 `invalid_field` for a bad id.
    private func address(_ context: AuthenticatedContext) throws -> (CollectionSpec, String) {
        let collection = try sync.collections.named(context.parameters.get("collection") ?? "")
        return (collection, try SyncInput.documentId(context.parameters.get("docId") ?? ""))
    }

    /// One write through the store, under the request's `Idempotency-Key` (its fingerprint covers the
    /// precondition headers too); announces what it changed once committed.
    private func write(
        _ mutation: DocumentMutation, request: Request, context: AuthenticatedContext, canonicalBody: String
    ) async throws -> Response {
        let userId = context.identity.userId
        let preconditions = "\(request.headers[.ifMatch] ?? "")\n\(request.headers[.ifNoneMatch] ?? "")"
        let written = WrittenOutcome()
        let isDelete = mutation.operation == .delete
        let execution = try await runner.withIdempotency(
            request: request, scope: userId,
            requestFingerprint: CommandRunner.fingerprint(request, canonicalBody: preconditions + "\n" + canonicalBody)
        ) { key in
            try await store.writeDocument(
                mutation, userId: userId, budget: sync.budget, idempotency: key, now: clock.now
            ) { outcome in
                written.value.withLock { $0 = outcome }
                guard !isDelete else { return StoredResponse(status: 204, body: []) }
                var json = JSONWriter(capacity: outcome.document.data.count + 160)
                json.document(outcome.document)
                return StoredResponse(status: outcome.created ? 201 : 200, body: json.bytes)
            }
        }
        if case .executed = execution, let outcome = written.value.withLock({ $0 }) {
            notifier.documentsChanged(userId: userId, version: outcome.document.version)
            if outcome.charged != nil { notifier.walletChanged(userId: userId) }
        }
        return CommandRunner.response(execution)
    }
}

/// What the store last rendered for a write (the one that committed), read once the call returns.
private final class WrittenOutcome: Sendable {
    let value = Mutex<DocumentWriteOutcome?>(nil)
}
