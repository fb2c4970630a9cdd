import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// Sessions against the real server: guest sign-in, single-flight refresh, sign-out that leaves nothing behind.
@Suite("Client sessions", .timeLimit(.minutes(1)))
struct ClientSessionTests {
    @Test("A guest signs in once per installation; the same installation gets the same account")
    func guestIdentity() async throws {
        try await TallyTestServer.with { server in
            let store = MemorySecureStore()
            let (first, _) = server.client(secureStore: store)
            let user = try await first.signInAsGuest()
            #expect(user.isGuest)
            let (second, _) = server.client(secureStore: store)
            #expect(try await second.restore() == user)
            #expect(try await second.signInAsGuest() == user)
            let (stranger, _) = server.client()
            #expect(try await stranger.signInAsGuest() != user)
        }
    }

    @Test("Fifty requests refused with 401 at once cause one refresh")
    func singleFlightRefresh() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = server.client()
            try await client.signInAsGuest()
            // The server's clock passes the access token's expiry; the client's does not, so every request gets 401.
            server.serverClock.advance(by: 16 * 60)
            try await withThrowingTaskGroup(of: Wallet.self) { group in
                for index in 0..<50 {
                    group.addTask { try await client.fetch(Query<Wallet>(key: "wallet-\(index)", path: "/v1/wallet")) }
                }
                for try await wallet in group { #expect(wallet.balance == 0) }
            }
            #expect(transport.count(path: "/v1/auth/refresh") == 1)
            #expect(transport.requests.filter { $0.path == "/v1/wallet" }.count == 100)
        }
    }

    @Test("An access token about to expire by the client's clock is refreshed before the request, once")
    func proactiveRefresh() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            try await client.signInAsGuest()
            server.serverClock.advance(by: 15 * 60)
            clock.advance(by: 15 * 60)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    group.addTask { _ = try await client.fetch(Query<Wallet>(key: "w\(index)", path: "/v1/wallet")) }
                }
                try await group.waitForAll()
            }
            #expect(transport.count(path: "/v1/auth/refresh") == 1)
            #expect(transport.count(path: "/v1/wallet") == 20)  // no request was sent with the dying token
        }
    }

    @Test("Sign-out leaves nothing of the previous user in memory, in the secure store or on disk; the installation secret stays")
    func signOutForgetsEverything() async throws {
        try await TallyTestServer.with { server in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-signout-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let secure = try FileSecureStore(directory: directory.appendingPathComponent("secure"))
            let databasePath = directory.appendingPathComponent("cache.sqlite").path
            let (client, transport) = server.client(secureStore: secure, cacheStore: try SQLiteCacheStore(path: databasePath))
            let user = try await client.signInAsGuest()
            let installationSecret = try secure.read("installation-secret")
            #expect(installationSecret != nil)
            try await server.grant(42, to: user.userId)
            _ = try await client.fetch(client.walletQuery)
            _ = try await client.fetch(client.quotasQuery)
            let prices = try await client.fetch(.actions())
            _ = try await client.perform("ai.query")
            #expect(try diskBytes(directory).contains(Data(user.userId.utf8)))

            try await client.signOut()
            #expect(client.value(client.walletQuery) == nil)
            #expect(client.value(client.quotasQuery) == nil)
            #expect(client.cache.usage.count == 1 && client.value(.actions()) == prices)  // the price list is no one's
            #expect(await client.user == nil)
            #expect(try secure.read("session") == nil)
            // The device's, not the user's: a new secret would be a new guest with a fresh free quota.
            #expect(try secure.read("installation-secret") == installationSecret)
            #expect(!(try diskBytes(directory).contains(Data(user.userId.utf8))))

            // The next guest sign-in on this device presents the same installation secret.
            try await client.signInAsGuest()
            let deviceIds = transport.requests.filter { $0.path == "/v1/auth/guest" }.compactMap { request in
                request.body.flatMap { try? JSONDecoder().decode(GuestSignInRequest.self, from: $0) }?.deviceId
            }
            #expect(deviceIds.count == 2 && Set(deviceIds).count == 1)
        }
    }

    @Test("Sign-out cancels the user's background revalidation: the next user's first fetch gets that user's wallet")
    func signOutCancelsBackgroundWork() async throws {
        try await TallyTestServer.with { server in
            // The next user: a linked account made on another installation, with 5 tokens.
            let email = "next-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let (elsewhere, _) = server.client()
            let next = try await elsewhere.signInAsGuest()
            try await elsewhere.link(email: email, password: "correct horse battery")
            try await server.grant(5, to: next.userId)

            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            let wallet = client.walletQuery
            clock.advance(by: 31)  // past the wallet's 30-s freshness window
            transport.enqueue([.latency(60)], forPathPrefix: "/v1/wallet")
            #expect(try await client.fetch(wallet).balance == 10)  // the stale value at once, revalidated behind it
            try await clock.waitForSleepers(1)  // the revalidation's request, held before it reaches the server
            #expect(client.reads.waiterCount(for: wallet.key) == 1)

            try await client.signOut()
            // Nothing of the previous user is still being fetched (before the fix: the revalidation stayed in flight,
            // and the next user's first fetch joined it and threw "no value for wallet").
            #expect(clock.sleeperCount == 0)
            #expect(client.reads.waiterCount(for: wallet.key) == 0)
            #expect(client.background.count == 0)
            #expect(client.value(wallet) == nil)

            try await client.signIn(email: email, password: "correct horse battery")
            clock.advance(by: 60)  // would let a revalidation that was not cancelled go on
            #expect(try await client.fetch(wallet, forceRefresh: true).balance == 5)
            #expect(client.value(wallet)?.balance == 5)
        }
    }

    @Test("A refresh in flight at sign-out is cancelled: it does not sign the user back in")
    func signOutCancelsARefresh() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let secure = MemorySecureStore()
            let (client, transport) = server.client(clock: clock, secureStore: secure)
            try await client.signInAsGuest()
            // The wallet's 401 starts a refresh, whose request is held on the clock.
            transport.enqueue([.status(401, retryAfter: nil)], forPathPrefix: "/v1/wallet")
            transport.enqueue([.latency(5)], forPathPrefix: "/v1/auth/refresh")
            let fetch = Task { try await client.fetch(client.walletQuery, forceRefresh: true) }
            try await clock.waitForSleepers(1)

            try await client.signOut()
            clock.advance(by: 5)  // would let a refresh that was not cancelled go on
            let error = await #expect(throws: ClientError.self) { try await fetch.value }
            #expect(error?.code == .unauthorized)
            // Before the fix: the refresh, refused after sign-out, signed the guest in again.
            #expect(await client.user == nil)
            #expect(secure.read("session") == nil)
            #expect(transport.count(path: "/v1/auth/guest") == 1)
        }
    }

    @Test("A wrong email or password is invalidCredentials and keeps the session; a lost session is unauthorized")
    func wrongPassword() async throws {
        try await TallyTestServer.with { server in
            let (client, _) = server.client()
            let email = "wrong-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let guest = try await client.signInAsGuest()
            try await client.link(email: email, password: "correct horse battery")

            let wrongPassword = await #expect(throws: ClientError.self) {
                try await client.signIn(email: email, password: "wrong horse battery")
            }
            #expect(wrongPassword?.code == .invalidCredentials)
            let unknownEmail = await #expect(throws: ClientError.self) {
                try await client.signIn(email: "nobody-\(email)", password: "correct horse battery")
            }
            #expect(unknownEmail?.code == .invalidCredentials)
            #expect(await client.user?.userId == guest.userId)
            _ = try await client.fetch(client.walletQuery, forceRefresh: true)  // still signed in

            // The refresh token expires (30 days): that session is lost, which is what unauthorized means.
            server.serverClock.advance(by: 31 * 24 * 3600)
            let lost = await #expect(throws: ClientError.self) { try await client.fetch(client.walletQuery, forceRefresh: true) }
            #expect(lost?.code == .unauthorized)
            #expect(await client.user == nil)
        }
    }

    /// Every byte of every file under `directory` (database, WAL, secure files), concatenated.
    private func diskBytes(_ directory: URL) throws -> Data {
        var all = Data()
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            if let data = try? Data(contentsOf: url) { all.append(data) }
        }
        return all
    }
}
