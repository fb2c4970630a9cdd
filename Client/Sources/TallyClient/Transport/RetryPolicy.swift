import Foundation

/// Why one attempt failed, as the retry policy sees it.
public enum AttemptFailure: Sendable, Hashable {
    /// No HTTP response arrived.
    case transport(TransportError)
    /// An HTTP error status, the server's error code if it sent one, and Retry-After in seconds if present.
    case status(Int, code: String?, retryAfter: TimeInterval?)
}

/// Exponential backoff with jitter (full by default), honouring Retry-After; retries only what is safe.
///
/// Pure: no I/O and no clock. The caller draws the random number and sleeps.
public struct RetryPolicy: Sendable, Hashable {
    /// How a wait is drawn under the backoff's ceiling.
    public enum Jitter: Sendable, Hashable {
        /// Anywhere from 0 to the ceiling: spreads a crowd of clients the most ("full jitter").
        case full
        /// From half the ceiling to the ceiling: still spread, but never an immediate retry, so the ceiling
        /// is the longest wait and half of it the shortest ("equal jitter").
        case equal
    }

    /// Attempts in all, including the first.
    public var maxAttempts: Int
    /// The backoff ceiling after the first failure.
    public var baseDelay: TimeInterval
    /// How much the ceiling grows after each further failure.
    public var multiplier: Double
    /// The cap of the exponential ceiling.
    public var maxDelay: TimeInterval
    /// The longest Retry-After worth waiting for; a longer one stops retrying (the caller surfaces `rateLimited`).
    public var maxRetryAfter: TimeInterval
    /// How each wait is drawn under the ceiling.
    public var jitter: Jitter

    /// Creates a policy.
    public init(
        maxAttempts: Int = 3, baseDelay: TimeInterval = 1, multiplier: Double = 2, maxDelay: TimeInterval = 30,
        maxRetryAfter: TimeInterval = 60, jitter: Jitter = .full
    ) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.jitter = jitter
    }

    /// No retries.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// Whether a request may be sent again without risk of doing its effect twice: GET/HEAD always;
    /// any other method only with an Idempotency-Key (the server deduplicates).
    public static func isSafeToRetry(method: String, hasIdempotencyKey: Bool) -> Bool {
        switch method.uppercased() {
        case "GET", "HEAD": true
        default: hasIdempotencyKey
        }
    }

    /// The wait in seconds before the next attempt after attempt number `attempt` (1-based) failed, or nil to stop.
    /// `unitRandom` is a uniform draw in [0, 1) supplied by the caller (tests pass fixed values).
    public func delay(afterAttempt attempt: Int, failure: AttemptFailure, safeToRetry: Bool, unitRandom: Double) -> TimeInterval? {
        guard attempt < maxAttempts else { return nil }
        let jittered = jitteredDelay(afterAttempt: attempt, unitRandom: unitRandom)
        switch failure {
        case .transport(.offline):
            return jittered
        case .transport(.timedOut), .transport(.connectionLost):
            return safeToRetry ? jittered : nil
        case .status(let status, let code, let retryAfter):
            guard Self.isRetryable(status: status, code: code, safeToRetry: safeToRetry) else { return nil }
            guard let retryAfter else { return jittered }
            let floor = max(0, retryAfter)
            guard floor <= maxRetryAfter else { return nil }
            return max(floor, jittered)
        }
    }

    /// Whether an error status may be retried. 429 is refused before the server acts, so it is safe for any request.
    private static func isRetryable(status: Int, code: String?, safeToRetry: Bool) -> Bool {
        switch status {
        case 429: true
        case 408, 500, 502, 503, 504: safeToRetry
        case 409: safeToRetry && code == "idempotency_key_in_use"
        default: false
        }
    }

    /// The ceiling `min(maxDelay, baseDelay × multiplier^(attempt−1))` times the draw: `unitRandom` (full jitter)
    /// or `(1 + unitRandom) / 2` (equal jitter).
    private func jitteredDelay(afterAttempt attempt: Int, unitRandom: Double) -> TimeInterval {
        let base = baseDelay
        let cap = maxDelay
        let exponential = base * pow(max(multiplier, 0), Double(max(attempt - 1, 0)))
        let ceiling = exponential.isFinite ? min(cap, exponential) : cap
        let random = unitRandom.isFinite ? min(max(unitRandom, 0), 1) : 0
        let share =
            switch jitter {
            case .full: random
            case .equal: (1 + random) / 2
            }
        return max(0, share * ceiling)
    }
}
