import Foundation

/// A fixed-size log-linear histogram of durations from 1 µs to about 17 min: each power of two is split
/// into 32 linear buckets, so a percentile read from it is within about 1.6% of the exact value
/// (every value is also clamped to the observed minimum and maximum). Memory is constant: 960 counters.
struct LatencyHistogram: Sendable, Hashable {
    private static let subBuckets = 32
    private static let octaves = 30  // 2^30 µs ≈ 17.9 min
    private var counts = [Int](repeating: 0, count: subBuckets * octaves)
    /// How many values were recorded.
    private(set) var count = 0
    /// The smallest and largest values recorded, in microseconds.
    private(set) var minMicroseconds = Double.infinity
    private(set) var maxMicroseconds = 0.0

    /// Records one duration, in seconds.
    mutating func record(_ seconds: TimeInterval) {
        let micros = seconds * 1e6
        count += 1
        minMicroseconds = min(minMicroseconds, micros)
        maxMicroseconds = max(maxMicroseconds, micros)
        counts[Self.index(of: micros)] += 1
    }

    /// The value at quantile `q` (0...1, nearest rank), in microseconds; 0 when empty.
    func quantileMicroseconds(_ q: Double) -> Double {
        guard count > 0 else { return 0 }
        let rank = max(1, Int((q * Double(count)).rounded(.up)))
        var seen = 0
        for (index, bucketCount) in counts.enumerated() where bucketCount > 0 {
            seen += bucketCount
            if seen >= rank { return min(max(Self.midpoint(of: index), minMicroseconds), maxMicroseconds) }
        }
        return maxMicroseconds
    }

    private static func index(of micros: Double) -> Int {
        let clamped = min(max(micros, 1), Double(1 << octaves) - 1)
        let octave = Int(clamped.exponent)
        let fraction = clamped / Double(1 << octave) - 1  // [0, 1)
        return octave * subBuckets + min(Int(fraction * Double(subBuckets)), subBuckets - 1)
    }

    private static func midpoint(of index: Int) -> Double {
        let octave = index / subBuckets
        let sub = index % subBuckets
        return Double(1 << octave) * (1 + (Double(sub) + 0.5) / Double(subBuckets))
    }
}
