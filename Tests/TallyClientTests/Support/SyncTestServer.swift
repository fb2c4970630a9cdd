import Foundation
import TallyAPI
import TallyClient
import TallyServer
import TallyStore
import Testing

extension TallyTestServer {
    /// ``with(catalog:configure:_:)`` for a server that declares the synced collection `notes` (range key `date`).
    static func withNotes<T: Sendable>(_ body: @Sendable (TallyTestServer) async throws -> T) async throws -> T {
        try await with(configure: { $0.sync.collections = [CollectionSpec(name: "notes", rangeKey: "date")] }, body)
    }

    /// One request to the API with `token`, as any HTTP client would send it.
    func send(_ method: String, _ path: String, token: String, json: String? = nil) async throws -> TransportResponse {
        var headers = ["Authorization": "Bearer \(token)"]
        if json != nil { headers["Content-Type"] = "application/json" }
        return try await URLSessionTransport(baseURL: baseURL).send(
            TransportRequest(method: method, path: path, headers: headers, body: json.map { Data($0.utf8) }, timeout: 10))
    }

    /// `PUT /v1/collections/notes/docs/{id}` over REST; throws unless the server stored it.
    func putNote(_ id: String, date: String, token: String) async throws {
        let response = try await send("PUT", "/v1/collections/notes/docs/\(id)", token: token, json: #"{"data":{"date":"\#(date)"}}"#)
        guard response.status == 200 || response.status == 201 else { throw TestFailure("PUT answered \(response.status)") }
    }

    /// Waits until the server holds no event stream open: it finds a client gone when a write to it fails, so this
    /// sends heartbeats, advancing the server's clock 15 s at a time, until it does (a few). A connection left open
    /// would last until its token expires, at 900 s: past 600 s of heartbeats it records an issue and returns.
    func waitUntilNoEventStreams(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        var waited: TimeInterval = 0
        while try await openEventStreams() != 0 {
            guard waited < 600 else {
                Issue.record("a stream is still open after \(Int(waited)) s of heartbeats: its request was not cancelled", sourceLocation: sourceLocation)
                return
            }
            serverClock.advance(by: 15)
            waited += 15
        }
    }

    /// The event streams the server holds open (its `tally_event_streams` gauge on the admin listener's `/metrics`).
    func openEventStreams() async throws -> Int {
        let response = try await URLSessionTransport(baseURL: adminURL).send(TransportRequest(method: "GET", path: "/metrics", timeout: 10))
        let line = String(decoding: response.body, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("tally_event_streams ") }
        guard let value = line?.split(separator: " ").last.flatMap({ Double($0) }) else { throw TestFailure("no tally_event_streams in /metrics") }
        return Int(value)
    }
}
