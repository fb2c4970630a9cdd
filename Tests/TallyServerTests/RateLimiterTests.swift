import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// The GCRA limiter on a manual clock: bursts, the sustained rate, recovery, logging once, bounded memory.
@Suite("Rate limiter", .timeLimit(.minutes(1)))
struct RateLimiterTests {
    let clock = ManualClock()

    @Test("A burst of `limit`, then one per period/limit, then whole recovery after a period")
    func burstAndRecovery() {
        let limiter = RateLimiter(RateLimit(3, per: 60))
        for _ in 0..<3 { #expect(limiter.acquire("a", now: clock.now) == .allowed) }
        #expect(limiter.acquire("a", now: clock.now) == .limited(retryAfter: 20, firstInWindow: true))
        #expect(limiter.acquire("a", now: clock.now) == .limited(retryAfter: 20, firstInWindow: false), "logged once")
        #expect(limiter.acquire("b", now: clock.now) == .allowed, "keys are independent")
        clock.advance(by: 19.5)
        #expect(limiter.acquire("a", now: clock.now) == .limited(retryAfter: 1, firstInWindow: false), "Retry-After rounds up")
        clock.advance(by: 0.5)
        #expect(limiter.acquire("a", now: clock.now) == .allowed, "one more after period/limit")
        #expect(limiter.acquire("a", now: clock.now) == .limited(retryAfter: 20, firstInWindow: false))
        clock.advance(by: 60)
        for _ in 0..<3 { #expect(limiter.acquire("a", now: clock.now) == .allowed, "a whole burst after a period") }
        #expect(limiter.acquire("a", now: clock.now) == .limited(retryAfter: 20, firstInWindow: true), "a new window logs again")
    }

    @Test("check counts nothing; record counts failures, and a key that keeps failing waits at most a period")
    func checkAndRecord() {
        let limiter = RateLimiter(RateLimit(2, per: 10))
        for _ in 0..<5 { #expect(limiter.check("k", now: clock.now) == .allowed) }
        limiter.record("k", now: clock.now)
        #expect(limiter.check("k", now: clock.now) == .allowed)
        limiter.record("k", now: clock.now)
        #expect(limiter.check("k", now: clock.now) == .limited(retryAfter: 5, firstInWindow: true))
        for _ in 0..<100 { limiter.record("k", now: clock.now) }
        #expect(limiter.check("k", now: clock.now) == .limited(retryAfter: 5, firstInWindow: false), "capped at a period ahead")
        clock.advance(by: 10)
        #expect(limiter.check("k", now: clock.now) == .allowed)
        #expect(limiter.count == 1)
    }

    @Test("Expired keys are dropped within two periods; a spray of keys is bounded by the capacity")
    func boundedMemory() {
        let limiter = RateLimiter(RateLimit(1, per: 60), capacity: 100)
        for index in 0..<1_000 { _ = limiter.acquire("spray-\(index)", now: clock.now) }
        #expect(limiter.count <= 200, "\(limiter.count) keys held")
        clock.advance(by: 60)
        _ = limiter.acquire("late", now: clock.now)
        clock.advance(by: 60)
        _ = limiter.acquire("later", now: clock.now)
        #expect(limiter.count == 2, "only the keys of the last two periods are held: \(limiter.count)")
        clock.advance(by: 121)
        _ = limiter.acquire("last", now: clock.now)
        #expect(limiter.count == 1)
    }

    @Test("A key used within the period survives rotations: it is never forgotten while it still counts")
    func rotationKeepsLiveKeys() {
        let limiter = RateLimiter(RateLimit(2, per: 60))
        _ = limiter.acquire("a", now: clock.now)
        _ = limiter.acquire("a", now: clock.now)
        for _ in 0..<5 {
            clock.advance(by: 30)
            #expect(limiter.acquire("a", now: clock.now) == .allowed)
            guard case .limited(30, _) = limiter.acquire("a", now: clock.now) else {
                Issue.record("the key was forgotten by a rotation")
                return
            }
        }
    }
}
