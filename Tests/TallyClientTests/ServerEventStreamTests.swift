import Foundation
import Synchronization
import TallyAPI
import TallyTestKit
import Testing

@testable import TallyClient

/// `ServerEventStream` against the real server on loopback, through a fault-injecting transport, with a
/// `ManualClock`: the events it hands on, how it reconnects (backoff slept on the clock, `Last-Event-ID`, the
/// server's catch-up), and when it stops.
@Suite("Server event stream", .timeLimit(.minutes(2)))
struct ServerEventStreamTests {
    /// A signed-in client of `server` and a stream of its events, running until the test cancels it.
    struct Harness: Sendable {
        let server: TallyTestServer
        let client: Client
        let userId: String
        let clock: ManualClock
        let transport: FaultInjectingEventStreamTransport
        let events: AsyncStream<ServerEvent>
        let running: Task<Void, any Error>
        /// What `token` was called with, in order (nil: the current token; a token: the one the server refused).
        let tokenCalls: Locked<[String?]>

        /// Starts a stream with `retry` and a random draw of 0.5; `token` stands in for the session's when given.
        static func start(
            _ server: TallyTestServer, retry: RetryPolicy = ServerEventStream.reconnect, faults: [FaultInjectingEventStreamTransport.Fault] = [],
            token: (@Sendable (String?, Client) async throws -> String)? = nil
        ) async throws -> Harness {
            let clock = ManualClock()
            let (client, _) = server.client(clock: clock)
            let userId = try await client.signInAsGuest().userId
            let transport = FaultInjectingEventStreamTransport(wrapping: URLSessionEventStreamTransport(baseURL: server.baseURL))
            transport.enqueue(faults)
            let (events, sink) = AsyncStream.makeStream(of: ServerEvent.self)
            let calls = Locked<[String?]>([])
            let session = client.session
            let stream = ServerEventStream(transport: transport, clock: clock, retry: retry, random: { 0.5 }) { refused in
                calls.withLock { $0.append(refused) }
                if let token { return try await token(refused, client) }
                if let refused { try await session.refresh(after: refused) }
                return try await session.accessToken()
            }
            let running = Task {
                defer { sink.finish() }
                try await stream.run { sink.yield($0) }
            }
            return Harness(
                server: server, client: client, userId: userId, clock: clock, transport: transport, events: events, running: running,
                tokenCalls: calls)
        }

        func token() async throws -> String { try await client.session.accessToken() }
    }

    @Test("Connected, the wallet at once, `changed` with a cursor the pull accepts after a write, `wallet` after a grant")
    func eventsFromTheServer() async throws {
        try await TallyTestServer.withNotes { server in
            let harness = try await Harness.start(server)
            var events = harness.events.makeAsyncIterator()
            #expect(await events.next() == .connected)
            guard case .wallet(let opening) = await events.next() else { throw TestFailure("no wallet event after connecting") }
            #expect(opening.wallet.balance == 0)
            let request = try #require(harness.transport.requests.first)
            #expect(request.path == "/v1/sync/events" && request.method == "GET")
            let token = try await harness.token()
            #expect(request.headers["Authorization"] == "Bearer \(token)")
            #expect(request.headers["Last-Event-ID"] == nil, "a first connection has nothing to resume from")

            try await server.putNote("n1", date: "2027-01-15", token: harness.token())
            guard case .changed(let cursor) = await events.next() else { throw TestFailure("no changed event after a write") }
            let pull = try await server.send("GET", "/v1/sync/pull?cursor=\(cursor)", token: harness.token())
            #expect(pull.status == 200)
            let pulled = try TallyJSON.decoder().decode(SyncPullResponse.self, from: pull.body)
            #expect(pulled.changes.isEmpty && pulled.cursor == cursor, "the event's cursor covers the write")
            let everything = try await server.send("GET", "/v1/sync/pull", token: harness.token())
            #expect(try TallyJSON.decoder().decode(SyncPullResponse.self, from: everything.body).changes.map(\.id) == ["n1"])

            try await server.grant(7, to: harness.userId)
            guard case .wallet(let granted) = await events.next() else { throw TestFailure("no wallet event after a grant") }
            #expect(granted.wallet.balance == 7)

            harness.running.cancel()
            await #expect(throws: CancellationError.self) { try await harness.running.value }
            #expect(harness.transport.bodiesReleased == 1, "the stream's request ended with the task")
            #expect(harness.transport.requests.count == 1)
        }
    }

