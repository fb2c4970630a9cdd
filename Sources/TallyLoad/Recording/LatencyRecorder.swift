import Foundation
import Histogram
import Synchronization

/// How one request ended, as the report counts it.
public enum Outcome: Sendable, Hashable, Codable {
    /// An HTTP status the scenario expects for this operation (2xx, 304, or an intended 4xx).
    case expected(Int)
    /// Any other status: an error.
    case unexpected(Int)
    /// No response after every retry.
    case failed(String)

    /// The label in the report: the status code, or the transport failure.
    public var label: String {
        switch self {
        case .expected(let status), .unexpected(let status): String(status)
        case .failed(let reason): reason
        }
    }

    /// Whether the report counts it as an error.
    public var isError: Bool {
        if case .expected = self { return false }
        return true
    }
}

/// Latency histograms (microseconds, HdrHistogram) and outcome counts per operation, plus a per-second
/// timeline; safe to record into from every user task.
public final class LatencyRecorder: Sendable {
    /// What one operation accumulated.
    public struct Operation: Sendable {
        /// Latencies in microseconds.
        public var histogram = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
        /// Requests by outcome label, and whether the label is an error.
        public var outcomes: [String: (count: Int, isError: Bool)] = [:]
        /// Transport failures that were retried.
        public var retries = 0
    }

    /// One second of the run.
    public struct Second: Sendable {
        /// Every request completed in this second.
        public var histogram = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .two)
        /// Errors in this second.
        public var errors = 0
    }

    private struct State {
        var measuredStart: ContinuousClock.Instant?
        var measuring = false
        var operations: [String: Operation] = [:]
        var unmeasured: [String: Operation] = [:]
        var seconds: [Second] = []
    }

    private let state = Mutex(State())

    /// A recorder; everything it records counts as set-up until ``startMeasuring(at:)``.
    public init() {}

    /// Operations scheduled from `start` on count in the measured phase and its timeline.
    public func startMeasuring(at start: ContinuousClock.Instant) {
        state.withLock {
            $0.measuredStart = start
            $0.measuring = true
        }
    }

    /// Operations scheduled from now on (the books check) no longer count as measured.
    public func stopMeasuring() { state.withLock { $0.measuring = false } }

    /// Records one request of `operation`, scheduled at `scheduled` and answered at `completed`.
    public func record(_ operation: String, scheduled: ContinuousClock.Instant, completed: ContinuousClock.Instant, outcome: Outcome) {
        let latency = completed - scheduled
        let micros = UInt64(max(0, latency.components.seconds * 1_000_000 + latency.components.attoseconds / 1_000_000_000_000))
        state.withLock { state in
            guard state.measuring, let start = state.measuredStart, scheduled >= start else {
                Self.add(micros, outcome, to: &state.unmeasured[operation, default: Operation()])
                return
            }
            Self.add(micros, outcome, to: &state.operations[operation, default: Operation()])
            let second = max(0, Int((completed - start).components.seconds))
            while state.seconds.count <= second { state.seconds.append(Second()) }
            state.seconds[second].histogram.record(micros)
            if outcome.isError { state.seconds[second].errors += 1 }
        }
    }

    private static func add(_ micros: UInt64, _ outcome: Outcome, to operation: inout Operation) {
        operation.histogram.record(micros)
        operation.outcomes[outcome.label, default: (0, outcome.isError)].count += 1
    }

    /// Counts one retried transport failure of `operation`.
    public func recordRetry(_ operation: String) {
        state.withLock { state in
            if state.measuring { state.operations[operation, default: Operation()].retries += 1 }
            else { state.unmeasured[operation, default: Operation()].retries += 1 }
        }
    }

    /// Operations of the measured phase, by name.
    public var operations: [String: Operation] { state.withLock { $0.operations } }

    /// Operations outside it (set-up, books check), by name.
    public var unmeasured: [String: Operation] { state.withLock { $0.unmeasured } }

    /// The measured phase's timeline, one entry per second.
    public var seconds: [Second] { state.withLock { $0.seconds } }
}
