import Foundation

/// A source of wall-clock time, the one clock protocol of Tally's server, SDK and stand-ins: every TTL, hold expiry,
/// midnight reset, token expiry and retry backoff reads it or sleeps on it, so tests advance time instead of sleeping
/// (`ManualClock` in the `TallyTestKit` product).
public protocol TallyClock: Sendable {
    /// The current instant.
    var now: Date { get }
    /// Suspends for `seconds` of this clock's time; throws `CancellationError` if the task is cancelled.
    func sleep(for seconds: TimeInterval) async throws
}
