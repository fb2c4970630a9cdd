import Foundation
import Synchronization
import TallyStore

/// How many events a limit allows per period: `limit` at once, then one every `period / limit` seconds.
public struct RateLimit: Sendable, Hashable, CustomStringConvertible {
    /// Events allowed in a burst, and per `period`.
    public var limit: Int
    /// The period, in seconds.
    public var period: TimeInterval

    /// `limit` events per `period` seconds.
    public init(_ limit: Int, per period: TimeInterval) {
        self.limit = limit
        self.period = period
    }

    /// `30 per 60 s`.
    public var description: String { "\(limit) per \(Int(saturating: period)) s" }
}

/// A per-key rate limiter: GCRA (the generic cell rate algorithm, a token bucket kept as one instant per
/// key), O(1) per check, on the injected clock's time.
///
/// Each key stores its "theoretical arrival time" `tat`: an event at `now` is allowed while
/// `max(tat, now) + interval - period <= now`, and moves `tat` on by `interval = period / limit`. A fresh
/// key takes `limit` events at once; after that one per `interval`; a key left alone for `period` is as good
/// as new, so its entry is dropped.
///
/// Memory is bounded: keys live in two generations, rotated every `period` (an entry untouched for a whole
/// generation has expired, so dropping the older generation forgets nothing that still counts); and a
/// generation that reaches `capacity` keys rotates early, so at most `2 × capacity` keys are held. An
/// attacker spraying more than `capacity` keys within one period makes the limiter forget the oldest keys
/// early (they start over, as if their period had passed) — it never refuses a key for lack of room.
///
/// Thread-safe; one short critical section per call. The limits are per process.
final class RateLimiter: Sendable {
    /// What a call answers.
    enum Verdict: Sendable, Equatable {
        /// The event is within the limit.
        case allowed
        /// Over the limit: wait `retryAfter` whole seconds (≥ 1). `firstInWindow` is true for the first
        /// refusal of this key in a period, so that callers log a flood once, not once per request.
        case limited(retryAfter: Int, firstInWindow: Bool)
    }

    private struct Entry {
        /// The theoretical arrival time, in seconds since 1970.
        var tat: Double
        /// Refusals before this instant are not the first of their window.
        var quietUntil: Double
    }

    private struct State {
        var current: [String: Entry] = [:]
        var previous: [String: Entry] = [:]
        var rotatedAt: Double
    }

    /// The limit enforced.
    let rate: RateLimit
    /// Keys per generation before it rotates early.
    let capacity: Int
    private let interval: Double
    private let state: Mutex<State>

    /// A limiter of `rate` (limit ≥ 1, period > 0) holding at most `2 × capacity` keys.
    init(_ rate: RateLimit, capacity: Int = 100_000) {
        precondition(rate.limit >= 1 && rate.period > 0 && capacity >= 1, "invalid rate limit")
        self.rate = rate
        self.capacity = capacity
        self.interval = rate.period / Double(rate.limit)
        self.state = Mutex(State(rotatedAt: -.infinity))
    }

    /// Counts one event of `key` at `now` if it is within the limit; refuses it (counting nothing) if not.
    func acquire(_ key: String, now: Date) -> Verdict { decide(key, now: now, consume: true) }

    /// Whether an event of `key` would be allowed at `now`, counting nothing (for limits on failures: check
    /// first, ``record(_:now:)`` on failure).
    func check(_ key: String, now: Date) -> Verdict { decide(key, now: now, consume: false) }

    /// Counts one event of `key` (a failure), even beyond the limit: its `tat` never moves more than one
    /// `period` ahead, so a key that keeps failing waits at most `period` once it stops.
    func record(_ key: String, now: Date) {
        let time = now.timeIntervalSince1970
        let dropped = state.withLock { state -> Dropped in
            let dropped = rotate(&state, at: time)
            var entry = take(key, from: &state) ?? Entry(tat: time, quietUntil: -.infinity)
            entry.tat = min(max(entry.tat, time) + interval, time + rate.period)
            state.current[key] = entry
            return dropped
        }
        _ = dropped  // released here, outside the lock
    }

    /// Keys held (both generations), for tests of the memory bound.
    var count: Int { state.withLock { $0.current.count + $0.previous.count } }

    private func decide(_ key: String, now: Date, consume: Bool) -> Verdict {
        let time = now.timeIntervalSince1970
        let (verdict, dropped) = state.withLock { state -> (Verdict, Dropped) in
            let dropped = rotate(&state, at: time)
            let existing = take(key, from: &state)
            var entry = existing ?? Entry(tat: time, quietUntil: -.infinity)
            let tat = max(entry.tat, time)
            let allowedAt = tat + interval - rate.period
            let verdict: Verdict
            if allowedAt <= time {
                if consume { entry.tat = tat + interval }
                verdict = .allowed
            } else {
                let first = time >= entry.quietUntil
                if first { entry.quietUntil = time + rate.period }
                verdict = .limited(retryAfter: max(1, Int(saturating: allowedAt - time, rounding: .up)), firstInWindow: first)
            }
            if existing != nil || consume || verdict != .allowed { state.current[key] = entry }
            return (verdict, dropped)
        }
        _ = dropped  // released here, outside the lock
        return verdict
    }

    /// The entry of `key`, removed from whichever generation holds it (the caller puts it in the current one).
    private func take(_ key: String, from state: inout State) -> Entry? {
        state.current.removeValue(forKey: key) ?? state.previous.removeValue(forKey: key)
    }

    /// Starts a new generation when the current one is a period old or full; returns the generations
    /// dropped, for the caller to release outside the lock.
    private func rotate(_ state: inout State, at time: Double) -> Dropped {
        guard time - state.rotatedAt >= rate.period || state.current.count >= capacity else { return Dropped() }
        var dropped = Dropped(older: state.previous)
        if time - state.rotatedAt >= 2 * rate.period {
            // No call since a period after the last rotation: the current generation has expired too.
            dropped.newer = state.current
            state.previous = [:]
        } else {
            state.previous = state.current
        }
        state.current = [:]
        state.rotatedAt = time
        return dropped
    }

    /// Generations dropped by a rotation.
    private struct Dropped {
        var older: [String: Entry] = [:]
        var newer: [String: Entry] = [:]
    }
}
