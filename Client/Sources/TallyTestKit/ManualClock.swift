import Foundation
import TallyAPI

/// A clock that moves only when told to, for tests and simulations of the server, the SDK and the stand-ins.
/// Sleepers wake when ``advance(by:)`` or ``set(_:)`` passes their deadline. It stands on whole milliseconds, the unit
/// every timestamp is stored in, so what a test reads from it equals what the server stored.
public final class ManualClock: TallyClock, @unchecked Sendable {
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

    /// Guards `state` (an `NSLock`: `Mutex` needs iOS 18, and the kit builds wherever the SDK does).
    private let lock = NSLock()
    private var state: State

    /// Creates a clock standing at `start` (to the millisecond).
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = State(now: Self.wholeMilliseconds(start))
    }

    private func withLock<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    /// The instant the clock stands at.
    public var now: Date { withLock { $0.now } }

    /// How many tasks sleep on this clock (tests wait for them before advancing).
    public var sleeperCount: Int { withLock { $0.sleepers.count } }

    /// Moves the clock forward by `seconds`, waking every sleeper whose deadline has come.
    public func advance(by seconds: TimeInterval) {
        move { $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock to `date`, waking every sleeper whose deadline has come.
    public func set(_ date: Date) {
        move { _ in date }
    }

    /// Waits (yielding, not sleeping) until at least `count` tasks sleep on this clock; throws `CancellationError` if
    /// the waiting task is cancelled (a test's time limit ends it), so a sleeper that never comes fails the test
    /// instead of hanging it.
    public func waitForSleepers(_ count: Int = 1) async throws {
        while sleeperCount < count {
            try Task.checkCancellation()
            await Task.yield()
        }
    }

    /// Waits (yielding, not sleeping) until a task sleeps on this clock with its deadline within `tolerance` seconds of
    /// `date`; throws `CancellationError` if the waiting task is cancelled. Unlike ``waitForSleepers(_:)``, another
    /// task's sleep (a retry, a refresh) does not count, so a test advances only once the sleep it means has begun.
    public func waitForSleeper(until date: Date, tolerance: TimeInterval = 1) async throws {
        while !hasSleeper(until: date, tolerance: tolerance) {
            try Task.checkCancellation()
            await Task.yield()
        }
    }

    /// Whether a task sleeps on this clock now with its deadline within `tolerance` seconds of `date`.
    public func hasSleeper(until date: Date, tolerance: TimeInterval = 1) -> Bool {
        withLock { $0.sleepers.contains { abs($0.deadline.timeIntervalSince(date)) <= tolerance } }
    }

    /// Suspends until the clock is moved to `now + seconds` or later. The deadline stands on its millisecond as the clock
    /// does, so advancing by exactly `seconds` (or to a date read from it) wakes the sleeper.
    public func sleep(for seconds: TimeInterval) async throws {
        if seconds <= 0 { return try Task.checkCancellation() }
        let id = withLock { state in
            state.nextId += 1
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.sleepers.append(
                        Sleeper(id: id, deadline: Self.wholeMilliseconds(state.now.addingTimeInterval(seconds)), continuation: continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let sleeper = withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    private func move(_ change: (Date) -> Date) {
        let woken = withLock { state in
            state.now = Self.wholeMilliseconds(change(state.now))
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// `date` on its millisecond: rounded down, except within a microsecond below a whole millisecond (where arithmetic
    /// on a whole millisecond lands), which is that millisecond — as the server's `Date.millis` reads it.
    static func wholeMilliseconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: ((date.timeIntervalSince1970 * 1000) + 0.001).rounded(.down) / 1000)
    }
}
