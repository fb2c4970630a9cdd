import Foundation
import Logging
import Synchronization
import TallyAPI
import TallyStore

/// Logs the requests answered `503` because the store was unavailable (the database down, a connection lost,
/// no connection free in time) at `warning`, with the cause — the store's failure without values (a SQLSTATE,
/// a pool failure) — at most once per ``interval`` of the injected clock, with how many more there were since
/// the last line: an outage must show up at the default log level, and must not become a flood of lines.
final class UnavailableLog: Sendable {
    /// The least time between two lines.
    static let interval: TimeInterval = 10

    private struct State {
        var lastLog: Date?
        var unlogged = 0
    }

    private let clock: any TallyClock
    private let state = Mutex(State())

    /// A log paced by `clock`.
    init(clock: any TallyClock) { self.clock = clock }

    /// Notes one `503` for `error`; writes a line through `logger` unless one was written less than ``interval`` ago.
    func record(_ error: StoreError, logger: Logger) {
        let now = clock.now
        let unlogged: Int? = state.withLock { state in
            if let last = state.lastLog, now.timeIntervalSince(last) < Self.interval {
                state.unlogged += 1
                return nil
            }
            defer { state = State(lastLog: now, unlogged: 0) }
            return state.unlogged
        }
        guard let unlogged else { return }
        logger.warning("store unavailable: answering 503", metadata: [
            "error": "\(error.underlying.map { "\($0)" } ?? "-")", "unavailable.unlogged": "\(unlogged)",
        ])
    }
}
