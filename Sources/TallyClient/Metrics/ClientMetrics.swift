import Foundation
import Metrics
import Synchronization

/// What the SDK did: requests by operation with latency percentiles, retries, coalescing and cache use.
///
/// Holds no personal data: operations are route templates such as `"GET /v1/wallet"`, never ids or tokens.
public final class ClientMetrics: Sendable {
    private struct OperationStats {
        var histogram = LatencyHistogram()
        var failures = 0
    }

    private struct State {
        var operations: [String: OperationStats] = [:]
        var cacheHits = 0
        var cacheMisses = 0
        var notModified = 0
        var coalesced = 0
        var retried = 0
    }

    private let state = Mutex(State())
    private let exporter: MetricsExporter?

    /// `exportLabel` non-nil: also record through swift-metrics with that label prefix, e.g. "tally_client",
    /// using `factory` (the bootstrapped `MetricsSystem.factory` by default).
    public init(exportLabel: String? = "tally_client", factory: any MetricsFactory = MetricsSystem.factory) {
        exporter = exportLabel.map { MetricsExporter(prefix: $0, factory: factory) }
    }

    /// Records one attempt of `operation`; `status` nil means the transport failed.
    public func recordRequest(operation: String, status: Int?, duration: Duration) {
        state.withLock { state in
            state.operations[operation, default: OperationStats()].histogram.record(duration)
            if status.map({ $0 >= 500 }) ?? true { state.operations[operation]?.failures += 1 }
        }
        exporter?.request(operation: operation, status: status, duration: duration)
    }

    /// Records that an attempt of `operation` failed and is being retried.
    public func recordRetry(operation: String) {
        state.withLock { $0.retried += 1 }
        exporter?.count("retries_total", operation: operation)
    }

    /// Records that a call of `operation` joined one already in flight.
    public func recordCoalesced(operation: String) {
        state.withLock { $0.coalesced += 1 }
        exporter?.count("coalesced_total", operation: operation)
    }

    /// Records a read answered from the cache.
    public func recordCacheHit() {
        state.withLock { $0.cacheHits += 1 }
        exporter?.count("cache_hits_total")
    }

    /// Records a read the cache could not answer.
    public func recordCacheMiss() {
        state.withLock { $0.cacheMisses += 1 }
        exporter?.count("cache_misses_total")
    }

    /// Records a 304 revalidation.
    public func recordNotModified() {
        state.withLock { $0.notModified += 1 }
        exporter?.count("not_modified_total")
    }

    /// A snapshot of everything recorded since creation or the last ``reset()``.
    public func summary() -> MetricsSummary {
        state.withLock { state in
            let operations = state.operations.map { name, stats in
                MetricsSummary.Operation(
                    name: name, count: stats.histogram.count, failures: stats.failures,
                    p50Milliseconds: stats.histogram.quantileMicroseconds(0.50) / 1000,
                    p90Milliseconds: stats.histogram.quantileMicroseconds(0.90) / 1000,
                    p99Milliseconds: stats.histogram.quantileMicroseconds(0.99) / 1000,
                    maxMilliseconds: stats.histogram.maxMicroseconds / 1000)
            }
            let reads = state.cacheHits + state.cacheMisses
            return MetricsSummary(
                operations: operations.sorted { $0.name < $1.name },
                cacheHits: state.cacheHits, cacheMisses: state.cacheMisses,
                cacheHitRate: reads == 0 ? 0 : Double(state.cacheHits) / Double(reads),
                notModified: state.notModified, coalesced: state.coalesced, retried: state.retried)
        }
    }

    /// Forgets everything recorded (exported metrics are not affected).
    public func reset() {
        state.withLock { $0 = State() }
    }
}

/// Forwards to swift-metrics, creating each Counter and Timer once per label set.
private final class MetricsExporter: Sendable {
    private struct Key: Hashable {
        let name: String
        let operation: String?
        let status: String?
    }

    private let prefix: String
    private let factory: any MetricsFactory
    private let counters = Mutex<[Key: Counter]>([:])
    private let timers = Mutex<[String: Metrics.Timer]>([:])

    init(prefix: String, factory: any MetricsFactory) {
        self.prefix = prefix
        self.factory = factory
    }

