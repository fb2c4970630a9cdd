import Foundation
import Observation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// The `@Observable` wrapper compiles and follows the cache here too (Observation ships with the Linux toolchain).
@Suite("ObservedQuery", .timeLimit(.minutes(1)))
struct ObservedQueryTests {
    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("ObservedQuery shows the cached value at once and follows an optimistic action to its confirmation")
    func followsChanges() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            let observed = await MainActor.run { ObservedQuery(client.walletQuery, client: client) }
            #expect(await observed.state.value?.balance == 10)
            let follower = Task { await observed.run() }
            // The server answers at once but the answer is held on the clock: until it is let through, only the
            // optimistic estimate can show 7.
            transport.enqueue([.delayResponse(1)], forPathPrefix: "/v1/actions/")
            let action = Task { try await client.perform("ai.query") }
            try await clock.waitForSleepers(1)
            let optimistic = await eventually(asking: {
                await MainActor.run { observed.state.value?.balance == 7 && observed.state.pendingMutations == 1 }
            })
            #expect(optimistic, "the optimistic deduction never reached the observed state")
            clock.advance(by: 1)
            #expect(try await action.value.wallet.balance == 7)
            let confirmed = await eventually(asking: {
                await MainActor.run {
                    observed.state.value?.balance == 7 && observed.state.pendingMutations == 0 && !observed.state.isStale
                }
            })
            #expect(confirmed, "the confirmation never reached the observed state")
            follower.cancel()
        }
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @Test("refresh() fetches at once however fresh the value is, and its answer reaches the state")
    func refresh() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = server.client()
            let user = try await client.signInAsGuest()
            _ = try await client.fetch(client.walletQuery)
            let observed = await MainActor.run { ObservedQuery(client.walletQuery, client: client) }
            let follower = Task { await observed.run() }
            try await server.grant(9, to: user.userId)  // on the server only: the cached 0 is still fresh
            await observed.refresh()
            #expect(transport.count(path: "/v1/wallet") == 2)
            #expect(await eventually(asking: { await MainActor.run { observed.state.value?.balance == 9 } }))
            follower.cancel()
        }
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @MainActor
    @Test("Following starts without an update: the state shown first is not assigned again")
    func noUpdateForTheSameState() async throws {
        let client = Client(configuration: ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: MemorySecureStore()))
        client.setValue(Wallet(balance: 5, held: 0, version: 1), for: client.walletQuery)  // fresh: following fetches nothing
        let observed = ObservedQuery(client.walletQuery, client: client)
        let changes = Locked(0)
        withObservationTracking { _ = observed.state } onChange: { changes.withLock { $0 += 1 } }
        let follower = Task { await observed.run() }
        try await waitUntil { client.cache.watchedKeys.contains(client.walletQuery.key) }
        for _ in 0..<100 { await Task.yield() }  // the follower takes the first state from its stream
        #expect(changes.withLock { $0 } == 0)  // before the fix: the same state assigned again, a SwiftUI update
        client.setValue(Wallet(balance: 6, held: 0, version: 2), for: client.walletQuery)
        try await waitUntil { observed.state.value?.balance == 6 }
        #expect(changes.withLock { $0 } == 1)
        follower.cancel()
    }
}
