import Foundation
import TallyStore
import Testing

@Suite("Backoff", .timeLimit(.minutes(1)))
struct BackoffTests {
    @Test("Reconnect delays: the first within 50 ms, never shrinking, reaching but never passing the maximum, jittered")
    func reconnectDelays() {
        func delay(_ attempt: Int, maximum: TimeInterval = 1, _ unit: Double) -> TimeInterval {
            backoffDelay(attempt: attempt, first: 0.05, maximum: maximum, unit: unit)
        }
        var previousLow = 0.0
        for failures in 1...40 {
            let low = delay(failures, 0)
            let high = delay(failures, 0.999_999)
            #expect(low >= previousLow, "the lower bound never shrinks (failures \(failures))")
            #expect(low > 0 && high <= 1, "failures \(failures)")
            #expect(high - low >= low * 0.99, "at least half of each delay is random (failures \(failures))")
            previousLow = low
        }
        #expect(delay(1, 0.999_999) <= 0.05, "a database back at once is retried soon")
        #expect(delay(8, 1) == 1, "the maximum is reached")
        #expect(delay(3, maximum: 0.1, 1) == 0.1)
    }

    @Test("Any attempt count and any unit give a delay within [ceiling / 2, ceiling], the ceiling never above the maximum")
    func boundsHoldEverywhere() {
        var generator = SplitMix64(seed: 18)
        for _ in 0..<10_000 {
            let attempt = Int.random(in: -5...10_000, using: &generator)
            let unit = Double.random(in: -1...2, using: &generator)
            let first = Double.random(in: 0.001...1, using: &generator)
            let maximum = first * Double.random(in: 1...1_000, using: &generator)
            let delay = backoffDelay(attempt: attempt, first: first, maximum: maximum, unit: unit)
            #expect(delay >= min(first, maximum) / 2 && delay <= maximum, "attempt \(attempt), unit \(unit)")
        }
    }
}
