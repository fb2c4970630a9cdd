import Foundation
import Synchronization

/// A source of wall-clock time. Every TTL, hold expiry and midnight reset reads it, and every periodic
/// service (housekeeping, the revocation poller) and retry backoff sleeps on it, so tests advance time
/// instead of sleeping.
public protocol WallClock: Sendable {
    /// The current instant.
    var now: Date { get }
    /// Suspends for `seconds` of this clock's time; throws `CancellationError` if the task is cancelled.
    func sleep(for seconds: TimeInterval) async throws
}

/// The real clock.
public struct SystemClock: WallClock {
    /// Creates the real clock.
    public init() {}
    /// The current instant, truncated to whole milliseconds as stored.
    public var now: Date { Date(millis: Date().millis) }
    /// Sleeps for real.
    public func sleep(for seconds: TimeInterval) async throws {
        try await Task.sleep(for: .seconds(max(0, seconds)))
    }
}

/// A clock that moves only when told to: for tests and simulations. Sleepers wake when ``advance(by:)``
/// or ``set(_:)`` passes their deadline.
public final class ManualClock: WallClock {
    private struct Sleeper {
        let id: UInt64
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Date
        var nextId: UInt64 = 0
        var sleepers: [Sleeper] = []
    }

    private let state: Mutex<State>

    /// Creates a clock standing at `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex(State(now: Date(millis: start.millis)))
    }

    /// The instant the clock stands at.
    public var now: Date { state.withLock { $0.now } }

    /// How many tasks sleep on this clock (tests wait for them before advancing).
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Moves the clock forward by `seconds`, waking every sleeper whose deadline has come.
    public func advance(by seconds: TimeInterval) {
        move { $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock to `date`, waking every sleeper whose deadline has come.
    public func set(_ date: Date) {
        move { _ in date }
    }

    /// Waits (yielding, not sleeping) until at least `count` tasks sleep on this clock; throws
    /// `CancellationError` if the waiting task is cancelled (a test's time limit ends it).
    public func waitForSleepers(_ count: Int = 1) async throws {
        while sleeperCount < count {
            try Task.checkCancellation()
            await Task.yield()
        }
    }

    /// Suspends until the clock is moved to `now + seconds` or later.
    public func sleep(for seconds: TimeInterval) async throws {
        if seconds <= 0 { return try Task.checkCancellation() }
        let id = state.withLock { state in
            state.nextId += 1
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: state.now.addingTimeInterval(seconds), continuation: continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    private func move(_ change: (Date) -> Date) {
        let woken = state.withLock { state in
            state.now = Date(millis: change(state.now).millis)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }
}

extension Date {
    /// Milliseconds since 1970, the unit every timestamp is stored in: rounded down, except that an instant within a
    /// microsecond of a whole millisecond (or a few units of the last place, beyond the year 2242) is that millisecond —
    /// what ``init(millis:)`` makes, or arithmetic on it, lands a hair off it (a plain floor gave `Date(millis: m).millis
    /// == m - 1` for about one millisecond in 170). So `Date(millis: m).millis == m` for every `m` of
    /// ``writableMillis``. Total: an instant beyond what 64 bits of milliseconds hold (some 292 million years away) is
    /// clamped to `Int64.min`/`Int64.max`, never a trap — what comes from outside is bounded long before; NaN is 0.
    public var millis: Int64 {
        let scaled = timeIntervalSince1970 * 1000
        let nearest = scaled.rounded()
        let whole = abs(scaled - nearest) <= max(0.001, 8 * nearest.ulp) ? nearest : scaled.rounded(.down)
        guard let exact = Int64(exactly: whole) else { return whole.isNaN ? 0 : whole < 0 ? .min : .max }
        return exact
    }

    /// The instant `millis` milliseconds after 1970.
    public init(millis: Int64) {
        self.init(timeIntervalSince1970: TimeInterval(millis) / 1000)
    }

    /// The instants Tally writes, in milliseconds since 1970: RFC 3339's years 0000 to 9999. A timestamp read from
    /// outside (a cursor, a signed payload) beyond them is refused as something the server never issued.
    public static let writableMillis: ClosedRange<Int64> = -62_167_219_200_000...253_402_300_799_999
}
