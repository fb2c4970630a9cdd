import Foundation

/// What a wait for the server is waiting out, which decides what may end it early (``SyncSchedule/ends(_:on:)``).
enum SyncWait: Sendable, Hashable {
    /// No answer came (offline, a timeout, a refused connection): any sign that the server may be back ends it.
    case unreachable
    /// The server answered "not now" (408, 5xx) without saying for how long.
    case busy
    /// The server said how long to wait (`Retry-After`, a 429): only an explicit ``SyncClient/now()`` cuts it.
    case serverAsked
}

/// A sign that the server may be reachable again, or that the app wants its changes sent now.
enum ServerSign: Sendable, Hashable, CaseIterable {
    /// A request of the client got an answer that is not a "not now" (``SyncSchedule/isAnswer(status:)``).
    case answered
    /// The event stream connected.
    case streamConnected
    /// The device's network path became usable (`NWPathMonitor`, Apple platforms).
    case networkChanged
    /// The app came to the foreground (``Client/appDidBecomeActive()``).
    case becameActive
    /// A synced collection was written on the device.
    case localWrite
    /// The app asked for a sync now (``SyncClient/now()``).
    case syncNow
}

/// When sync and the event stream try the server again, and what ends a wait early. Pure: the caller draws the
/// random number, reads the app's activity and sleeps; tests enumerate every case.
///
/// Without an answer, the wait is short while the app is active — its ceiling is 0.25 s doubling to 1.5 s, equal
/// jitter (0.75 to 1.5 s at the ceiling) — so a server that comes back is found within 1.5 s by a `GET /health` or
/// the stream's reconnection, both of which cost a refused connection while it is down; in the background the
/// ceiling is 60 s. A server that answered "not now" is retried after 1 s doubling to 60 s with full jitter, and
/// never before its `Retry-After`.
enum SyncSchedule {
    /// No answer while the app is active.
    static let unreachableActive = RetryPolicy(
        maxAttempts: .max, baseDelay: 0.25, multiplier: 2, maxDelay: 1.5, maxRetryAfter: .infinity, jitter: .equal)
    /// No answer while the app is in the background.
    static let unreachableInBackground = RetryPolicy(
        maxAttempts: .max, baseDelay: 1, multiplier: 2, maxDelay: 60, maxRetryAfter: .infinity, jitter: .equal)
    /// The server answered "not now".
    static let busy = RetryPolicy(maxAttempts: .max, baseDelay: 1, multiplier: 2, maxDelay: 60, maxRetryAfter: .infinity)

    /// How an attempt failed, as the schedule sees it.
    enum Failure: Sendable, Hashable {
        /// No answer: offline, a timeout, a lost or refused connection.
        case unreachable
        /// 408, 429 or 5xx, with the server's `Retry-After` if it sent one.
        case busy(retryAfter: TimeInterval?)
        /// Any other refusal: retrying cannot help (401 after the refresh, 403, 404…).
        case refused
    }

    /// The failure `error` (a push's, a pull's, the probe's) is.
    static func failure(_ error: ClientError) -> Failure {
        switch error.code {
        case .offline, .timedOut: .unreachable
        case .rateLimited: .busy(retryAfter: error.retryAfter)
        case .server where error.status.map { $0 == 408 || $0 >= 500 } ?? true: .busy(retryAfter: error.retryAfter)
        default: .refused
        }
    }

    /// The failure an event stream's attempt is.
    static func failure(_ attempt: AttemptFailure) -> Failure {
        switch attempt {
        case .transport: return .unreachable
        case .status(let status, _, let retryAfter):
            return status == 408 || status == 429 || status >= 500 ? .busy(retryAfter: retryAfter) : .refused
        }
    }

    /// Whether a response with `status` shows the server answering: anything but a "not now" (408, 429, 5xx, which a
    /// load balancer also sends for a server that is down).
    static func isAnswer(status: Int) -> Bool { status < 500 && status != 408 && status != 429 }

    /// The wait before the next attempt after `failures` failures in a row, the last being `failure`; nil when
    /// retrying cannot help. `unitRandom` is a uniform draw in [0, 1).
    static func wait(after failure: Failure, failures: Int, isActive: Bool, unitRandom: Double) -> (seconds: TimeInterval, kind: SyncWait)? {
        switch failure {
        case .refused:
            return nil
        case .unreachable:
            let policy = isActive ? unreachableActive : unreachableInBackground
            let seconds = policy.delay(afterAttempt: failures, failure: .transport(.offline), safeToRetry: true, unitRandom: unitRandom)
            return (seconds ?? policy.maxDelay, .unreachable)
        case .busy(let retryAfter):
            let seconds = busy.delay(
                afterAttempt: failures, failure: .status(503, code: nil, retryAfter: retryAfter), safeToRetry: true, unitRandom: unitRandom)
            return (seconds ?? busy.maxDelay, retryAfter == nil ? .busy : .serverAsked)
        }
    }

    /// The least time after an attempt for a local write to end the wait that followed it, in seconds: a user typing
    /// offline makes one attempt a second at most, not one per keystroke, and never waits longer than the schedule.
    static let writeSpacing: TimeInterval = 1

    /// Whether a local write made `sinceAttempt` seconds after the last attempt is a sign (``ServerSign/localWrite``).
    static func writeIsSign(sinceAttempt: TimeInterval?) -> Bool { sinceAttempt.map { $0 >= writeSpacing } ?? true }

    /// Whether `sign` ends a wait of `kind`. Without an answer anything may mean the server is back: an answer to any
    /// request, the stream connecting, the network changing, the app coming forward, a new write (whose push finds
    /// out at once). A "not now" is ended only by what shows the server serving again (the stream, which reads the
    /// user's wallet to connect), by the app coming forward, or by an explicit sync; a `Retry-After` only by the
    /// latter: a write never makes a client hammer a server that asked for time.
    static func ends(_ kind: SyncWait, on sign: ServerSign) -> Bool {
        switch (kind, sign) {
        case (_, .syncNow), (.unreachable, _): true
        case (.busy, .streamConnected), (.busy, .becameActive): true
        default: false
        }
    }
}
