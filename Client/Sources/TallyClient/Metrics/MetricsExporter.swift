import Foundation
import Metrics

/// Forwards to swift-metrics, creating each Counter and Timer once per label set.
final class MetricsExporter: Sendable {
    private struct Key: Hashable {
        let name: String
        let operation: String?
        let status: String?
    }

    private let prefix: String
    private let factory: any MetricsFactory
    private let counters = Locked<[Key: Counter]>([:])
    private let timers = Locked<[String: Metrics.Timer]>([:])

    /// Exports under labels starting with `prefix`, e.g. `tally_client_requests_total`.
    init(prefix: String, factory: any MetricsFactory) {
        self.prefix = prefix
        self.factory = factory
    }

    /// One attempt: counted by operation and status, timed by operation.
    func request(operation: String, status: Int?, duration: TimeInterval) {
        counter(Key(name: "requests_total", operation: operation, status: status.map(String.init) ?? "transport_error")).increment()
        timer(operation).recordNanoseconds(Int64((duration * 1e9).rounded()))
    }

    /// Adds `amount` to the counter `name` (per operation, when given).
    func count(_ name: String, operation: String? = nil, by amount: Int = 1) {
        counter(Key(name: name, operation: operation, status: nil)).increment(by: amount)
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