    @Test("A dropped stream reconnects after exactly the backoff on the clock, with Last-Event-ID, and hears of a write made meanwhile")
    func reconnects() async throws {
        try await TallyTestServer.withNotes { server in
            // A draw of 0.5 under ceilings of 20, 40, 80 s: waits of 10, 20, 40 s, far above the server's retry: (2 to 5 s).
            let retry = RetryPolicy(maxAttempts: .max, baseDelay: 20, multiplier: 2, maxDelay: 600, maxRetryAfter: .infinity)
            let harness = try await Harness.start(server, retry: retry)
            var events = harness.events.makeAsyncIterator()
            #expect(await events.next() == .connected)
            guard case .wallet = await events.next() else { throw TestFailure("no wallet event after connecting") }
            try await server.putNote("n1", date: "2027-01-15", token: harness.token())
            guard case .changed(let first) = await events.next() else { throw TestFailure("no changed event after a write") }

            harness.transport.dropConnections()
            #expect(await Self.nextState(&events) == .disconnected)
            try await harness.clock.waitForSleepers(1)
            harness.transport.enqueue([.offline])  // the first attempt finds no network
            harness.clock.advance(by: 9)
            #expect(harness.clock.sleeperCount == 1 && harness.transport.requests.count == 1, "no reconnect before 10 s")
            harness.clock.advance(by: 1)
            try await waitUntil { harness.transport.requests.count == 2 && harness.clock.sleeperCount == 1 }

            // While it waits 20 s after the second failure, a write: the server announces it at once on the reconnect.
            try await server.putNote("n2", date: "2027-01-16", token: harness.token())
            harness.clock.advance(by: 19)
            #expect(harness.clock.sleeperCount == 1 && harness.transport.requests.count == 2, "no reconnect before 20 s")
            harness.clock.advance(by: 1)
            #expect(await events.next() == .connected, "one disconnected per outage: the offline attempt told nothing")
            var caughtUp: String?
            var walletSeen = false
            while caughtUp == nil || !walletSeen {  // the connection's wallet and the catch-up, in either order
                switch await events.next() {
                case .changed(let cursor): caughtUp = cursor
                case .wallet: walletSeen = true
                case let other: throw TestFailure("expected the wallet and the catch-up, got \(String(describing: other))")
                }
            }
            #expect(harness.transport.requests.map { $0.headers["Last-Event-ID"] } == [nil, first, first])
            let pull = try await server.send("GET", "/v1/sync/pull?cursor=\(first)", token: harness.token())
            let pulled = try TallyJSON.decoder().decode(SyncPullResponse.self, from: pull.body)
            #expect(pulled.changes.map(\.id) == ["n2"] && pulled.cursor == caughtUp)

            // That connection delivered events: the backoff starts over at 10 s (not 40).
            harness.transport.dropConnections()
            #expect(await Self.nextState(&events) == .disconnected)
            try await harness.clock.waitForSleepers(1)
            harness.clock.advance(by: 9)
            #expect(harness.clock.sleeperCount == 1 && harness.transport.requests.count == 3)
            harness.clock.advance(by: 1)
            #expect(await Self.nextState(&events) == .connected)
            #expect(harness.transport.requests.last?.headers["Last-Event-ID"] == caughtUp)
            harness.running.cancel()
            await #expect(throws: CancellationError.self) { try await harness.running.value }
        }
    }

