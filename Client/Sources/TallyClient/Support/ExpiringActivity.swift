import Dispatch
import Foundation
#if TALLY_APPLE_TYPECHECK
import _AppleFoundation  // scripts/apple-typecheck's stand-in for Foundation's Apple-only members
#endif

/// Keeps the process running while a short task that must not be suspended halfway runs — the session's refresh,
/// which holds a file lock in the App Group container (iOS kills a process suspended holding one: `0xDEAD10CC`) — and
/// says when the system will suspend it anyway, so the task lets go of the lock first. On iOS, tvOS, watchOS and
/// visionOS it is `ProcessInfo.performExpiringActivity(withReason:using:)`, which extensions may use too; elsewhere
/// nothing expires.
final class ExpiringActivity: Sendable {
    private struct State {
        var expired = false
        var handlers: [@Sendable () -> Void] = []
    }

    private let state = Locked(State())
    private let finished = DispatchSemaphore(value: 0)

    /// An activity the system knows nothing of (tests start one and expire it by hand).
    init() {}

    /// Starts an activity: the system is asked to keep the process running until ``end()``.
    static func begin(_ reason: String) -> ExpiringActivity {
        let activity = ExpiringActivity()
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS) || TALLY_APPLE_TYPECHECK
        // The block runs on a queue of the system's: called with false, the activity lasts while it runs, so it waits
        // for end(); called with true (again, or at once), the process is about to be suspended.
        ProcessInfo.processInfo.performExpiringActivity(withReason: reason) { expired in
            if expired { activity.expire() } else { activity.finished.wait() }
        }
        #endif
        return activity
    }

    /// Whether the system has expired the activity.
    var isExpired: Bool { state.withLock { $0.expired } }

    /// Runs `handler` when the activity expires; at once when it has.
    func onExpiry(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.expired { return true }
            state.handlers.append(handler)
            return false
        }
        if now { handler() }
    }

    /// The process is about to be suspended: the handlers run, once.
    func expire() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.expired else { return [] }
            state.expired = true
            defer { state.handlers = [] }
            return state.handlers
        }
        for handler in handlers { handler() }
    }

    /// The task is done: the process may be suspended.
    func end() { finished.signal() }
}

/// A ``FileLock`` that may be released from two places — the task that holds it and an ``ExpiringActivity``'s
/// expiry — and is released once.
final class ReleasableLock: Sendable {
    private let lock: Locked<FileLock?>

    init(_ lock: FileLock) { self.lock = Locked(lock) }

    /// Releases the lock unless it was already.
    func release() { lock.withLock { held in defer { held = nil }; return held }?.release() }
}
