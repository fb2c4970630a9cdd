// The waiting helpers of the root package's TallyClientTests (Support/ReadyClient.swift), for the tests that need no
// server: a test target cannot import another package's test target.

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
