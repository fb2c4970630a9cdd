import Foundation
import TallyClient
import Testing

@Suite struct RetryPolicyTests {
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

    @Test func fullJitterStaysWithinTheExponentialCeiling() {
        let policy = RetryPolicy(maxAttempts: 10)
        for attempt in 1...5 {
            let ceiling = Double(1 << (attempt - 1))  // 1, 2, 4, 8, 16 s
            let low = policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true, unitRandom: 0)
            let high = policy.delay(afterAttempt: attempt, failure: .transport(.offline), safeToRetry: true, unitRandom: 0.999)
            #expect(low == .zero)
            #expect(high == 0.999 * ceiling)
            #expect(high! < ceiling)
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
