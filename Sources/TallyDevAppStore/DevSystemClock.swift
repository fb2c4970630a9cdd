import Foundation
import TallyAPI

/// The real clock of the stand-ins (their time is a `TallyClock`, so tests drive them with `ManualClock`).
public struct DevSystemClock: TallyClock {
    /// The real clock.
    public init() {}
    /// Now.
    public var now: Date { Date() }
    /// Sleeps for real.
    public func sleep(for seconds: TimeInterval) async throws { try await Task.sleep(for: .seconds(max(0, seconds))) }
}
