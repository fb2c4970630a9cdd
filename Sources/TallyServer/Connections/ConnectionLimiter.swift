import Foundation
import Logging
import Synchronization
import TallyAPI
import TallyStore

/// Counts one listener's open connections, in total and per client address, and decides whether a new
/// one may stay. Called once when a connection opens and once when it closes, never per request.
///
/// Refusals are logged at most once per ``logInterval`` (of the injected clock), with how many there
/// were since the last line: a flood of refused connections must not become a flood of log lines.
/// Client addresses are never logged.
final class ConnectionLimiter: Sendable {
    /// Why a connection was refused.
    enum Refusal: Sendable, Hashable {
        /// The listener holds its maximum number of connections.
        case total
        /// The client's address holds its maximum number of connections.
        case perAddress
    }

    private struct State {
        var open = 0
        var openByAddress: [String: Int] = [:]
        var refusedSinceLog = 0
        var lastLog: Date?
    }

    /// The listener's name in log lines ("public", "admin").
    let listener: String
    /// Connections open at once.
    let maxTotal: Int
    /// Connections open at once from one address; 0: no such cap.
    let maxPerAddress: Int
    /// At most one refusal line per this many seconds.
    static let logInterval: TimeInterval = 10

    private let state = Mutex(State())
    private let clock: any TallyClock
    private let logger: Logger

    /// A limiter for `listener`; refusals are logged through `logger`, rate-limited by `clock`.
    init(listener: String, maxTotal: Int, maxPerAddress: Int, clock: any TallyClock, logger: Logger) {
        self.listener = listener
        self.maxTotal = maxTotal
        self.maxPerAddress = maxPerAddress
        self.clock = clock
        self.logger = logger
    }

    /// Connections currently counted.
    var openConnections: Int { state.withLock { $0.open } }

    /// Counts a new connection from `address` and returns nil, or returns why it must be refused
    /// (and counts nothing). Every nil answer must be matched by one ``release(_:)``.
    func admit(_ address: String) -> Refusal? {
        let now = clock.now
        let (refusal, logCount): (Refusal?, Int?) = state.withLock { state in
            var refusal: Refusal?
            if state.open >= maxTotal {
                refusal = .total
            } else if maxPerAddress > 0, state.openByAddress[address, default: 0] >= maxPerAddress {
                refusal = .perAddress
            }
            guard refusal != nil else {
                state.open += 1
                if maxPerAddress > 0 { state.openByAddress[address, default: 0] += 1 }
                return (nil, nil)
            }
            state.refusedSinceLog += 1
            if let last = state.lastLog, now.timeIntervalSince(last) < Self.logInterval { return (refusal, nil) }
            defer { state.refusedSinceLog = 0 }
            state.lastLog = now
            return (refusal, state.refusedSinceLog)
        }
        if let refusal, let logCount {
            logger.warning(
                "connections refused",
                metadata: [
                    "listener": .string(listener), "refused": .stringConvertible(logCount),
                    "last_reason": .string(refusal == .total ? "listener full" : "address full"),
                    "max_connections": .stringConvertible(maxTotal), "max_per_address": .stringConvertible(maxPerAddress),
                ])
        }
        return refusal
    }

    /// Forgets a connection counted by ``admit(_:)``.
    func release(_ address: String) {
        state.withLock { state in
            state.open -= 1
            guard maxPerAddress > 0, let count = state.openByAddress[address] else { return }
            state.openByAddress[address] = count > 1 ? count - 1 : nil
        }
    }
}
