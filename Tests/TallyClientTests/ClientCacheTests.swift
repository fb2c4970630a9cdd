import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// The query cache against the real server: freshness, stale-while-revalidate, ETags, coalescing,
/// Retry-After on the test clock, and the last known values with no network.
@Suite("Client query cache", .timeLimit(.minutes(1)))
struct ClientCacheTests {
    @Test("Fresh values are served from memory; stale ones at once while a 304 revalidates them")
    func staleWhileRevalidate() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            let user = try await client.signInAsGuest()
            try await server.grant(10, to: user.userId)
            #expect(try await client.fetch(client.walletQuery).balance == 10)
            #expect(try await client.fetch(client.walletQuery).balance == 10)
            #expect(transport.count(path: "/v1/wallet") == 1)
            #expect(!client.state(client.walletQuery).isStale)

            clock.advance(by: 31)
            #expect(client.state(client.walletQuery).isStale)
            var states = client.observe(client.walletQuery).makeAsyncIterator()
            // The stale value is shown at once; the revalidation is a 304 that makes it fresh again.
            var state = await states.next()
            #expect(state?.value?.balance == 10)
            while let next = await states.next() {
                state = next
                if !next.isFetching && !next.isStale { break }
            }
            #expect(state?.value?.balance == 10)
            #expect(transport.count(path: "/v1/wallet") == 2)
            #expect(transport.requests.last(where: { $0.path == "/v1/wallet" })?.headers["If-None-Match"] != nil)
            #expect(client.metrics.summary().notModified == 1)
        }
    }

    @Test("1,000 concurrent identical reads send one request and all get its answer")
    func coalescedReads() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            try await client.signInAsGuest()
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/wallet")
            let query = client.walletQuery
            try await withThrowingTaskGroup(of: Int64.self) { group in
                for _ in 0..<1000 { group.addTask { try await client.fetch(query, forceRefresh: true).balance } }
                try await clock.waitForSleepers(1)
                try await waitUntil { client.reads.waiterCount(for: query.key) >= 1000 }
                clock.advance(by: 1)
                var answers = 0
                for try await balance in group {
                    #expect(balance == 0)
                    answers += 1
                }
                #expect(answers == 1000)
            }
            #expect(transport.count(path: "/v1/wallet") == 1)
            #expect(client.metrics.summary().coalesced == 999)
        }
    }

    @Test("429 with Retry-After is retried no earlier than the server asked, on the injected clock")
    func retryAfter() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            try await client.signInAsGuest()
            transport.enqueue([.status(429, retryAfter: 5)], forPathPrefix: "/v1/wallet")
            let fetch = Task { try await client.fetch(client.walletQuery) }
            try await clock.waitForSleepers(1)
            clock.advance(by: 4.9)
            #expect(clock.sleeperCount == 1 && transport.count(path: "/v1/wallet") == 1)
            clock.advance(by: 0.2)
            #expect(try await fetch.value.balance == 0)
            #expect(transport.count(path: "/v1/wallet") == 2)
            #expect(client.metrics.summary().retried == 1)
        }
    }

    @Test("With no network, a cold start shows the last known values, marked stale, and reports offline")
    func offlineColdStart() async throws {
        try await TallyTestServer.with { server in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-offline-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let secure = try FileSecureStore(directory: directory.appendingPathComponent("secure"))
            let path = directory.appendingPathComponent("cache.sqlite").path
            let (online, _) = server.client(secureStore: secure, cacheStore: try SQLiteCacheStore(path: path))
            let user = try await online.signInAsGuest()
            try await server.grant(25, to: user.userId)
            #expect(try await online.fetch(online.walletQuery).balance == 25)

            let (offline, transport) = server.client(
                secureStore: secure, cacheStore: try SQLiteCacheStore(path: path), retry: RetryPolicy(maxAttempts: 1))
            transport.enqueue(Array(repeating: .offline, count: 10))
            #expect(try await offline.restore() == user)
            let cold = offline.state(offline.walletQuery)
            #expect(cold.value?.balance == 25 && cold.isStale)
            // fetch serves the last known value at once; the revalidation behind it fails offline.
            var states = offline.observe(offline.walletQuery).makeAsyncIterator()
            #expect(try await offline.fetch(offline.walletQuery).balance == 25)
            while let state = await states.next(), state.error == nil {}
            #expect(offline.state(offline.walletQuery).error?.code == .offline)
            #expect(offline.state(offline.walletQuery).value?.balance == 25)
        }
    }

    @Test("Invalidation by prefix marks values stale and refetches the observed ones")
    func invalidation() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = server.client()
            try await client.signInAsGuest()
            let a = Query<Wallet>(key: "books/a", path: "/v1/wallet", staleAfter: 3600)
            let b = Query<Wallet>(key: "books/b", path: "/v1/wallet", staleAfter: 3600)
            let other = Query<QuotaList>(key: "other", path: "/v1/quotas", staleAfter: 3600)
            _ = try await (client.fetch(a), client.fetch(b), client.fetch(other))
            var states = client.observe(a).makeAsyncIterator()
            _ = await states.next()
            client.invalidate(prefix: "books/")
            #expect(client.state(a).isStale && client.state(b).isStale && !client.state(other).isStale)
            while let state = await states.next(), state.isStale || state.isFetching {}
            #expect(transport.count(path: "/v1/wallet") == 3)  // a refetched because it is observed; b waits for its next read
        }
    }

    @Test("setValue writes a confirmed value: fresh, persisted, ahead of a fetch in flight, under the estimates in flight")
    func setValue() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let store = MemoryCacheStore()
            let (client, transport) = server.client(clock: clock, cacheStore: store)
            let user = try await client.signInAsGuest()
            try await server.grant(10, to: user.userId)
            _ = try await (client.fetch(client.walletQuery), client.fetch(client.quotasQuery), client.fetch(.actions()))
            let wallet = client.walletQuery

            // A refetch answered before the write but delivered after it does not undo it.
            transport.enqueue([.delayResponse(1)], forPathPrefix: "/v1/wallet")
            let refetch = Task { try await client.fetch(wallet, forceRefresh: true) }
            try await clock.waitForSleepers(1)
            clock.advance(by: 0.5)
            let written = Wallet(balance: 100, held: 0, version: 1)
            client.setValue(written, for: wallet)
            let state = client.state(wallet)
            #expect(state.value == written && !state.isStale && state.confirmedAt == clock.now && state.error == nil)
            let bytes = try TallyJSON.encoder().encode(written)
            #expect(store.entries(userId: user.userId).first { $0.key == wallet.key }?.data == bytes)
            clock.advance(by: 0.5)
            #expect(try await refetch.value == written)

            // An action in flight keeps its estimate over the written value; its answer (a later version) replaces it.
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            let action = Task { try await client.perform("ai.query") }
            try await clock.waitForSleepers(1)
            #expect(client.value(wallet)?.balance == 97)
            client.setValue(Wallet(balance: 50, held: 0, version: 1), for: wallet)
            #expect(client.value(wallet)?.balance == 47 && client.state(wallet).pendingMutations == 1)
            clock.advance(by: 1)
            let result = try await action.value
            #expect(result.wallet.balance == 7 && client.value(wallet) == result.wallet && client.state(wallet).pendingMutations == 0)
        }
    }

    @Test("An action leaves wallet and quotas fresh, confirmed with its answer; a grant made elsewhere shows after invalidate(key:)")
    func freshAfterEveryChange() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, _) = try await server.readyClient(tokens: 10, clock: clock)
            clock.advance(by: 31)
            #expect(client.state(client.walletQuery).isStale && client.state(client.quotasQuery).isStale)
            let result = try await client.perform("ai.query")
            let wallet = client.state(client.walletQuery)
            let quotas = client.state(client.quotasQuery)
            #expect(wallet.value == result.wallet && !wallet.isStale && wallet.confirmedAt == clock.now)
            #expect(quotas.value?.items == result.quotas && !quotas.isStale && quotas.confirmedAt == clock.now)

            // A refusal carries the wallet too: still fresh after it.
            clock.advance(by: 31)
            await #expect(throws: ClientError.self) { for _ in 0..<4 { try await client.perform("ai.query") } }
            #expect(!client.state(client.walletQuery).isStale && client.state(client.walletQuery).confirmedAt == clock.now)

            // The app's backend grants tokens after a purchase: the README's invalidation shows them at once.
            var states = client.observe(client.walletQuery).makeAsyncIterator()
            let user = try #require(await client.user)
            try await server.grant(5, to: user.userId)
            client.invalidate(key: client.walletQuery.key)
            let seen = await collect(&states, through: { $0.value?.available == 6 && !$0.isFetching })
            #expect(seen.last?.isStale == false)
        }
    }
}
