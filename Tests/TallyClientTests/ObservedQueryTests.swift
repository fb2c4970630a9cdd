import Foundation
import TallyAPI
import TallyClient
import Testing

/// The `@Observable` wrapper compiles and follows the cache here too (Observation ships with the Linux toolchain).
@Suite("ObservedQuery")
struct ObservedQueryTests {
    @Test("ObservedQuery shows the cached value at once and follows an optimistic action to its confirmation")
    func followsChanges() async throws {
        try await TallyTestServer.with { server in
            let (client, _) = server.client()
            let user = try await client.signInAsGuest()
            try await server.grant(10, to: user.userId)
            _ = try await (client.fetch(client.walletQuery), client.fetch(.actions()), client.fetch(client.quotasQuery))
            let observed = await MainActor.run { ObservedQuery(client.walletQuery, client: client) }
            #expect(await observed.state.value?.balance == 10)
            let follower = Task { await observed.run() }
            try await client.perform("ai.query")
            while await MainActor.run(body: { observed.state.value?.balance != 7 || observed.state.pendingMutations != 0 }) {
                await Task.yield()
            }
            follower.cancel()
        }
    }
}
