import Foundation

/// The SDK's source of time: every TTL, backoff delay and token expiry reads it, so tests can
/// move time forward instead of sleeping.
public protocol ClientClock: Sendable {
    /// The current wall-clock time.
    var now: Date { get }
    /// Suspends for `seconds` of this clock's time; throws `CancellationError` if the task is cancelled.
    func sleep(for seconds: TimeInterval) async throws
}

/// Real time: `Date()` and `Task.sleep(nanoseconds:)`.
public struct SystemClientClock: ClientClock {
    /// Creates the system clock.
    public init() {}
    /// The current time.
    public var now: Date { Date() }
    /// Sleeps for real.
    public func sleep(for seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: UInt64(max(0, min(seconds, 1e9)) * 1e9))
    }
}

/// A clock that moves only when told to: sleepers wake when ``advance(by:)`` passes their deadline.
public final class TestClock: ClientClock {
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

    private let state: Locked<State>

    /// Creates a clock reading `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { state = Locked(State(now: start)) }

    /// The clock's current time.
    public var now: Date { state.withLock { $0.now } }

    /// How many tasks are sleeping on this clock (tests wait for this before advancing).
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Moves time forward and wakes every sleeper whose deadline has passed.
    public func advance(by seconds: TimeInterval) {
        let woken: [Sleeper] = state.withLock { state in
            state.now = state.now.addingTimeInterval(seconds)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits (yielding, not sleeping) until at least `count` tasks sleep on this clock, or the waiting task is
    /// cancelled (a test's time limit), so a sleeper that never comes fails the test instead of hanging it.
    public func waitForSleepers(_ count: Int = 1) async {
        while sleeperCount < count, !Task.isCancelled { await Task.yield() }
    }

    /// Waits (yielding, not sleeping) until a task sleeps on this clock with its deadline within `tolerance`
    /// seconds of `date`, or the waiting task is cancelled: unlike ``waitForSleepers(_:)``, another task's sleep
    /// (a retry, a refresh) does not count, so a test advances only once the sleep it means has begun.
    public func waitForSleeper(until date: Date, tolerance: TimeInterval = 1) async {
        while !hasSleeper(until: date, tolerance: tolerance), !Task.isCancelled { await Task.yield() }
    }

    /// Whether a task sleeps on this clock now with its deadline within `tolerance` seconds of `date`.
    public func hasSleeper(until date: Date, tolerance: TimeInterval = 1) -> Bool {
        state.withLock { $0.sleepers.contains { abs($0.deadline.timeIntervalSince(date)) <= tolerance } }
    }

    /// Suspends until the clock is advanced past `now + seconds`.
    public func sleep(for seconds: TimeInterval) async throws {
        if seconds <= 0 { return try Task.checkCancellation() }
        let id: UInt64 = state.withLock { state in
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
}
