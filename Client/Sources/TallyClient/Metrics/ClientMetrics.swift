import Foundation
import Metrics

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

    private let state = Locked(State())
    private let exporter: MetricsExporter?

    /// `exportLabel` non-nil: also record through swift-metrics with that label prefix, e.g. "tally_client",
    /// using `factory` (the bootstrapped `MetricsSystem.factory` by default).
    public init(exportLabel: String? = "tally_client", factory: any MetricsFactory = MetricsSystem.factory) {
        exporter = exportLabel.map { MetricsExporter(prefix: $0, factory: factory) }
    }

    /// Records one attempt of `operation` that took `duration` seconds; `status` nil means the transport failed.
    public func recordRequest(operation: String, status: Int?, duration: TimeInterval) {
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

    /// Records that `count` calls of `operation` joined one already in flight (the caller that started
    /// a shared call counts all who joined it at once, rather than each of them taking the lock).
    public func recordCoalesced(operation: String, count: Int = 1) {
        state.withLock { $0.coalesced += count }
        exporter?.count("coalesced_total", operation: operation, by: count)
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
