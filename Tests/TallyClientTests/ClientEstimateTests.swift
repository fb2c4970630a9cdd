import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// What an action's estimate needs, against the real server: the price list (prefetched, kept across
/// sign-out, persisted apart from any user, never waited for) and, for a quota action, the quotas.
@Suite("Client estimates", .timeLimit(.minutes(1)))
struct ClientEstimateTests {
    @Test("A quota action before the quotas are known estimates nothing: the balance does not flicker")
    func quotaActionWithoutQuotas() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            let user = try await client.signInAsGuest()
            try await server.grant(20, to: user.userId)
            _ = try await (client.fetch(client.walletQuery), client.fetch(.actions()))
            var states = client.observe(client.walletQuery).makeAsyncIterator()
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            let reading = Task { try await client.perform("reading") }
            try await clock.waitForSleepers(1)
            #expect(client.value(client.walletQuery)?.balance == 20)  // before the fix: 15, a token charge
            clock.advance(by: 1)
            #expect(try await reading.value.paidWith == .quota)
            let end = Wallet(balance: -1, held: 0, version: Int64.max)
            client.setValue(end, for: client.walletQuery)
            let shown = await collect(&states, through: { $0.value == end }).dropLast()
            #expect(!shown.isEmpty && shown.allSatisfy { $0.value?.balance == 20 })
        }
    }

    @Test("An action never waits for the price list: its request goes out while the list is still loading")
    func neverWaitsForThePriceList() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            // The actions themselves pass (this script is consulted first); the price list takes a minute.
            transport.enqueue([.none], forPathPrefix: "/v1/actions/")
            transport.enqueue([.latency(60)], forPathPrefix: "/v1/actions")
            let user = try await client.signInAsGuest()
            try await server.grant(10, to: user.userId)
            #expect(client.value(.actions()) == nil)
            let action = Task { try await client.perform("ai.query") }
            // Sending needs no network or clock before the transport: it happens at once or it waits for the list.
            let sentAtOnce = await eventually { transport.count(path: "/v1/actions/ai.query") == 1 }
            #expect(sentAtOnce)
            try await clock.waitForSleepers(1)  // the price list's request, asleep in its minute
            clock.advance(by: 60)
            #expect(try await action.value.wallet.balance == 7)
            #expect(transport.count(path: "/v1/actions") == 1)  // the prefetch at sign-in, shared by the action's
        }
    }

    @Test("The price list survives sign-out, so the next user's first action shows its estimate with no network for it")
    func priceListSurvivesSignOut() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 0, clock: clock)
            try await client.signOut()
            #expect(client.value(.actions()) != nil && client.value(client.walletQuery) == nil)
            let next = try await client.signInAsGuest()
            try await server.grant(10, to: next.userId)
            _ = try await client.fetch(client.walletQuery)
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            transport.enqueue(Array(repeating: .offline, count: 10), forPathPrefix: "/v1/actions")
            let action = Task { try await client.perform("ai.query") }
            try await clock.waitForSleepers(1)
            #expect(client.value(client.walletQuery)?.balance == 7)  // before the fix: 10, no estimate
            clock.advance(by: 1)
            #expect(try await action.value.wallet.balance == 7)
        }
    }

    @Test("The price list is persisted apart from any user: a launch with no session shows it from disk and refreshes it")
    func priceListPersistedForEveryone() async throws {
        try await TallyTestServer.with { server in
            let store = MemoryCacheStore()
            let (first, _) = server.client(cacheStore: store)
            try await first.signInAsGuest()
            let prices = try await first.fetch(.actions())
            #expect(store.entries(userId: CacheNamespace.shared).map(\.key) == ["actions"])
            try await first.signOut()
            #expect(store.entries(userId: CacheNamespace.shared).map(\.key) == ["actions"])

            // Another launch, signed out, with no network: the list shows from disk at once (stale), and is refetched.
            let (next, transport) = server.client(cacheStore: store, retry: .none)
            transport.enqueue([.offline], forPathPrefix: "/v1/actions")
            #expect(try await next.restore() == nil)
            #expect(next.value(.actions()) == prices && next.state(.actions()).isStale)
            #expect(await eventually { transport.count(path: "/v1/actions") == 1 })
        }
    }

    @Test("Restore and sign-in prefetch the price list in the background, without the session")
    func prefetch() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = server.client()
            #expect(try await client.restore() == nil)
            #expect(await eventually { transport.count(path: "/v1/actions") == 1 })
            let list = try await client.fetch(.actions())  // joins the prefetch or reads its answer
            #expect(list.items.map(\.name).sorted() == ["ai.query", "reading"])
            #expect(transport.requests.first { $0.path == "/v1/actions" }?.headers["Authorization"] == nil)

            let (signedIn, signedInTransport) = server.client()
            try await signedIn.signInAsGuest()
            #expect(await eventually { signedInTransport.count(path: "/v1/actions") == 1 })
        }
    }
}
