import Foundation
import Synchronization
import TallyAPI
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// `signOut` and `deleteAccount` against a real server: sign-out returns at once offline and revokes the session
/// when the server is reachable again (a relaunch in between too), unsynced changes make it refuse, and deleting
/// the account leaves nothing of it on the device or the server.
@Suite("Sign-out and account deletion", .timeLimit(.minutes(2)))
struct ClientSignOutTests {
    /// The session's refresh token, as the secure store keeps it.
    static func refreshToken(_ store: any SecureStore) throws -> String {
        struct Stored: Decodable { var refreshToken: String }
        let data = try #require(try store.read("session"))
        return try JSONDecoder().decode(Stored.self, from: data).refreshToken
    }

    /// Whether the server still takes `refreshToken` (asked straight, not through the client).
    static func isLive(_ refreshToken: String, on server: TallyTestServer) async throws -> Bool {
        let response = try await URLSessionTransport(baseURL: server.baseURL).send(
            TransportRequest(
                method: "POST", path: "/v1/auth/refresh", headers: ["Content-Type": "application/json"],
                body: try TallyJSON.encoder().encode(RefreshRequest(refreshToken: refreshToken)), timeout: 10))
        return response.status == 200
    }

    /// Runs `signOut` while the client's requests and backoffs are held on `clock`; whether it returned before they
    /// were let go. One that waits for any of them cannot return by itself: after 60 s (a failsafe far beyond local
    /// work, not what is measured) the clock is moved so that it can, and the test fails instead of hanging.
    static func returnsWhileHeld(_ clock: ManualClock, _ signOut: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        final class Flag: Sendable { let value = Mutex(false) }
        let returned = Flag()
        let task = Task {
            try await signOut()
            returned.value.withLock { $0 = true }
        }
        for _ in 0..<6_000 where !returned.value.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        let beforeRelease = returned.value.withLock { $0 }
        if !beforeRelease { clock.advance(by: 86_400) }
        try await task.value
        return beforeRelease
    }

