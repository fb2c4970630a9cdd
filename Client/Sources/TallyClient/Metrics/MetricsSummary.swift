import Foundation

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
