import Foundation
import TallyClient
import Testing

@Suite(.timeLimit(.minutes(1))) struct ClientMetricsTests {
    /// `value` is within 3% of `exact`.
    private func close(_ value: Double, _ exact: Double) -> Bool { abs(value - exact) <= 0.03 * exact }

    @Test func percentilesAreWithinThreePercent() throws {
        let metrics = ClientMetrics(exportLabel: nil)
        // 1 ms … 1000 ms, shuffled: the nearest-rank p50 is 500 ms, p90 900 ms, p99 990 ms.
        for ms in (1...1000).shuffled() {
            metrics.recordRequest(operation: "GET /v1/wallet", status: 200, duration: Double(ms) / 1000)
        }
        let wallet = try #require(metrics.summary().operations.first)
        #expect(wallet.name == "GET /v1/wallet")
        #expect(wallet.count == 1000)
        #expect(wallet.failures == 0)
        #expect(close(wallet.p50Milliseconds, 500), "p50 \(wallet.p50Milliseconds)")
        #expect(close(wallet.p90Milliseconds, 900), "p90 \(wallet.p90Milliseconds)")
        #expect(close(wallet.p99Milliseconds, 990), "p99 \(wallet.p99Milliseconds)")
        #expect(wallet.maxMilliseconds == 1000)
    }

    @Test(arguments: [0.000_003, 0.000_850, 0.047, 2.5, 420])
    func percentilesAcrossMicrosecondsToMinutes(_ sample: TimeInterval) throws {
        let metrics = ClientMetrics(exportLabel: nil)
        // 100 values spread over 10% above `sample`: the nearest-rank p50 is the 50th.
        for step in 0..<100 { metrics.recordRequest(operation: "op", status: 200, duration: sample * (1 + Double(step) / 1000)) }
        let op = try #require(metrics.summary().operations.first)
        let exact = sample * 1000 * 1.049
        #expect(close(op.p50Milliseconds, exact), "\(op.p50Milliseconds) vs \(exact)")
    }

    @Test func failuresAreTransportErrorsAndServerErrors() throws {
        let metrics = ClientMetrics(exportLabel: "tally_client_test")
        for status in [200, 304, 404, 429, 500, 503, nil] {
            metrics.recordRequest(operation: "POST /v1/actions/{name}", status: status, duration: 0.010)
        }
        metrics.recordRequest(operation: "GET /v1/wallet", status: 200, duration: 0.005)
        let summary = metrics.summary()
        #expect(summary.operations.map(\.name) == ["GET /v1/wallet", "POST /v1/actions/{name}"])
        #expect(summary.operations.map(\.count) == [1, 7])
        #expect(summary.operations.map(\.failures) == [0, 3])
    }

    @Test func hitRateCountersAndReset() {
        let metrics = ClientMetrics(exportLabel: nil)
        #expect(metrics.summary().cacheHitRate == 0)
        for _ in 0..<3 { metrics.recordCacheHit() }
        metrics.recordCacheMiss()
        metrics.recordNotModified()
        metrics.recordCoalesced(operation: "GET /v1/wallet")
        metrics.recordCoalesced(operation: "GET /v1/wallet", count: 3)  // a call shared with three followers
        metrics.recordRetry(operation: "GET /v1/wallet")
        metrics.recordRequest(operation: "GET /v1/wallet", status: 200, duration: 0.012)
        let summary = metrics.summary()
        #expect(summary.cacheHits == 3 && summary.cacheMisses == 1)
        #expect(summary.cacheHitRate == 0.75)
        #expect(summary.notModified == 1 && summary.coalesced == 4 && summary.retried == 1)
        #expect(summary.description.contains("GET /v1/wallet"))
        #expect(summary.description.contains("75.0%"))

        metrics.reset()
        let empty = metrics.summary()
        #expect(empty == MetricsSummary(operations: [], cacheHits: 0, cacheMisses: 0, cacheHitRate: 0, notModified: 0, coalesced: 0, retried: 0))
    }

    @Test func summaryRoundTripsThroughJSON() throws {
        let metrics = ClientMetrics(exportLabel: nil)
        metrics.recordRequest(operation: "GET /v1/quotas", status: 200, duration: 0.03)
        metrics.recordCacheHit()
        let summary = metrics.summary()
        let decoded = try JSONDecoder().decode(MetricsSummary.self, from: JSONEncoder().encode(summary))
        #expect(decoded == summary)
    }
}
