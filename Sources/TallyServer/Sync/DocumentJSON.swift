import Foundation
import TallyAPI
import TallyStore

/// The JSON of documents and of the sync replies, written by hand: a document's `data` is spliced from the
/// canonical bytes the store keeps, never parsed again (a pull of 10,000 documents is mostly copying).
/// Keys are sorted, as in every other reply.
extension JSONWriter {
    /// `{"collection","data","deleted","id","updatedAt","version"}` of a stored document; `data` is
    /// `projected` when given, `{}` on a tombstone.
    mutating func document(_ record: DocumentRecord, projected: [UInt8]? = nil) {
        documentFields(
            collection: record.collection, id: record.id, deleted: record.deleted, updatedAt: record.updatedAt,
            version: record.version
        ) { json in
            let data = projected ?? record.data
            if data.isEmpty { json.raw("{}") } else { json.json(data) }
        }
    }

    /// The fields of a document around its `data`, which `data` writes.
    private mutating func documentFields(
        collection: String, id: String, deleted: Bool, updatedAt: Date, version: Int64, data: (inout JSONWriter) -> Void
    ) {
        string(#"{"collection":"#, collection)
        raw(#","data":"#)
        data(&self)
        bool(#","deleted":"#, deleted)
        string(#","id":"#, id)
        date(#","updatedAt":"#, updatedAt)
        int(#","version":"#, version)
        raw("}")
    }

    /// A wire ``Document`` (the `current` of a conflict), its `data` in canonical form.
    mutating func document(_ document: Document) {
        documentFields(
            collection: document.collection, id: document.id, deleted: document.deleted, updatedAt: document.updatedAt,
            version: document.version
        ) { json in
            var bytes: [UInt8] = []
            document.data.write(to: &bytes)
            json.json(bytes)
        }
    }

    /// A document, or `null`.
    mutating func document(orNull record: DocumentRecord?) {
        if let record { document(record) } else { raw("null") }
    }
}

extension Document: JSONWritable {
    func write(to json: inout JSONWriter) { json.document(self) }
}

extension Document {
    /// The wire form of a stored record (its `data` parsed: for the rare replies that carry a ``Document``).
    init(_ record: DocumentRecord) {
        let data = record.data.isEmpty ? .object([:]) : ((try? JSONValue.parse(record.data)) ?? .object([:]))
        self.init(
            id: record.id, collection: record.collection, data: data, version: record.version, updatedAt: record.updatedAt,
            deleted: record.deleted)
    }
}

/// `GET /v1/collections/{collection}/docs`: a page of live documents, `data` narrowed to `fields` when given.
struct DocumentPageBody: JSONWritable {
    let records: ArraySlice<DocumentRecord>
    let nextCursor: String?
    let fields: Set<JSONKey>?

    func write(to json: inout JSONWriter) {
        json.raw(#"{"items":["#)
        for (index, record) in records.enumerated() {
            if index > 0 { json.raw(",") }
            json.document(record, projected: fields.map { Self.project(record.data, to: $0) })
        }
        json.raw("]")
        if let nextCursor { json.string(#","nextCursor":"#, nextCursor) }
        json.raw("}")
    }

    /// The canonical bytes of `data` with only the top-level `fields`.
    static func project(_ data: [UInt8], to fields: Set<JSONKey>) -> [UInt8] {
        guard case .object(let all)? = try? JSONValue.parse(data) else { return data }
        return JSONValue.object(all.filter { fields.contains($0.key) }).bytes
    }
}

/// `GET /v1/sync/pull`.
struct PullBody: JSONWritable {
    let page: ChangePage
    let cursor: String

    func write(to json: inout JSONWriter) {
        json.raw(#"{"changes":["#)
        for (index, record) in page.changes.enumerated() {
            if index > 0 { json.raw(",") }
            json.document(record)
        }
        json.string(#"],"cursor":"#, cursor)
        json.bool(#","hasMore":"#, page.hasMore)
        json.raw(#","lastMutationIds":{"#)
        for (index, clientId) in page.lastMutationIds.keys.sorted().enumerated() {
            if index > 0 { json.raw(",") }
            json.string(clientId)
            json.raw(":")
            json.int(page.lastMutationIds[clientId]!)
        }
        json.raw("}}")
    }

    /// Bytes reserved up front: the documents' data plus their fields, so a large pull grows its buffer once.
    var capacity: Int { page.changes.reduce(256) { $0 + $1.data.count + $1.id.utf8.count + $1.collection.utf8.count + 110 } }
}

/// `POST /v1/sync/push`: one result per mutation, in order.
struct PushBody: JSONWritable {
    let ids: [Int64]
    let outcome: PushOutcome

    func write(to json: inout JSONWriter) {
        json.int(#"{"lastMutationId":"#, outcome.lastMutationId)
        json.raw(#","results":["#)
        for (index, (id, result)) in zip(ids, outcome.results).enumerated() {
            if index > 0 { json.raw(",") }
            switch result {
            case .applied(let record):
                Self.head(id, status: "applied", into: &json)
                json.int(#","version":"#, record.version)
            case .conflict(let current):
                json.raw(#"{"current":"#)
                json.document(orNull: current)
                json.int(#","id":"#, id)
                json.raw(#","status":"conflict""#)
            case .rejected(let code, _):
                let error = APIError(StoreError(code)).body.error
                json.string(#"{"error":{"code":"#, error.code.rawValue)
                json.string(#","message":"#, error.message)
                json.int(#"},"id":"#, id)
                json.raw(#","status":"rejected""#)
            case .duplicate:
                Self.head(id, status: "duplicate", into: &json)
            }
            json.raw("}")
        }
        json.raw("]}")
    }

    /// `{"id":…,"status":"…"`: the start of a result without `current` or `error`.
    private static func head(_ id: Int64, status: StaticString, into json: inout JSONWriter) {
        json.int(#"{"id":"#, id)
        json.raw(#","status":""#)
        json.raw(status)
        json.raw(#"""#)
    }
}