    func request(operation: String, status: Int?, duration: Duration) {
        counter(Key(name: "requests_total", operation: operation, status: status.map(String.init) ?? "transport_error")).increment()
        timer(operation).recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    func count(_ name: String, operation: String? = nil) {
        counter(Key(name: name, operation: operation, status: nil)).increment()
    }

    private func counter(_ key: Key) -> Counter {
        counters.withLock { counters in
            if let existing = counters[key] { return existing }
            var dimensions: [(String, String)] = []
            if let operation = key.operation { dimensions.append(("operation", operation)) }
            if let status = key.status { dimensions.append(("status", status)) }
            let made = Counter(label: "\(prefix)_\(key.name)", dimensions: dimensions, factory: factory)
            counters[key] = made
            return made
        }
    }

    private func timer(_ operation: String) -> Metrics.Timer {
        timers.withLock { timers in
            if let existing = timers[operation] { return existing }
            let made = Metrics.Timer(label: "\(prefix)_request_duration_seconds", dimensions: [("operation", operation)], factory: factory)
            timers[operation] = made
            return made
        }
    }
}

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

    /// Records one duration.
    mutating func record(_ duration: Duration) {
        let micros = Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
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

/// A snapshot of ``ClientMetrics``: per-operation latency and failures, cache use, coalescing and retries.
public struct MetricsSummary: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The attempts of one operation (a route template).
    public struct Operation: Sendable, Hashable, Codable {
        /// The route template, e.g. `"GET /v1/wallet"`.
        public var name: String
        /// Attempts recorded.
        public var count: Int
        /// Attempts that failed in transport or with a status of 500 or more.
        public var failures: Int
        /// Median latency.
        public var p50Milliseconds: Double
        /// 90th percentile latency.
        public var p90Milliseconds: Double
        /// 99th percentile latency.
        public var p99Milliseconds: Double
        /// Slowest attempt (exact).
        public var maxMilliseconds: Double

        /// Creates an operation summary.
        public init(
            name: String, count: Int, failures: Int, p50Milliseconds: Double, p90Milliseconds: Double, p99Milliseconds: Double,
            maxMilliseconds: Double
        ) {
            self.name = name
            self.count = count
            self.failures = failures
            self.p50Milliseconds = p50Milliseconds
            self.p90Milliseconds = p90Milliseconds
            self.p99Milliseconds = p99Milliseconds
            self.maxMilliseconds = maxMilliseconds
        }
    }

    /// Every operation seen, sorted by name.
    public var operations: [Operation]
    /// Reads answered from the cache.
    public var cacheHits: Int
    /// Reads the cache could not answer.
    public var cacheMisses: Int
    /// Hits over all reads; 0 when there were no reads.
    public var cacheHitRate: Double
    /// 304 revalidations.
    public var notModified: Int
    /// Calls that joined one already in flight.
    public var coalesced: Int
    /// Attempts that were retried.
    public var retried: Int

    /// Creates a summary.
    public init(
        operations: [Operation], cacheHits: Int, cacheMisses: Int, cacheHitRate: Double, notModified: Int, coalesced: Int, retried: Int
    ) {
        self.operations = operations
        self.cacheHits = cacheHits
        self.cacheMisses = cacheMisses
        self.cacheHitRate = cacheHitRate
        self.notModified = notModified
        self.coalesced = coalesced
        self.retried = retried
    }

    /// A small readable table, one line per operation, then the counters.
    public var description: String {
        var lines = [Self.row("operation", "count", "fail", "p50 ms", "p90 ms", "p99 ms", "max ms")]
        for op in operations {
            lines.append(
                Self.row(
                    op.name, String(op.count), String(op.failures), Self.ms(op.p50Milliseconds), Self.ms(op.p90Milliseconds),
                    Self.ms(op.p99Milliseconds), Self.ms(op.maxMilliseconds)))
        }
        let rate = String(format: "%.1f%%", cacheHitRate * 100)
        lines.append("cache: \(cacheHits) hits, \(cacheMisses) misses (\(rate)), \(notModified) not modified")
        lines.append("coalesced: \(coalesced), retried: \(retried)")
        return lines.joined(separator: "\n")
    }

    private static func ms(_ value: Double) -> String { String(format: "%.1f", value) }

    private static func row(_ name: String, _ columns: String...) -> String {
        let padded = name.count >= 32 ? name : name + String(repeating: " ", count: 32 - name.count)
        return padded + columns.map { String(repeating: " ", count: max(0, 9 - $0.count)) + $0 }.joined()
    }
}