    @Test("A refused token is refreshed once before reconnecting; the server's retry: is the least wait")
    func refreshAndServerRetry() async throws {
        try await TallyTestServer.withNotes { server in
            let harness = try await Harness.start(server) { refused, client in
                refused == nil ? "not-a-token" : try await client.session.accessToken()
            }
            var events = harness.events.makeAsyncIterator()
            #expect(await events.next() == .connected)
            #expect(harness.tokenCalls.withLock { $0 } == [nil, "not-a-token"])
            let token = try await harness.token()
            #expect(harness.transport.requests.map { $0.headers["Authorization"] } == ["Bearer not-a-token", "Bearer \(token)"])
            guard case .wallet = await events.next() else { throw TestFailure("no wallet event after connecting") }

            var parser = EventStreamParser()
            _ = try parser.feed(harness.transport.received)
            let serverRetry = try #require(parser.reconnectionDelay)
            harness.transport.dropConnections()
            #expect(await Self.nextState(&events) == .disconnected)
            try await harness.clock.waitForSleepers(1)
            // The policy alone would wait 0.5 s (a draw of 0.5 under 1 s); the server asked for 2 to 5 s.
            harness.clock.advance(by: serverRetry - 0.25)
            #expect(harness.clock.sleeperCount == 1 && harness.transport.requests.count == 2)
            harness.clock.advance(by: 0.5)
            #expect(await Self.nextState(&events) == .connected)
            harness.running.cancel()
        }
    }

    @Test("It stops with the server's error on 404 or a second 401, keeps trying through 503 and a refresh that was offline, and stops when cancelled while it waits")
    func stopsOnlyWhenRetryingCannotHelp() async throws {
        try await TallyTestServer.withNotes { server in
            let gone = try await Harness.start(server, faults: [.status(404)])
            let notFound = await Self.failure(of: gone.running)
            #expect(notFound?.status == 404 && notFound?.serverCode == .notFound)
            #expect(gone.clock.sleeperCount == 0 && gone.transport.requests.count == 1)

            let refused = try await Harness.start(server) { _, _ in "not-a-token" }
            #expect(await Self.failure(of: refused.running)?.code == .unauthorized)
            #expect(refused.tokenCalls.withLock { $0 } == [nil, "not-a-token"] && refused.transport.requests.count == 2)

            let offlineRefresh = Mutex(true)
            let flaky = try await Harness.start(server, faults: [.status(503)]) { _, client in
                if offlineRefresh.withLock({ $0 }) { throw ClientError(.offline) }
                return try await client.session.accessToken()
            }
            var events = flaky.events.makeAsyncIterator()
            #expect(await events.next() == .disconnected)
            try await flaky.clock.waitForSleepers(1)
            offlineRefresh.withLock { $0 = false }
            flaky.clock.advance(by: 0.5)  // after the first failure: a draw of 0.5 under 1 s
            try await flaky.clock.waitForSleepers(1)
            #expect(flaky.transport.requests.count == 1, "503 answered the first open")
            flaky.clock.advance(by: 1)  // after the second: 0.5 under 2 s
            #expect(await events.next() == .connected)
            #expect(flaky.transport.requests.count == 2)
            flaky.running.cancel()

            // Cancelled while it waits to reconnect: it stops at once, nothing left sleeping.
            let waiting = try await Harness.start(server, faults: [.offline])
            var waitingEvents = waiting.events.makeAsyncIterator()
            #expect(await waitingEvents.next() == .disconnected)
            try await waiting.clock.waitForSleepers(1)
            waiting.running.cancel()
            await #expect(throws: CancellationError.self) { try await waiting.running.value }
            #expect(waiting.clock.sleeperCount == 0 && waiting.transport.requests.count == 1)
        }
    }

    /// The next event that says whether the stream is up (`.connected` or `.disconnected`), past the data events a
    /// loaded server may still send before it: the sign-up grant's wallet event can reach a stream after its opening
    /// wallet event (it failed this suite once in a CI run, `.wallet` where `.disconnected` was expected).
    static func nextState(_ events: inout AsyncStream<ServerEvent>.Iterator) async -> ServerEvent? {
        while let event = await events.next() {
            switch event {
            case .connected, .disconnected: return event
            case .wallet, .changed: continue
            }
        }
        return nil
    }

    /// The `ClientError` a stream's task ended with (nil, recorded as an issue, when it ended otherwise).
    static func failure(of task: Task<Void, any Error>) async -> ClientError? {
        do {
            try await task.value
            Issue.record("the stream ended without an error")
        } catch let error as ClientError {
            return error
        } catch {
            Issue.record("the stream ended with \(error)")
        }
        return nil
    }
}
