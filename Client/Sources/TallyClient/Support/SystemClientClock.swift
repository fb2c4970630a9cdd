import Foundation
import TallyAPI

/// Real time: `Date()` and `Task.sleep(nanoseconds:)`.
public struct SystemClientClock: TallyClock {
    /// Creates the system clock.
    public init() {}
    /// The current time.
    public var now: Date { Date() }
    /// Sleeps for real.
    public func sleep(for seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: UInt64(max(0, min(seconds, 1e9)) * 1e9))
    }
}
