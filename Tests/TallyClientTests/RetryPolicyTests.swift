import Foundation
import TallyClient
import TallyTestSupport
import Testing

@Suite(.timeLimit(.minutes(1))) struct RetryPolicyTests {
    let policy = RetryPolicy()

    /// The delay after attempt 1 with unitRandom 0.5 (jittered part 0.5 s), or nil.
    func decide(_ failure: AttemptFailure, safe: Bool) -> TimeInterval? {
        policy.delay(afterAttempt: 1, failure: failure, safeToRetry: safe, unitRandom: 0.5)
    }

    struct Rule: Sendable, CustomTestStringConvertible {
        let failure: AttemptFailure
        let whenSafe: Bool
        let whenUnsafe: Bool
        var testDescription: String { "\(failure)" }
    }

    static let rules: [Rule] = [
        Rule(failure: .transport(.offline), whenSafe: true, whenUnsafe: true),
        Rule(failure: .transport(.timedOut), whenSafe: true, whenUnsafe: false),
        Rule(failure: .transport(.connectionLost), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(408, code: nil, retryAfter: nil), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(500, code: "internal", retryAfter: nil), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(502, code: nil, retryAfter: nil), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(503, code: "unavailable", retryAfter: nil), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(503, code: "unavailable", retryAfter: 1), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(504, code: nil, retryAfter: nil), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(429, code: "rate_limited", retryAfter: 2), whenSafe: true, whenUnsafe: true),
        Rule(failure: .status(429, code: "rate_limited", retryAfter: nil), whenSafe: true, whenUnsafe: true),
        Rule(failure: .status(409, code: "idempotency_key_in_use", retryAfter: nil), whenSafe: true, whenUnsafe: false),
        Rule(failure: .status(409, code: "idempotency_mismatch", retryAfter: nil), whenSafe: false, whenUnsafe: false),
        Rule(failure: .status(400, code: "invalid_json", retryAfter: nil), whenSafe: false, whenUnsafe: false),
        Rule(failure: .status(401, code: "unauthorized", retryAfter: nil), whenSafe: false, whenUnsafe: false),
        Rule(failure: .status(402, code: "insufficient_tokens", retryAfter: nil), whenSafe: false, whenUnsafe: false),
        Rule(failure: .status(404, code: "not_found", retryAfter: nil), whenSafe: false, whenUnsafe: false),
        Rule(failure: .status(422, code: nil, retryAfter: 1), whenSafe: false, whenUnsafe: false),
        Rule(failure: .status(501, code: nil, retryAfter: nil), whenSafe: false, whenUnsafe: false),
    ]

    @Test(arguments: rules) func retriesOnlyWhatIsSafe(_ rule: Rule) {
        #expect((decide(rule.failure, safe: true) != nil) == rule.whenSafe)
        #expect((decide(rule.failure, safe: false) != nil) == rule.whenUnsafe)
    }

    @Test func safetyDependsOnMethodAndKey() {
        #expect(RetryPolicy.isSafeToRetry(method: "GET", hasIdempotencyKey: false))
        #expect(RetryPolicy.isSafeToRetry(method: "head", hasIdempotencyKey: false))
        #expect(!RetryPolicy.isSafeToRetry(method: "POST", hasIdempotencyKey: false))
        #expect(!RetryPolicy.isSafeToRetry(method: "PATCH", hasIdempotencyKey: false))
        #expect(!RetryPolicy.isSafeToRetry(method: "DELETE", hasIdempotencyKey: false))
        #expect(RetryPolicy.isSafeToRetry(method: "POST", hasIdempotencyKey: true))
        #expect(RetryPolicy.isSafeToRetry(method: "DELETE", hasIdempotencyKey: true))
    }

    @Test func postWithoutKeyIsNeverRetriedAfterConnectionLostButIsWhenOffline() {
        let safe = RetryPolicy.isSafeToRetry(method: "POST", hasIdempotencyKey: false)
        for attempt in 1..<3 {
            #expect(policy.delay(afterAttempt: attempt, failure: .transport(.connectionLost), safeToRetry: safe, unitRandom: 0.3) == nil)
            #expect(policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: safe, unitRandom: 0.3) != nil)
        }
    }

    @Test func stopsAtMaxAttempts() {
        #expect(policy.delay(afterAttempt: 2, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.5) != nil)
        #expect(policy.delay(afterAttempt: 3, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.5) == nil)
        #expect(policy.delay(afterAttempt: 4, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.5) == nil)
        #expect(RetryPolicy.none.delay(afterAttempt: 1, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.5) == nil)
    }

    /// `count` delays after attempt number `attempt` failed offline, one per uniform draw of a generator seeded with `seed`.
    func jittered(_ policy: RetryPolicy, attempt: Int, seed: UInt64, count: Int = 1_000) -> [TimeInterval] {
        var random = SplitMix64(seed: seed)
        return (0..<count).compactMap { _ in
            policy.delay(
                afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true,
                unitRandom: Double.random(in: 0..<1, using: &random))
        }
    }

    @Test func fullJitterStaysWithinTheExponentialCeiling() {
        let policy = RetryPolicy(maxAttempts: 10)
        for attempt in 1...5 {
            let ceiling = Double(1 << (attempt - 1))  // 1, 2, 4, 8, 16 s
            let low = policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true, unitRandom: 0)
            let high = policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.999)
            #expect(low == .zero)
            #expect(high! < ceiling)
            #expect(high! > 0.99 * ceiling)  // the highest draw waits nearly the whole ceiling
            // Bounds and spread over many draws: uniform in [0, ceiling), neither clustered nor shifted (equal
            // jitter, ceiling/2 plus a random half, never waits under half the ceiling).
            let delays = jittered(policy, attempt: attempt, seed: 0x5EED + UInt64(attempt))
            #expect(delays.count == 1_000)
            #expect(delays.allSatisfy { $0 >= 0 && $0 < ceiling })
            #expect(delays.min()! < 0.05 * ceiling && delays.max()! > 0.95 * ceiling)
            #expect(abs(delays.reduce(0, +) / Double(delays.count) - ceiling / 2) < 0.05 * ceiling)
            #expect((400...600).contains(delays.count { $0 < ceiling / 2 }))
        }
    }

    @Test func aLargerDrawNeverWaitsLess() {
        let policy = RetryPolicy(maxAttempts: 10)
        var random = SplitMix64(seed: 7)
        let draws = (0..<500).map { _ in Double.random(in: 0..<1, using: &random) }.sorted()
        for attempt in 1...6 {
            let delays = draws.compactMap {
                policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true, unitRandom: $0)
            }
            #expect(delays.count == draws.count)
            #expect(zip(delays, delays.dropFirst()).allSatisfy { $0 <= $1 })
        }
    }

    @Test func theCeilingGrowsWithEachFailureUpToTheCap() throws {
        let policy = RetryPolicy(maxAttempts: 1_000, baseDelay: 0.5, multiplier: 3, maxDelay: 10)
        let highest = (1..<1_000).compactMap {
            policy.delay(afterAttempt: $0, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.999)
        }
        try #require(highest.count == 999)
        #expect(highest[0] < highest[1] && highest[1] < highest[2])  // grows below the cap
        #expect(zip(highest, highest.dropFirst()).allSatisfy { $0 <= $1 })  // never shrinks
        // Never above the cap, even where the exponential part overflows to infinity; and it reaches the cap.
        #expect(highest.allSatisfy { $0.isFinite && $0 < 10 })
        #expect(highest.last! > 9.9)
    }

    @Test func theSameDrawsGiveTheSameDelays() {
        let policy = RetryPolicy(maxAttempts: 10)
        for attempt in 1...5 {
            let first = jittered(policy, attempt: attempt, seed: 42)
            #expect(first == jittered(policy, attempt: attempt, seed: 42))  // the delay depends on the draw alone
            #expect(first != jittered(policy, attempt: attempt, seed: 43))  // and does depend on it
        }
    }

    @Test func exponentialPartIsCapped() {
        let policy = RetryPolicy(maxAttempts: 100, baseDelay: 0.5, multiplier: 3, maxDelay: 10)
        #expect(policy.delay(afterAttempt: 2, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.5) == 0.75)
        for attempt in [4, 10, 60, 99] {
            let delay = policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.5)
            #expect(delay == 5)
        }
    }

    @Test func retryAfterIsNeverShortened() {
        let rateLimited = AttemptFailure.status(429, code: "rate_limited", retryAfter: 7)
        #expect(policy.delay(afterAttempt: 1, failure: rateLimited, safeToRetry: false, unitRandom: 0) == 7)
        #expect(policy.delay(afterAttempt: 1, failure: rateLimited, safeToRetry: false, unitRandom: 0.999) == 7)
        // The jittered delay wins when it is longer.
        let shortWait = AttemptFailure.status(503, code: "unavailable", retryAfter: 0.25)
        #expect(policy.delay(afterAttempt: 2, failure: shortWait, safeToRetry: true, unitRandom: 0.5) == 1)
        #expect(policy.delay(afterAttempt: 2, failure: shortWait, safeToRetry: true, unitRandom: 0) == 0.25)
    }

    @Test func tooLongRetryAfterStops() {
        #expect(policy.delay(afterAttempt: 1, failure: .status(429, code: nil, retryAfter: 60), safeToRetry: true, unitRandom: 0) == 60)
        #expect(policy.delay(afterAttempt: 1, failure: .status(429, code: nil, retryAfter: 61), safeToRetry: true, unitRandom: 0) == nil)
        #expect(policy.delay(afterAttempt: 1, failure: .status(503, code: nil, retryAfter: 3600), safeToRetry: true, unitRandom: 0) == nil)
        let patient = RetryPolicy(maxRetryAfter: 3600)
        #expect(patient.delay(afterAttempt: 1, failure: .status(503, code: nil, retryAfter: 3600), safeToRetry: true, unitRandom: 0) == 3600)
    }
}
