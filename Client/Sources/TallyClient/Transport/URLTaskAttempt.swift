import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One caller waiting for one `URLSessionTask` (its whole answer, or a stream's head): the caller resumes with the first
/// of the task's answer, its own cancellation and the deadline — never later, whatever URLSession does.
///
/// A task that did not answer is cancelled with ``cancelLater(_:on:)``, never from the caller's cancellation handler or
/// a stream's termination handler: swift-corelibs-foundation's `URLSessionTask.cancel()` (through 6.3) waits for the
/// task's work queue, and that queue, delivering the task's answer at that moment, waits for the lock of the very Swift
/// task whose cancellation handler runs (swift-corelibs-foundation#5412). Both wait forever, and every later request of
/// the session queues behind them: a change of user that cancelled a request in flight hung the next user's calls.
final class URLTaskAttempt<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var task: URLSessionTask?
        /// Whether the attempt has ended.
        var ended = false
        /// Whether it ended by the caller's cancellation or the deadline, so that its task is to be cancelled; an
        /// answer ends it without (a stream's body is still to come).
        var cancelsTask = false
    }

    private let state = Locked(State())
    /// The session's delegate queue, where the task's answer is delivered and where it is cancelled.
    private let delegateQueue: OperationQueue

    /// Creates an attempt for a task of the session whose delegate queue is `delegateQueue`; ``start(_:resuming:deadline:)``
    /// starts it.
    init(delegateQueue: OperationQueue) { self.delegateQueue = delegateQueue }

    /// Resumes `task` for `continuation`, which the task's answer (``answered(_:)``), the caller's cancellation
    /// (``cancel()``) or `deadline` seconds, whichever comes first, resumes. A caller cancelled before this point
    /// resumes at once and the task is never sent.
    func start(_ task: URLSessionTask, resuming continuation: CheckedContinuation<Value, any Error>, deadline: TimeInterval) {
        let ended = state.withLock { state -> Bool in
            guard !state.ended else { return true }
            state.continuation = continuation
            return false
        }
        guard !ended else { return continuation.resume(throwing: CancellationError()) }
        task.resume()
        // Only a resumed task is cancelled (`end` cancels the task it finds here). An attempt that ended meanwhile is
        // cancelled only if the caller or the deadline ended it: a stream's head that came first (a busy machine, a
        // near server) leaves its task running, whose body is the stream.
        let cancelNow = state.withLock { state -> Bool in
            if !state.ended { state.task = task }
            return state.ended && state.cancelsTask
        }
        if cancelNow { cancelLater(task, on: delegateQueue) }
        // A timer of its own, off the cooperative pool: it fires even when the pool's threads are all busy.
        DispatchQueue.global().asyncAfter(deadline: .now() + max(0, min(deadline, 1e9))) { [weak self] in
            self?.end(.failure(TransportError.timedOut), cancellingTask: true)
        }
    }

    /// The task answered (its completion, or a stream's head): the caller resumes with `result` unless it has already.
    func answered(_ result: Result<Value, any Error>) { end(result, cancellingTask: false) }

    /// The caller was cancelled: it resumes with `CancellationError` now, and the task is cancelled from a queue.
    func cancel() { end(.failure(CancellationError()), cancellingTask: true) }

    private func end(_ result: Result<Value, any Error>, cancellingTask: Bool) {
        let (continuation, task) = state.withLock { state -> (CheckedContinuation<Value, any Error>?, URLSessionTask?) in
            guard !state.ended else { return (nil, nil) }
            (state.ended, state.cancelsTask) = (true, cancellingTask)
            defer { (state.continuation, state.task) = (nil, nil) }
            return (state.continuation, state.task)
        }
        continuation?.resume(with: result)
        if cancellingTask, let task { cancelLater(task, on: delegateQueue) }
    }
}

/// Cancels `task` unless it has completed, from `delegateQueue`, the delegate queue of its session: the SDK's one way to
/// cancel a URLSession task, outside whatever lock the caller holds (see ``URLTaskAttempt``).
///
/// Why that queue: swift-corelibs-foundation (through 6.3) traps the process ("Trying to access a behaviour for a task
/// that in not in the registry") when a cancel reaches a task that is completing. `cancel()` marks the task cancelling
/// and queues its failure on the work queue; a completion delivered on the delegate queue meanwhile removes the task
/// from the session's registry first, and the failure then looks it up. The completion marks the task completed on the
/// delegate queue, before it queues that removal; so on the delegate queue, a task not yet completed is still
/// registered, and the failure `cancel()` queues runs before any removal the completion can queue after it. A change of
/// user cancels requests and streams in flight; `UserSwitchStressTests` crashed in about a third of its runs.
func cancelLater(_ task: URLSessionTask, on delegateQueue: OperationQueue) {
    delegateQueue.addOperation {
        guard task.state == .running || task.state == .suspended else { return }
        task.cancel()
    }
}
