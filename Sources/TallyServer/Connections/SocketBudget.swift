import Foundation
import HummingbirdCore
import Logging
import TallyAPI
import TallyStore

/// Stops a listener from accepting while it holds `budget` sockets (admitted or being refused), so that
/// `accept` never runs into the open-file limit; accepting resumes as soon as one closes.
///
/// Why not let `accept` fail: NIO keeps the listening socket's pending read armed after an `EMFILE`, so
/// the event loop wakes at once, fails again and spins at 100 % CPU (its `AcceptBackoffHandler` only
/// delays the next read request, and there is none while one is pending). Meanwhile the backlog fills
/// with connections that are never served. Connects beyond the budget wait in the kernel's backlog.
///
/// Runs on the listening socket's event loop (Hummingbird's `AvailableConnectionsChannelHandler`).
/// Pauses are logged at most once per ``ConnectionLimiter/logInterval`` of the injected clock.
struct SocketBudget: AvailableConnectionsDelegate {
    let listener: String
    let budget: Int
    let clock: any TallyClock
    let logger: Logger
    private var open = 0
    private var lastLog: Date?

    init(listener: String, budget: Int, clock: any TallyClock, logger: Logger) {
        self.listener = listener
        self.budget = budget
        self.clock = clock
        self.logger = logger
    }

    mutating func connectionOpened() {
        open += 1
        guard open >= budget else { return }
        let now = clock.now
        if let lastLog, now.timeIntervalSince(lastLog) < ConnectionLimiter.logInterval { return }
        lastLog = now
        logger.warning(
            "accepting paused: the listener holds as many sockets as the open-file limit allows",
            metadata: ["listener": .string(listener), "sockets": .stringConvertible(open)])
    }

    mutating func connectionClosed() {
        open -= 1
    }

    func isAcceptingNewConnections() -> Bool {
        open < budget
    }
}
