import Foundation
import TallyClient
import TallyTestKit

extension TallyTestServer {
    /// A signed-in guest client with `tokens` granted and its wallet, quotas and price list loaded.
    func readyClient(tokens: Int64, clock: ManualClock = ManualClock(), retry: RetryPolicy = RetryPolicy())
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
/// Runs on the caller's actor, so a main-actor test can ask about main-actor state.
func eventually(isolation: isolated (any Actor)? = #isolation, yields: Int = 100_000, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<yields where !Task.isCancelled {
        if condition() { return true }
        await Task.yield()
    }
    return condition()
}

/// ``eventually(isolation:yields:_:)`` for a condition read across an actor hop (an ``ObservedQuery``'s state,
/// from a test that is not on the main actor).
func eventually(yields: Int = 100_000, asking condition: () async -> Bool) async -> Bool {
    for _ in 0..<yields where !Task.isCancelled {
        if await condition() { return true }
        await Task.yield()
    }
    return await condition()
}

/// Waits (yielding, not sleeping) until `condition` holds, for as long as it takes (many callers joining, a
/// server's handler arriving). Throws when the test's time limit cancels it: a condition that never comes fails
/// the test instead of hanging the run. Runs on the caller's actor, like ``eventually(isolation:yields:_:)``.
func waitUntil(isolation: isolated (any Actor)? = #isolation, _ condition: () -> Bool) async throws {
    while !condition() {
        try Task.checkCancellation()
        await Task.yield()
    }
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
