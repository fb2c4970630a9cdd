import Foundation
import HTTPTypes
import TallyAPI
import TallyStore
import Testing

@testable import TallyServer

/// The collections the sync tests declare: a habit log ordered by date, a metered chat history, a small
/// profile collection whose limits are easy to reach, and drafts as large as a document may be.
enum SyncFixture {
    /// `chat.message` draws on two free messages a day, then costs 2 tokens.
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "readings", daily: 3), QuotaSpec(name: "messages", daily: 2)],
        actions: [
            ActionSpec(name: "reading", quota: "readings", tokens: 5), ActionSpec(name: "ai.query", tokens: 3),
            ActionSpec(name: "chat.message", quota: "messages", tokens: 2),
        ])

    /// As an operator writes it in `TALLY_CONFIG`.
    static let yaml = """
        collections:
          - {name: habit_logs, rangeKey: date}
          - {name: chat_messages, rangeKey: sentAt, action: chat.message}
          - {name: profile, maxDocumentBytes: 200, maxDocuments: 3}
          - {name: drafts, maxDocumentBytes: 262144}
        tombstoneRetentionDays: 2
        """

    static let sync = try! TallyConfiguration(file: yaml, catalog: catalog).sync

    /// A server on `kind` with these collections.
    static func server<T: Sendable>(
        _ kind: StoreKind, sourceLocation: SourceLocation = #_sourceLocation, _ body: @Sendable (LiveServer) async throws -> T
    ) async throws -> T {
        try await LiveServer.with(kind, catalog: catalog, configure: { $0.sync = sync }, sourceLocation: sourceLocation, body)
    }
}

extension APIConnection {
    /// `PUT /v1/collections/{collection}/docs/{id}` with `{"data": data}`.
    func putDocument(
        _ user: TestUser, _ collection: String, _ id: String, _ data: JSONValue, headers: HTTPFields = [:]
    ) async throws -> APIResponse {
        try await send(
            .put, "/v1/collections/\(collection)/docs/\(id)", token: user.accessToken,
            raw: JSONValue.object(["data": data]).text, headers: headers)
    }

    /// `PATCH /v1/collections/{collection}/docs/{id}` with a merge patch.
    func patchDocument(
        _ user: TestUser, _ collection: String, _ id: String, _ patch: JSONValue, headers: HTTPFields = [:]
    ) async throws -> APIResponse {
        var headers = headers
        headers[.contentType] = "application/merge-patch+json"
        return try await send(.patch, "/v1/collections/\(collection)/docs/\(id)", token: user.accessToken, raw: patch.text, headers: headers)
    }

    func deleteDocument(_ user: TestUser, _ collection: String, _ id: String, headers: HTTPFields = [:]) async throws -> APIResponse {
        try await send(.delete, "/v1/collections/\(collection)/docs/\(id)", token: user.accessToken, headers: headers)
    }

    func getDocument(_ user: TestUser, _ collection: String, _ id: String, headers: HTTPFields = [:]) async throws -> APIResponse {
        try await send(.get, "/v1/collections/\(collection)/docs/\(id)", token: user.accessToken, headers: headers)
    }

    /// `POST /v1/sync/push`.
    func push(_ user: TestUser, clientId: String, _ mutations: [SyncMutation]) async throws -> APIResponse {
        try await send(.post, "/v1/sync/push", token: user.accessToken, json: SyncPushRequest(clientId: clientId, mutations: mutations))
    }

    /// `GET /v1/sync/pull`.
    func pull(_ user: TestUser, cursor: String? = nil, limit: Int? = nil) async throws -> APIResponse {
        var query: [String] = []
        if let cursor { query.append("cursor=\(cursor)") }
        if let limit { query.append("limit=\(limit)") }
        return try await send(.get, "/v1/sync/pull" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")), token: user.accessToken)
    }

    /// Pulls until `hasMore` is false, applying every change to `replica` (tombstones remove); returns the
    /// last cursor. Each page must be in version order, each document once.
    func pullAll(
        _ user: TestUser, into replica: inout [String: Document], from cursor: String?, limit: Int? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        var cursor = cursor
        while true {
            let response = try await pull(user, cursor: cursor, limit: limit)
            try #require(response.status == .ok, "pull: \(response.status) \(response.text)", sourceLocation: sourceLocation)
            let page = try response.decode(SyncPullResponse.self)
            let versions = page.changes.map(\.version)
            #expect(versions == versions.sorted() && Set(versions).count == versions.count, "pull page out of version order: \(versions)",
                sourceLocation: sourceLocation)
            for document in page.changes {
                let key = "\(document.collection)/\(document.id)"
                if document.deleted { replica[key] = nil } else { replica[key] = document }
            }
            cursor = page.cursor
            if !page.hasMore { return page.cursor }
        }
    }

    /// The user's whole state from a pull without a cursor, keyed `collection/id`.
    func state(_ user: TestUser, limit: Int? = nil) async throws -> [String: Document] {
        var replica: [String: Document] = [:]
        _ = try await pullAll(user, into: &replica, from: nil, limit: limit)
        return replica
    }
}

/// The JSON value of `text` (test data written as JSON).
func jsonValue(_ text: String) -> JSONValue {
    do { return try JSONValue.parse(text) } catch { fatalError("test JSON: \(error): \(text)") }
}

extension HTTPFields {
    /// These fields with `other`'s added (replacing fields of the same name).
    func merging(_ other: HTTPFields) -> HTTPFields {
        var all = self
        for field in other { all[field.name] = field.value }
        return all
    }
}