    @Test("Offline, sign-out returns at once; the session is revoked once the server is reachable, after a relaunch too")
    func offlineSignOut() async throws {
        try await TallyTestServer.with { server in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-offline-signout-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try FileSecureStore(directory: directory)
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock, secureStore: store)
            try await client.signInAsGuest()
            let token = try Self.refreshToken(store)
            // The first revocation is held on the client's clock, which stands still until the end: it gets no answer
            // while sign-out runs. Every later request fails as offline.
            transport.enqueue([.latency(3_600)], forPathPrefix: "/v1/auth/revoke")
            transport.enqueue(Array(repeating: .offline, count: 100))

            // It waits for no request and no backoff: a request held on the client's clock, or a backoff on it, could
            // never end here, so a sign-out that waited for either would not return while they are held.
            #expect(try await Self.returnsWhileHeld(clock) { try await client.signOut() }, "sign-out waited for a request or a backoff")
            #expect(await client.user == nil)
            #expect(try store.read("session") == nil)
            // The revocation was sent after all, in the background, and is still unanswered: sign-out did not wait for it.
            for _ in 0..<1_000 where transport.count(path: "/v1/auth/revoke") == 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(transport.count(path: "/v1/auth/revoke") == 1)
            #expect(await client.session.deliverRevocations() == 1)  // still queued: the server was not reached
            #expect(try await Self.isLive(token, on: server))  // the server session is alive until told

            // The app is killed offline and launched again later, online: the queue survived in the secure store.
            let (relaunched, _) = server.client(secureStore: store)
            #expect(try await relaunched.restore() == nil)
            #expect(await relaunched.session.deliverRevocations() == 0)
            #expect(!(try await Self.isLive(token, on: server)))
            #expect(try store.read("pending-revocations") == nil)
            // The held revocation is answered at last (the server takes a revoked token's again): its delivery ends.
            clock.advance(by: 3_600)
            await client.session.deliveryFinished()
        }
    }

    @Test("Online, sign-out revokes the server session; a refused revocation (bad token) is dropped, not retried forever")
    func onlineSignOut() async throws {
        try await TallyTestServer.with { server in
            let store = MemorySecureStore()
            let (client, transport) = server.client(secureStore: store)
            try await client.signInAsGuest()
            let token = try Self.refreshToken(store)
            try await client.signOut()
            await client.session.deliveryFinished()  // sent in the background, at once
            #expect(transport.count(path: "/v1/auth/revoke") == 1)
            #expect(store.read("pending-revocations") == nil)
            #expect(!(try await Self.isLive(token, on: server)))
            // Answered 400 (a token that is not one): the server will never take it, so it leaves the queue.
            store.write(try JSONEncoder().encode([""]), for: "pending-revocations")
            #expect(await client.session.deliverRevocations() == 0)
        }
    }

    @Test("Unsynced changes make sign-out refuse, changing nothing, unless told to discard them", arguments: StoreKind.allCases)
    func pendingWrites(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            // ``TallyTestServer/syncedClient(directory:clock:secureStore:through:)``'s client, with an event stream
            // transport that tells how each stream ended.
            let clock = ManualClock()
            let streams = EndRecordingEventStreams(wrapping: URLSessionEventStreamTransport(baseURL: server.baseURL))
            let (client, transport) = server.client(clock: clock, retry: .none, eventStream: true) { configuration in
                configuration.collections = SyncedClientFixture.clientCollections
                configuration.documentsDirectory = directory
                configuration.eventStreamTransport = streams
                configuration.random = { 0.5 }
            }
            try await client.signInAsGuest()
            try await client.waitUntilSynced()
            // Every request from here is held on the client's clock, which stands still: a push gets no answer, ever.
            transport.enqueue(Array(repeating: .latency(3_600), count: 1_000))
            let notes = client.collection("notes", of: Note.self)
            try notes.put(id: "n1", Note(date: "2027-01-01", text: "unsynced"))
            try notes.put(id: "n2", Note(date: "2027-01-02", text: "unsynced"))
            let refusal = await #expect(throws: ClientError.self) { try await client.signOut() }
            #expect(refusal?.code == .pendingWrites && refusal?.pendingWrites == 2)
            #expect(await client.user != nil && client.syncStatus.pendingMutations == 2)
            #expect(try notes.get(id: "n1") == Note(date: "2027-01-01", text: "unsynced"))

            // A push is under way (held, unanswered) and the event stream is open.
            for _ in 0..<1_000 where transport.count(path: "/v1/sync/push") == 0 { try await Task.sleep(for: .milliseconds(10)) }
            try #require(transport.count(path: "/v1/sync/push") >= 1, "the engine pushes")
            for _ in 0..<1_000 where streams.open == 0 { try await Task.sleep(for: .milliseconds(10)) }
            try #require(streams.open == 1, "the event stream is open")

            // It waits for no request and no backoff: only for the user's work to stop, and their file to go. The held
            // push, and any backoff (on the same clock), could never end by themselves here, so a sign-out that waited for
            // either would not return while they are held; and the event stream must end because the client stopped
            // reading it, not by its end or its silence timeout (45 s) — an error or an end is recorded as such.
            #expect(
                try await Self.returnsWhileHeld(clock) { try await client.signOut(discardingPendingWrites: true) },
                "sign-out waited for a request or a backoff")
            #expect(await client.user == nil)
            #expect(SyncedClientFixture.documentFiles(directory) == [], "the file is gone when sign-out returns")
            #expect(streams.open == 0 && streams.ends == [.cancelledByClient], "\(streams.ends)")
            #expect(transport.count(path: "/v1/sync/push") == 1, "no push was sent again")
        }
    }

    @Test("Deleting the account leaves nothing of it on the device or the server", arguments: StoreKind.allCases)
    func deleteAccount(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let secure = try FileSecureStore(directory: directory.appendingPathComponent("secure"))
            let cacheStore = try SQLiteCacheStore(path: directory.appendingPathComponent("cache.sqlite").path)
            let (client, _) = server.client(secureStore: secure, cacheStore: cacheStore, retry: .none) { configuration in
                configuration.collections = SyncedClientFixture.clientCollections
                configuration.documentsDirectory = directory
            }
            let user = try await client.signInAsGuest()
            try await server.grant(12, to: user.userId)
            _ = try await client.fetch(client.walletQuery)
            let notes = client.collection("notes", of: Note.self)
            try notes.put(id: "n1", Note(date: "2027-01-01", text: "mine"))
            try await client.waitUntilSynced()
            var observed = notes.observe(id: "n1").makeAsyncIterator()
            _ = await observed.next()
            #expect(!SyncedClientFixture.documentFiles(directory).isEmpty)
            let token = try Self.refreshToken(secure)

            #expect(try await client.deleteAccount().hadActiveSubscription == false)
            // The server: no user, no session.
            let admin = try await URLSessionTransport(baseURL: server.adminURL).send(
                TransportRequest(
                    method: "GET", path: "/admin/v1/users/\(user.userId)", headers: ["Authorization": "Bearer \(server.adminKey)"],
                    timeout: 10))
            #expect(admin.status == 404)
            #expect(!(try await Self.isLive(token, on: server)))
            // The device: no session, no installation secret, no document file, nothing naming the user on disk.
            #expect(await client.user == nil)
            #expect(try secure.read("session") == nil && (try secure.read("installation-secret")) == nil)
            #expect(SyncedClientFixture.documentFiles(directory) == [])
            #expect(client.value(client.walletQuery) == nil)
            var all = Data()
            let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
            while let url = files?.nextObject() as? URL { all.append((try? Data(contentsOf: url)) ?? Data()) }
            #expect(!all.contains(Data(user.userId.utf8)))
            // Observations end with the account.
            while await observed.next() != nil {}
            // A guest sign-in afterwards is a new guest.
            #expect(try await client.signInAsGuest().userId != user.userId)
        }
    }

    @Test("Offline, deleting the account throws and changes nothing")
    func deleteAccountOffline() async throws {
        try await TallyTestServer.with { server in
            let store = MemorySecureStore()
            let (client, transport) = server.client(secureStore: store, retry: .none)
            let user = try await client.signInAsGuest()
            transport.enqueue([.offline])
            let error = await #expect(throws: ClientError.self) { try await client.deleteAccount() }
            #expect(error?.code == .offline)
            #expect(await client.user == user && store.read("session") != nil && store.read("installation-secret") != nil)
        }
    }
}

