import Foundation
import TallyClient

extension TallyTestServer {
    /// A signed-in guest client with `tokens` granted and its wallet, quotas and price list loaded.
    func readyClient(tokens: Int64, clock: TestClock = TestClock(), retry: RetryPolicy = RetryPolicy())
        async throws -> (Client, FaultInjectingTransport)
    {
        let (client, transport) = self.client(clock: clock, retry: retry)
        let user = try await client.signInAsGuest()
        if tokens > 0 { try await grant(tokens, to: user.userId) }
        _ = try await (client.fetch(client.walletQuery), client.fetch(client.quotasQuery), client.fetch(.actions()))
        return (client, transport)
    }
}

/// Whether `condition` holds within `yields` turns of the scheduler, for work that needs CPU only (no network,
/// no clock): a test proves "it happened at once" with it, and fails instead of hanging when it did not.
func eventually(yields: Int = 100_000, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<yields {
        if condition() { return true }
        await Task.yield()
    }
    return condition()
}

/// The states of a stream up to and including the first that satisfies `last`.
func collect<Value>(
    _ iterator: inout AsyncStream<QueryState<Value>>.Iterator, through last: (QueryState<Value>) -> Bool
) async -> [QueryState<Value>] {
    var seen: [QueryState<Value>] = []
    while let state = await iterator.next() {
        seen.append(state)
        if last(state) { break }
    }
    return seen
}

extension QueryState where Value: Equatable {
    /// Whether an observer would show the same thing for both.
    func looksLike(_ other: QueryState) -> Bool {
        value == other.value && isStale == other.isStale && isFetching == other.isFetching && error == other.error
            && confirmedAt == other.confirmedAt && pendingMutations == other.pendingMutations
    }
}
