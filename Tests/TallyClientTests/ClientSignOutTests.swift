import Foundation
import TallyAPI
import TallyStore
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

    @Test("Offline, sign-out returns at once; the session is revoked once the server is reachable, after a relaunch too")
    func offlineSignOut() async throws {
        try await TallyTestServer.with { server in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-offline-signout-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try FileSecureStore(directory: directory)
            let (client, transport) = server.client(secureStore: store)
            try await client.signInAsGuest()
            let token = try Self.refreshToken(store)
            transport.enqueue(Array(repeating: .offline, count: 100))

            // It waits for no request and no backoff (a request's timeout is 8 s and more): only for the user's work to
            // stop, which is local (tens of milliseconds on a loaded machine).
            let started = DispatchTime.now().uptimeNanoseconds
            try await client.signOut()
            let took = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            #expect(took <= 500, "sign-out took \(took) ms offline")
            #expect(await client.user == nil)
            #expect(try store.read("session") == nil)
            #expect(await client.session.deliverRevocations() == 1)  // still queued: the server was not reached
            #expect(try await Self.isLive(token, on: server))  // the server session is alive until told

            // The app is killed offline and launched again later, online: the queue survived in the secure store.
            let (relaunched, _) = server.client(secureStore: store)
            #expect(try await relaunched.restore() == nil)
            #expect(await relaunched.session.deliverRevocations() == 0)
            #expect(!(try await Self.isLive(token, on: server)))
            #expect(try store.read("pending-revocations") == nil)
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
            try await server.withSyncedClient { client, transport, directory in
                transport.enqueue(Array(repeating: .offline, count: 1_000))  // the server unreachable: every request fails
                let notes = client.collection("notes", of: Note.self)
                try notes.put(id: "n1", Note(date: "2027-01-01", text: "unsynced"))
                try notes.put(id: "n2", Note(date: "2027-01-02", text: "unsynced"))
                let refusal = await #expect(throws: ClientError.self) { try await client.signOut() }
                #expect(refusal?.code == .pendingWrites && refusal?.pendingWrites == 2)
                #expect(await client.user != nil && client.syncStatus.pendingMutations == 2)
                #expect(try notes.get(id: "n1") == Note(date: "2027-01-01", text: "unsynced"))

                // With the engine retrying its pushes and the event stream open, it waits for no request and no backoff:
                // only for the user's work to stop, and their file to go (local work: tens of milliseconds idle, 2.6 s
                // once on the CI's two loaded cores). What it must never wait for is a request's timeout, 8 s and more.
                let started = DispatchTime.now().uptimeNanoseconds
                try await client.signOut(discardingPendingWrites: true)
                let took = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
                #expect(took < 6_000, "sign-out took \(took) ms: as long as a request's timeout")
                #expect(await client.user == nil)
                #expect(SyncedClientFixture.documentFiles(directory) == [], "the file is gone when sign-out returns")
            }
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
