import Foundation

/// The stand-in's time: every signed date and every wait between delivery attempts reads it, so tests move a manual
/// clock instead of sleeping. Its requirements are those of TallyStore's `WallClock`, so a test target makes
/// TallyStore's `ManualClock` one with `extension ManualClock: DevAppStoreClock {}`.
public protocol DevAppStoreClock: Sendable {
    /// The current instant.
    var now: Date { get }
    /// Suspends for `seconds` of this clock's time; throws `CancellationError` if the task is cancelled.
    func sleep(for seconds: TimeInterval) async throws
}

/// The real clock.
public struct DevSystemClock: DevAppStoreClock {
    /// The real clock.
    public init() {}
    /// Now.
    public var now: Date { Date() }
    /// Sleeps for real.
    public func sleep(for seconds: TimeInterval) async throws { try await Task.sleep(for: .seconds(max(0, seconds))) }
}
