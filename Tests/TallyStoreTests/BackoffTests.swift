import Foundation
import TallyStore
import Testing

@Suite("Backoff")
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

/// A seeded generator, so a failure names inputs that reproduce it.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
