import Foundation
import TallyAPI

extension Client {
    /// `POST /v1/sync/push`: the outbox's next mutations, one attempt (the sync engine paces its retries: a push whose
    /// answer was lost is sent again unchanged, and the server applies each mutation id of a client once).
    func push(clientId: String, mutations: [SyncMutation], auth: (any AccessTokenProvider)? = nil) async throws -> SyncPushResponse {
        let body = Data(SyncPushRequest(clientId: clientId, mutations: mutations).exactBody)
        let response = try await executor.send(
            Endpoint(method: "POST", path: "/v1/sync/push", operation: "POST /v1/sync/push", kind: .write), body: body,
            auth: auth ?? session, retry: RetryPolicy.none)
        var answer = try decodeAnswer(SyncPushResponse.self, response.body)
        let data = Self.exact(response.body)?["results"]?.documentsData(count: answer.results.count, in: "current") ?? []
        for (index, data) in zip(answer.results.indices, data) where data != nil { answer.results[index].current?.data = data! }
        return answer
    }

    /// `GET /health`, one attempt: the sync engine's check that the server answers again after an outage (cheap
    /// for both: no session, no database). Throws the ``ClientError`` of a failure.
    func probe() async throws {
        _ = try await executor.send(
            Endpoint(method: "GET", path: "/health", operation: "GET /health", kind: .read, authenticated: false), auth: nil, retry: RetryPolicy.none)
    }

    /// An answer parsed exactly (object keys apart code point by code point, numbers as written), to take the
    /// documents' data from (``JSONValue/documentsData(count:in:)``); nil if it does not parse.
    static func exact(_ body: Data) -> JSONValue? { try? JSONValue.parse(body) }

    /// `GET /v1/sync/pull`: the changes after `cursor` (nil: the whole live state), at most `limit` of them; one
    /// attempt, as a push is.
    func pull(cursor: String?, limit: Int, auth: (any AccessTokenProvider)? = nil) async throws -> SyncPullResponse {
        var path = "/v1/sync/pull?limit=\(limit)"
        if let cursor { path += "&cursor=\(try Self.queryValue(cursor, name: "cursor"))" }
        let response = try await executor.send(
            Endpoint(method: "GET", path: path, operation: "GET /v1/sync/pull", kind: .read), auth: auth ?? session, retry: RetryPolicy.none)
        var answer = try decodeAnswer(SyncPullResponse.self, response.body)
        let data = Self.exact(response.body)?["changes"]?.documentsData(count: answer.changes.count) ?? []
        for (index, data) in zip(answer.changes.indices, data) where data != nil { answer.changes[index].data = data! }
        return answer
    }

    /// One page of `GET /v1/collections/{c}/docs`.
    func documentPage(collection: String, range: RemoteRange, cursor: String?) async throws -> DocumentPage {
        var path = "/v1/collections/\(try Self.pathSegment(collection))/docs?limit=\(range.pageSize)"
        path += range.descending ? "&order=desc" : "&order=asc"
        if let from = range.from { path += "&from=\(try Self.queryValue(from, name: "from"))" }
        if let to = range.to { path += "&to=\(try Self.queryValue(to, name: "to"))" }
        if let fields = range.fields { path += "&fields=\(try Self.queryValue(fields.joined(separator: ","), name: "fields"))" }
        if let cursor { path += "&cursor=\(try Self.queryValue(cursor, name: "cursor"))" }
        let response = try await executor.send(
            Endpoint(method: "GET", path: path, operation: "GET /v1/collections/{collection}/docs", kind: .read), auth: session)
        var page = try decodeAnswer(DocumentPage.self, response.body)
        let data = Self.exact(response.body)?["items"]?.documentsData(count: page.items.count) ?? []
        for (index, data) in zip(page.items.indices, data) where data != nil { page.items[index].data = data! }
        return page
    }

    /// `value` percent-encoded for a query string (everything but letters, digits and `-._~`).
    static func queryValue(_ value: String, name: String) throws -> String {
        guard let escaped = value.addingPercentEncoding(withAllowedCharacters: unreserved) else {
            throw ClientError(.invalidInput, message: name)
        }
        return escaped
    }

    /// `value` as one path segment.
    static func pathSegment(_ value: String) throws -> String {
        guard !value.isEmpty, let escaped = value.addingPercentEncoding(withAllowedCharacters: unreserved) else {
            throw ClientError(.invalidInput, message: "path segment")
        }
        return escaped
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

/// What a ``RemotePages`` sequence asks the server for: a range of a collection's range key, its order, the fields
/// of each document to return, and the page size.
public struct RemoteRange: Sendable, Hashable {
    /// Inclusive lower bound on the range key (nil: from the first).
    public var from: String?
    /// Exclusive upper bound on the range key (nil: to the last).
    public var to: String?
    /// Newest first.
    public var descending: Bool
    /// The top-level fields of `data` to return (nil: all); id, version and updatedAt always come.
    public var fields: [String]?
    /// Documents per page, 1 to 100.
    public var pageSize: Int

    /// Creates a range; `pageSize` is clamped to 1…100.
    public init(from: String? = nil, to: String? = nil, descending: Bool = false, fields: [String]? = nil, pageSize: Int = 50) {
        self.from = from
        self.to = to
        self.descending = descending
        self.fields = fields
        self.pageSize = max(1, min(pageSize, 100))
    }
}

/// A collection's documents on the server, page by page, for histories too long to keep on the device
/// (`GET /v1/collections/{c}/docs` with its cursor). Each page is fetched when asked; the sequence ends after the last.
public struct RemotePages: AsyncSequence, Sendable {
    /// One page of documents as the server sent them (only the requested fields in `data`).
    public typealias Element = [Document]

    let client: Client
    let collection: String
    let range: RemoteRange

    /// Fetches the next page when asked.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: Client
        let collection: String
        let range: RemoteRange
        var cursor: String?
        var finished = false

        /// The next page, or nil after the last one.
        public mutating func next() async throws -> [Document]? {
            guard !finished else { return nil }
            let page = try await client.documentPage(collection: collection, range: range, cursor: cursor)
            cursor = page.nextCursor
            finished = page.nextCursor == nil
            if page.items.isEmpty { return nil }
            return page.items
        }
    }

    /// Starts at the range's first document.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(client: client, collection: collection, range: range) }
}

extension Client {
    /// The documents of `collection` on the server, page by page (``RemotePages``): for histories too long to keep on
    /// the device, e.g. `for try await page in client.remotePages("chat_messages", RemoteRange(descending: true,
    /// fields: ["text", "sentAt"])) { … }`.
    public func remotePages(_ collection: String, _ range: RemoteRange = RemoteRange()) -> RemotePages {
        RemotePages(client: self, collection: collection, range: range)
    }
}
