import Foundation

/// How long to wait before attempt `attempt + 1` after `attempt` failures in a row (pure, so tests check
/// its bounds without sleeping): `first` doubling up to `maximum`, of which the upper half is random (`unit`
/// in [0, 1)) so that processes failing together do not retry in step.
///
/// The PostgreSQL pool reconnects on it (50 ms to 1 s: an attempt against a database that is down costs a
/// refused TCP connect, and the sooner one succeeds after it returns, the sooner requests do) and the stores
/// run a transaction again on it after a deadlock or serialization failure (8 ms to 64 ms).
public func backoffDelay(attempt: Int, first: TimeInterval, maximum: TimeInterval, unit: Double) -> TimeInterval {
    let ceiling = min(first * Double(1 << min(max(attempt - 1, 0), 30)), maximum)
    return ceiling / 2 + (ceiling / 2) * min(max(unit, 0), 1)
}
