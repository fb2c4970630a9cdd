import Foundation
import TallyAPI
import Testing

@testable import TallyClient

/// `URLSessionEventStreamTransport` against the real server's `GET /v1/sync/events` on loopback: the body
/// arrives while the response is open (on Linux too, where URLSession has no `bytes`), and ends when the server
/// ends it.
@Suite("Event stream transport", .timeLimit(.minutes(1)))
struct EventStreamTransportTests {
    @Test("Events arrive while the response is still open; the body ends, without error, when the server ends the stream")
    func streamsWhileOpen() async throws {
        try await TallyTestServer.withNotes { server in
            let (client, token, _, response) = try await Self.openStream(server)
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "text/event-stream")
            var parser = EventStreamParser()
            var body = response.body.makeAsyncIterator()
            // The server never ends this response by itself: a transport that buffered it would never get here.
            let opening = try await Self.events(from: &body, parser: &parser, until: { $0.name == "wallet" })
            #expect(opening.map(\.name) == ["wallet"])
            #expect(parser.reconnectionDelay.map { (2...5).contains($0) } == true, "the server's retry: came first")

            try await server.putNote("n1", date: "2027-01-15", token: token)
            let changed = try await Self.events(from: &body, parser: &parser, until: { $0.name == "changed" })
            #expect(changed.last?.lastEventId.isEmpty == false)

            try await client.signOut()  // the server ends the session's streams
            while let chunk = try await body.next() { _ = try parser.feed(chunk) }
        }
    }

    @Test("A reader that stops cancels the request: the server's stream ends at its next write (a heartbeat)")
    func stoppingClosesTheConnection() async throws {
        try await TallyTestServer.withNotes { server in
            let (_, _, transport, response) = try await Self.openStream(server)
            let (firstEvent, told) = AsyncStream.makeStream(of: Void.self)
            let reader = Task {
                var parser = EventStreamParser()
                for try await chunk in response.body where try !parser.feed(chunk).isEmpty { told.yield() }
            }
            var first = firstEvent.makeAsyncIterator()
            await first.next()
            #expect(try await server.openEventStreams() == 1)
            reader.cancel()
            _ = await reader.result
            try await server.waitUntilNoEventStreams()
            withExtendedLifetime(transport) {}  // not its teardown: the reader's stop closed the connection
        }
    }

    @Test("A refused stream has its status and error body; an unreachable server is offline")
    func refusals() async throws {
        try await TallyTestServer.withNotes { server in
            let transport = URLSessionEventStreamTransport(baseURL: server.baseURL)
            let refused = try await transport.open(TransportRequest(method: "GET", path: "/v1/sync/events", timeout: 10))
            #expect(refused.status == 401)
            var body = Data()
            for try await chunk in refused.body { body += chunk }
            #expect(try TallyJSON.decoder().decode(ErrorResponse.self, from: body).error.code == .unauthorized)
        }
        let nowhere = URLSessionEventStreamTransport(baseURL: URL(string: "http://127.0.0.1:1")!)
        await #expect(throws: TransportError.offline) {
            _ = try await nowhere.open(TransportRequest(method: "GET", path: "/v1/sync/events", timeout: 10))
        }
    }

    /// A signed-in guest of `server`, its access token, and its event stream opened through a new transport.
    static func openStream(_ server: TallyTestServer) async throws -> (Client, String, URLSessionEventStreamTransport, StreamingResponse) {
        let (client, _) = server.client()
        _ = try await client.signInAsGuest()
        let token = try await client.session.accessToken()
        let transport = URLSessionEventStreamTransport(baseURL: server.baseURL)
        let response = try await transport.open(
            TransportRequest(method: "GET", path: "/v1/sync/events", headers: ["Authorization": "Bearer \(token)"], timeout: 30))
        return (client, token, transport, response)
    }

    /// Reads chunks until an event satisfying `last` arrives; the events read up to it. Fails if the body ends first.
    static func events(
        from body: inout AsyncThrowingStream<Data, any Error>.Iterator, parser: inout EventStreamParser,
        until last: (ServerSentEvent) -> Bool
    ) async throws -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        while !events.contains(where: last) {
            guard let chunk = try await body.next() else { throw TestFailure("the body ended after \(events.map(\.name))") }
            events += try parser.feed(chunk)
        }
        return events
    }
}
