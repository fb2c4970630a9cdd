import Foundation
import TallyAPI
import TallyStore
import Testing

@testable import TallyServer

/// `GET /v1/sync/events` over the real HTTP stack, on both stores, with the manual clock: what a stream
/// sends, to whom, and when it ends. The cross-process case runs two `tally serve` on one PostgreSQL.
@Suite("Sync events", .timeLimit(.minutes(3)))
struct SyncEventsTests {
    @Test("A stream starts with the wallet, then gets a wallet event after each change made through the user's other session", arguments: StoreKind.allCases)
    func walletEvents(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let device = "device-" + UUID().uuidString
            let phone = try await api.newGuest(deviceId: device)
            let tablet = try await api.newGuest(deviceId: device)
            #expect(phone.userId == tablet.userId && phone.accessToken != tablet.accessToken, "one user, two sessions")
            try await api.grant(20, to: phone)
            let (stream, head) = try await EventStreamClient.open(port: server.port, token: phone.accessToken)
            defer { Task { await stream.close() } }
            #expect(head.status == 200)
            #expect(head.header("Content-Type") == "text/event-stream")
            #expect(head.header("Cache-Control") == "no-store")
            #expect(head.header("X-Content-Type-Options") == "nosniff")
            try await stream.expectOpening()
            guard case .retry(let millis) = try await stream.next() else { Issue.record("no retry field first"); return }
            #expect((2_000...5_000).contains(millis))
            try await Self.expectWallet(stream, equalTo: api, phone, balance: 20)

            // An action by the other session: a free reading (the quota moves).
            #expect(try await api.send(.post, "/v1/actions/reading", token: tablet.accessToken, headers: [.idempotencyKey: "r1"]).status == .ok)
            let afterReading = try await Self.expectWallet(stream, equalTo: api, phone, balance: 20)
            #expect(afterReading.quotas.first { $0.name == "readings" }?.used == 1)
            // A hold, a capture and an admin grant each announce the wallet after them.
            let hold: Hold = try await api.send(
                .post, "/v1/wallet/holds", token: tablet.accessToken, json: CreateHoldRequest(amount: 10, ttlSeconds: 60)
            ).decode()
            #expect(try await Self.expectWallet(stream, equalTo: api, phone, balance: 20).wallet.held == 10)
            #expect(
                try await api.send(
                    .post, "/v1/wallet/holds/\(hold.holdId)/capture", token: tablet.accessToken, json: CaptureHoldRequest(amount: 4)
                ).status == .ok)
            #expect(try await Self.expectWallet(stream, equalTo: api, phone, balance: 16).wallet.held == 0)
            try await api.grant(5, to: phone)
            try await Self.expectWallet(stream, equalTo: api, phone, balance: 21)
            // Premium set and revoked by the admin API: the event carries it, as GET /v1/me says it.
            let until = Date(timeIntervalSince1970: 1_800_000_000 + 86_400)
            let set = try await api.send(.put, "/admin/v1/users/\(phone.userId)/premium", admin: true, json: PremiumRequest(until: until))
            #expect(set.status == .ok)
            #expect(try await Self.expectWallet(stream, equalTo: api, phone, balance: 21).premiumUntil == until)
            let revoke = try await api.send(.put, "/admin/v1/users/\(phone.userId)/premium", admin: true, json: PremiumRequest(until: nil))
            #expect(revoke.status == .ok)
            let revoked = try await Self.expectWallet(stream, equalTo: api, phone, balance: 21)
            #expect(revoked.premiumUntil == nil && revoked.reportsPremium)
        }
    }

    @Test("Holds released by the housekeeping sweep are announced", arguments: StoreKind.allCases)
    func expiryEvents(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let user = try await api.newGuest(granted: 10)
            #expect(
                try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 10, ttlSeconds: 60))
                    .status == .created)
            let stream = try await Self.openStream(server, user)
            #expect(try await Self.walletEvent(stream).wallet.held == 10)
            // Past the hold's expiry and the sweep's interval: the sweep releases it (nobody asked for the wallet). Moved
            // once the sweep and the stream's heartbeat sleep: a sweep not yet asleep would sleep past the move, and
            // nothing would come (seen once in a loaded run).
            try await server.clock.waitForSleepers(2)
            server.clock.advance(by: 3_600)
            let released = try await Self.walletEvent(stream)
            #expect(released.wallet.held == 0 && released.wallet.balance == 10)
        }
    }

    @Test("A document write announces `changed` with the cursor a pull ends at; a metered one the wallet too", arguments: StoreKind.allCases)
    func changedEvents(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let user = try await api.newGuest()
            let stream = try await Self.openStream(server, user)
            defer { Task { await stream.close() } }
            _ = try await Self.walletEvent(stream)

            #expect(try await api.putDocument(user, "habit_logs", "d1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
            let first = try await Self.changedCursor(stream)
            #expect(first == (try await api.pull(user).decode(SyncPullResponse.self)).cursor)

            // A push of three: the newest cursor arrives (one event, or several if the stream was quick).
            let mutations = (1...3).map {
                SyncMutation(id: Int64($0), op: .put, collection: "habit_logs", docId: "p\($0)", data: jsonValue(#"{"date":"2027-01-16"}"#))
            }
            #expect(try await api.push(user, clientId: "events-client-0123456789", mutations).status == .ok)
            let pulled = try await api.pull(user, cursor: first).decode(SyncPullResponse.self)
            #expect(pulled.changes.count == 3)
            var cursor = try await Self.changedCursor(stream)
            while cursor != pulled.cursor { cursor = try await Self.changedCursor(stream) }

            // A metered write (a chat message: a free use of the quota) changes the documents and the quotas.
            #expect(
                try await api.putDocument(user, "chat_messages", "m1", jsonValue(#"{"sentAt":"2027-01-15T08:00:00Z","text":"hi"}"#))
                    .status == .created)
            var names: [String] = []
            for _ in 0..<2 {
                guard case .event(let name, _, let data) = try await stream.nextEvent() else { break }
                names.append(name)
                if name == "wallet" {
                    let event = try TallyJSON.decoder().decode(SyncWalletEvent.self, from: Data(data.utf8))
                    #expect(event.quotas.first { $0.name == "messages" }?.used == 1)
                }
            }
            #expect(names.sorted() == ["changed", "wallet"])
        }
    }

    @Test("A stream opened with a cursor (Last-Event-ID or ?cursor=) announces at once what changed after it, and only then", arguments: StoreKind.allCases)
    func catchesUpFromACursor(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let user = try await api.newGuest()
            #expect(try await api.putDocument(user, "habit_logs", "d1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
            let cursor = try await api.pull(user).decode(SyncPullResponse.self).cursor

            // Up to date: the wallet, then nothing until the heartbeat.
            let (current, _) = try await EventStreamClient.open(port: server.port, token: user.accessToken, headers: [("Last-Event-ID", cursor)])
            try await current.expectOpening()
            guard case .retry = try await current.next() else { throw HarnessError("no retry field first") }
            _ = try await Self.walletEvent(current)
            try await Self.heartbeat(server)
            #expect(try await current.next() == .comment("heartbeat"), "no changed event for a client that is up to date")
            await current.close()

            // Behind (a write while it was away): `changed` at once, with the cursor a pull ends at.
            #expect(try await api.putDocument(user, "habit_logs", "d2", jsonValue(#"{"date":"2027-01-16"}"#)).status == .created)
            let newest = try await api.pull(user, cursor: cursor).decode(SyncPullResponse.self).cursor
            let (behind, _) = try await EventStreamClient.open(port: server.port, token: user.accessToken, path: "/v1/sync/events?cursor=\(cursor)")
            defer { Task { await behind.close() } }
            var changed: [String] = []
            for _ in 0..<2 {
                if case .event("changed", let id, _) = try await behind.nextEvent() { changed.append(id ?? "") }
            }
            #expect(changed == [newest])
        }
    }

    @Test("Another user's events never reach a stream, and another user's cursor is refused", arguments: StoreKind.allCases)
    func crossUser(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let alice = try await api.newGuest(), bob = try await api.newGuest()
            try await api.grant(10, to: bob)
            let stream = try await Self.openStream(server, alice)
            _ = try await Self.walletEvent(stream)
            try await server.clock.waitForSleepers(2)  // housekeeping and the stream's heartbeat
            // Bob's action, Bob's document writes (one metered), Bob's sign-out: none of it is Alice's.
            #expect(try await api.send(.post, "/v1/actions/ai.query", token: bob.accessToken, headers: [.idempotencyKey: "q1"]).status == .ok)
            #expect(try await api.putDocument(bob, "habit_logs", "d1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
            #expect(
                try await api.putDocument(bob, "chat_messages", "m1", jsonValue(#"{"sentAt":"2027-01-15T08:00:00Z","text":"hi"}"#))
                    .status == .created)
            server.services.notifier.documentsChanged(userId: bob.userId, version: 99)
            #expect(try await api.send(.post, "/v1/auth/sign-out", token: bob.accessToken).status == .noContent)
            // The next thing Alice's stream sends is its heartbeat: nothing of Bob's was pending before it.
            server.clock.advance(by: SyncEventsController.heartbeatInterval)
            #expect(try await stream.next() == .comment("heartbeat"))
            server.services.notifier.documentsChanged(userId: alice.userId, version: 2)
            let cursor = try SyncCursor.encode(version: 2, userId: alice.userId, keys: server.services.cursors)
            #expect(try await stream.next() == .event(name: "changed", id: cursor, data: #"{"cursor":"\#(cursor)"}"#), "not Bob's 99")

            // Bob's cursor does not open Alice's stream, as Last-Event-ID or as ?cursor=.
            let bobs = try SyncCursor.encode(version: 1, userId: bob.userId, keys: server.services.cursors)
            for (path, headers) in [("/v1/sync/events", [("Last-Event-ID", bobs)]), ("/v1/sync/events?cursor=\(bobs)", [])] {
                let (refused, head) = try await EventStreamClient.open(port: server.port, token: alice.accessToken, path: path, headers: headers)
                #expect(head.status == 400)
                #expect(try await refused.next() == .end)
                #expect(refused.body.contains("invalid_cursor"), "\(refused.body)")
                await refused.close()
            }
            let (anonymous, head) = try await EventStreamClient.open(port: server.port, token: nil)
            #expect(head.status == 401)
            await anonymous.close()
        }
    }

    @Test("Heartbeats come every 15 s of the injected clock", arguments: StoreKind.allCases)
    func heartbeats(kind: StoreKind) async throws {
        try await Self.withGuestStream(kind) { server, _, user, stream in
            try await server.clock.waitForSleepers(2)  // housekeeping and the stream's heartbeat
            server.clock.advance(by: SyncEventsController.heartbeatInterval - 1)
            // Not yet due: what comes next is this marker, not a heartbeat.
            server.services.notifier.documentsChanged(userId: user.userId, version: 1)
            guard case .event(name: "changed", _, _) = try await stream.next() else { Issue.record("a heartbeat came early"); return }
            server.clock.advance(by: 1)
            #expect(try await stream.next() == .comment("heartbeat"))
            try await Self.heartbeat(server)
            #expect(try await stream.next() == .comment("heartbeat"))
        }
    }

    @Test("Signing out ends that session's streams at once; deleting the account ends all of the user's", arguments: StoreKind.allCases)
    func endsOnSignOutAndDeletion(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let device = "device-" + UUID().uuidString
            let phone = try await api.newGuest(deviceId: device), tablet = try await api.newGuest(deviceId: device)
            let phoneStream = try await Self.openStream(server, phone), tabletStream = try await Self.openStream(server, tablet)
            _ = try await Self.walletEvent(phoneStream)
            _ = try await Self.walletEvent(tabletStream)

            #expect(try await api.send(.post, "/v1/auth/sign-out", token: tablet.accessToken).status == .noContent)
            #expect(try await tabletStream.next() == .end)
            server.services.notifier.documentsChanged(userId: phone.userId, version: 1)
            guard case .event(name: "changed", _, _) = try await phoneStream.next() else {
                Issue.record("the other session's stream should go on")
                return
            }

            #expect(try await api.send(.delete, "/v1/me", token: phone.accessToken).status == .ok)
            #expect(try await phoneStream.next() == .end)
            #expect(server.services.events.openStreams == 0, "forgotten before the response ended")
        }
    }

    @Test("A session revoked without a notification (refresh-token reuse) ends its stream at the next heartbeat", arguments: StoreKind.allCases)
    func endsAtHeartbeatWhenRevoked(kind: StoreKind) async throws {
        try await Self.withGuestStream(kind) { server, api, user, stream in
            let refresh = RefreshRequest(refreshToken: user.refreshToken)
            #expect(try await api.send(.post, "/v1/auth/refresh", json: refresh).status == .ok)
            #expect(try await api.send(.post, "/v1/auth/refresh", json: refresh).status == .unauthorized, "reuse revokes the session")
            try await Self.heartbeat(server)
            #expect(try await stream.next() == .end)
        }
    }

    @Test("A stream ends at the first heartbeat after its access token expired", arguments: [StoreKind.sqlite])
    func endsWhenTheTokenExpires(kind: StoreKind) async throws {
        try await Self.withGuestStream(kind, accessTokenTTL: 60) { server, _, _, stream in
            try await Self.heartbeat(server)
            #expect(try await stream.next() == .comment("heartbeat"), "still valid")
            try await server.clock.waitForSleepers(2)
            server.clock.advance(by: 60)
            #expect(try await stream.next() == .end)
        }
    }

    @Test("A user's eleventh stream ends their oldest; a client that went away is forgotten by the heartbeat after next")
    func capAndDisconnect() async throws {
        try await LiveServer.with(.sqlite) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let user = try await api.newGuest()
            var streams: [EventStreamClient] = []
            for _ in 0...EventHub.maxStreamsPerUser {
                let stream = try await Self.openStream(server, user)
                _ = try await Self.walletEvent(stream)
                streams.append(stream)
            }
            #expect(try await streams[0].next() == .end)
            #expect(server.services.events.openStreams == EventHub.maxStreamsPerUser)

            for stream in streams { await stream.close() }
            // The server learns that a client is gone when a write fails: at the latest the second heartbeat.
            for _ in 0..<3 where server.services.events.openStreams > 0 {
                // Every open stream's heartbeat asleep (and housekeeping's), both counts read again each time: a
                // stream still ending from the last heartbeat drops its sleeper, which a count read once waited for
                // forever (seen once in a loaded run).
                while server.clock.sleeperCount < 1 + server.services.events.openStreams {
                    try Task.checkCancellation()
                    await Task.yield()
                }
                server.clock.advance(by: SyncEventsController.heartbeatInterval)
                try await Self.waitUntil(within: .seconds(2)) { server.services.events.openStreams == 0 }
            }
            #expect(server.services.events.openStreams == 0)
        }
    }

    @Test("A stream outlives the connection timeouts (idle, header, request) and still delivers")
    func outlivesConnectionTimeouts() async throws {
        try await LiveServer.with(
            .sqlite,
            configure: {
                $0.connections.idleTimeout = .milliseconds(400)
                $0.connections.headerTimeout = .milliseconds(400)
                $0.connections.requestTimeout = .milliseconds(400)
            }
        ) { server in
            // A request must reach the server within 400 ms of its connect: a starved test process tries again.
            let user = try await Self.retrying {
                let api = server.connection()
                defer { Task { await api.close() } }
                return try await api.newGuest()
            }
            let stream = try await Self.retrying { try await Self.openStream(server, user) }
            _ = try await Self.walletEvent(stream)
            // Real time, longer than every timeout: these are the server's own socket timers, not the injected clock.
            try await Task.sleep(for: .milliseconds(1_200))
            server.services.notifier.documentsChanged(userId: user.userId, version: 3)
            guard case .event(name: "changed", _, _) = try await stream.next() else {
                Issue.record("the stream was cut by a connection timeout")
                return
            }
        }
    }

    @Test("A graceful shutdown ends open streams instead of waiting for them", arguments: StoreKind.allCases)
    func endsOnShutdown(kind: StoreKind) async throws {
        let stream = try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let stream = try await Self.openStream(server, try await api.newGuest())
            _ = try await Self.walletEvent(stream)
            return stream
        }
        #expect(try await stream.next() == .end)
        await stream.close()
    }

    @Test("An SSE client on one process receives the events of writes made through another (PostgreSQL)")
    func acrossProcesses() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            try await ServerPair.with(url: url, config: SyncProtocolTests.processCatalogYAML + SyncFixture.yaml) { pair in
                let a = pair.connection(0)
                defer { Task { await a.close() } }
                let device = "device-" + UUID().uuidString
                let phone = try await a.newGuest(deviceId: device), tablet = try await a.newGuest(deviceId: device)
                try await a.grant(10, to: phone)

                let opened = ContinuousClock.now
                let (stream, head) = try await EventStreamClient.open(port: pair.ports[1].api, token: phone.accessToken)
                defer { Task { await stream.close() } }
                #expect(head.status == 200)
                // Across processes a notification may arrive after the state it announces was read (the grant's,
                // after the stream's first read): such a late `wallet` repeats what the stream showed, and is skipped.
                #expect(try await Self.walletEvent(stream).wallet.balance == 10)
                #expect(try await a.send(.post, "/v1/actions/ai.query", token: tablet.accessToken, headers: [.idempotencyKey: "q1"]).status == .ok)
                _ = try await Self.walletEvent(stream) { $0.wallet.balance == 7 }  // the action on A reached the stream on B
                try await a.grant(5, to: phone)
                _ = try await Self.walletEvent(stream) { $0.wallet.balance == 12 }  // an admin grant on A too
                #expect(try await a.putDocument(tablet, "habit_logs", "d1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
                let cursor = try await a.pull(phone).decode(SyncPullResponse.self).cursor
                #expect(try await Self.changedCursor(stream, skippingWallet: true) == cursor, "a document write on A")
                // Signing out through A ends the stream on B at once, through the same notifications: before B's
                // first heartbeat (15 s of real time after the connect) could have found the session revoked.
                #expect(try await a.send(.post, "/v1/auth/sign-out", token: phone.accessToken).status == .noContent)
                #expect(try await stream.nextEvent() == .end, "\(pair.processes[1].log)")
                #expect(ContinuousClock.now - opened < .seconds(14), "ended by a heartbeat's check, not by the notification")
            }
        }
    }

    // MARK: - Helpers

    /// Runs `body` on a server of `kind` with a new guest whose stream is open and past its first `wallet` event.
    static func withGuestStream(
        _ kind: StoreKind, accessTokenTTL: TimeInterval = 30 * 86_400,
        _ body: @Sendable (LiveServer, APIConnection, TestUser, EventStreamClient) async throws -> Void
    ) async throws {
        try await LiveServer.with(kind, accessTokenTTL: accessTokenTTL) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let user = try await api.newGuest()
            let stream = try await Self.openStream(server, user)
            defer { Task { await stream.close() } }
            _ = try await Self.walletEvent(stream)
            try await body(server, api, user, stream)
        }
    }

    /// Waits until the server's sleepers (housekeeping, one stream's heartbeat) sleep, then moves the clock to the heartbeat.
    static func heartbeat(_ server: LiveServer) async throws {
        try await server.clock.waitForSleepers(2)
        server.clock.advance(by: SyncEventsController.heartbeatInterval)
    }

    /// Opens a stream for `user` and checks it started (200, then the `retry` field).
    static func openStream(_ server: LiveServer, _ user: TestUser, sourceLocation: SourceLocation = #_sourceLocation) async throws -> EventStreamClient {
        let (stream, head) = try await EventStreamClient.open(port: server.port, token: user.accessToken)
        #expect(head.status == 200, "\(stream.body)", sourceLocation: sourceLocation)
        try await stream.expectOpening(sourceLocation: sourceLocation)
        guard case .retry = try await stream.next() else { throw HarnessError("the stream did not start with retry") }
        return stream
    }

    /// The next event, which must be `wallet`, decoded.
    static func walletEvent(_ stream: EventStreamClient) async throws -> SyncWalletEvent {
        let item = try await stream.nextEvent()
        guard case .event(name: "wallet", id: nil, let data) = item else { throw HarnessError("expected a wallet event, got \(item)") }
        return try TallyJSON.decoder().decode(SyncWalletEvent.self, from: Data(data.utf8))
    }

    /// The next event, which must be `changed` with its cursor as `id` and data (after `wallet` events, with
    /// `skippingWallet`); the cursor.
    static func changedCursor(_ stream: EventStreamClient, skippingWallet: Bool = false) async throws -> String {
        var item = try await stream.nextEvent()
        while skippingWallet, case .event(name: "wallet", _, _) = item { item = try await stream.nextEvent() }
        guard case .event(name: "changed", let id?, let data) = item, data == #"{"cursor":"\#(id)"}"# else {
            throw HarnessError("expected a changed event, got \(item)")
        }
        return id
    }

    /// The first of the next `wallet` events that satisfies `condition` (only `wallet` events may come before it).
    static func walletEvent(_ stream: EventStreamClient, until condition: (SyncWalletEvent) -> Bool) async throws -> SyncWalletEvent {
        for _ in 0..<10 {
            let event = try await walletEvent(stream)
            if condition(event) { return event }
        }
        throw HarnessError("no wallet event as expected among the next ten")
    }

    /// The next event is `wallet` with `balance`, and is exactly what GET /v1/wallet, GET /v1/quotas and GET /v1/me
    /// (premium) say now.
    @discardableResult
    static func expectWallet(
        _ stream: EventStreamClient, equalTo api: APIConnection, _ user: TestUser, balance: Int64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> SyncWalletEvent {
        let event = try await walletEvent(stream)
        #expect(event.wallet.balance == balance, sourceLocation: sourceLocation)
        let wallet: Wallet = try await api.wallet(user)
        let quotas: QuotaList = try await api.send(.get, "/v1/quotas", token: user.accessToken).decode()
        let me: Me = try await api.send(.get, "/v1/me", token: user.accessToken).decode()
        #expect(event == SyncWalletEvent(wallet: wallet, quotas: quotas.items, premiumUntil: me.premiumUntil), sourceLocation: sourceLocation)
        return event
    }

    /// `work`, tried up to five times.
    static func retrying<T>(_ work: () async throws -> T) async throws -> T {
        for _ in 1..<5 {
            if let value = try? await work() { return value }
        }
        return try await work()
    }

    /// Waits (at most `limit`) for `condition`, which the server makes true on its own time.
    static func waitUntil(within limit: Duration, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
    }
}