/// An event stream transport that records how each body it forwarded ended: the client stopped reading it (its task
/// cancelled, or the stream dropped), or the body ended or failed by itself (the server's end, a timeout, a drop).
final class EndRecordingEventStreams: EventStreamTransport {
    enum End: Sendable, Hashable {
        case cancelledByClient
        case endedOrFailed
    }

    private let wrapped: any EventStreamTransport
    private let state = Mutex<(open: Int, ends: [End])>((0, []))

    init(wrapping wrapped: any EventStreamTransport) { self.wrapped = wrapped }

    /// Bodies forwarded and not ended.
    var open: Int { state.withLock { $0.open } }
    /// How each ended body ended, in order.
    var ends: [End] { state.withLock { $0.ends } }

    func open(_ request: TransportRequest) async throws -> StreamingResponse {
        let inner = try await wrapped.open(request)
        let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
        state.withLock { $0.open += 1 }
        let pump = Task {
            do {
                for try await chunk in inner.body { continuation.yield(chunk) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { [self] termination in
            pump.cancel()
            let end: End
            if case .cancelled = termination { end = .cancelledByClient } else { end = .endedOrFailed }
            state.withLock { state in
                state.open -= 1
                state.ends.append(end)
            }
        }
        return StreamingResponse(status: inner.status, headers: inner.headers, body: body)
    }
}
