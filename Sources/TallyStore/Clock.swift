import Foundation
import Synchronization

/// A source of wall-clock time. Every TTL, hold expiry and midnight reset reads it,
/// so tests advance time instead of sleeping.
public protocol WallClock: Sendable {
    /// The current instant.
    var now: Date { get }
}

/// The real clock.
public struct SystemClock: WallClock {
    /// Creates the real clock.
    public init() {}
    /// The current instant, truncated to whole milliseconds as stored.
    public var now: Date { Date(millis: Date().millis) }
}

/// A clock that moves only when told to: for tests and simulations.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    /// Creates a clock standing at `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = Mutex(Date(millis: start.millis))
    }

    /// The instant the clock stands at.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward by `seconds`.
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = Date(millis: $0.addingTimeInterval(seconds).millis) }
    }

    /// Sets the clock to `date`.
    public func set(_ date: Date) {
        current.withLock { $0 = Date(millis: date.millis) }
    }
}

extension Date {
    /// Milliseconds since 1970, the unit every timestamp is stored in.
    public var millis: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }

    /// The instant `millis` milliseconds after 1970.
    public init(millis: Int64) {
        self.init(timeIntervalSince1970: TimeInterval(millis) / 1000)
    }
}
