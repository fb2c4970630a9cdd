import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One caller waiting for one `URLSessionTask` (its whole answer, or a stream's head): the caller resumes with the first
/// of the task's answer, its own cancellation and the deadline — never later, whatever URLSession does.
///
/// A task that did not answer is cancelled from a dispatch queue, never from the caller's cancellation handler or a
/// stream's termination handler: swift-corelibs-foundation's `URLSessionTask.cancel()` (through 6.3) waits for the
/// task's work queue, and that queue, delivering the task's answer at that moment, waits for the lock of the very Swift
/// task whose cancellation handler runs (swift-corelibs-foundation#5412). Both wait forever, and every later request of
/// the session queues behind them: a change of user that cancelled a request in flight hung the next user's calls.
///
/// With `sparingAnswers`, a task whose answer has begun (its response head came) is left to finish instead, its answer
/// going nowhere: swift-corelibs-foundation (through 6.3) traps the process ("Trying to access a behaviour for a task
/// that in not in the registry") when a cancel reaches a task that is completing — `cancel()` marks the task cancelling
/// and queues its failure, which runs after the completion removed the task. A change of user cancels requests in
/// flight; `UserSwitchStressTests` hit it in 2 of 3 runs. A request's answer ends it soon anyway; a stream's never does,
/// so streams are always cancelled.
final class URLTaskAttempt<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var task: URLSessionTask?
        /// How the attempt ended, once it has.
        var ended = false
    }

    private let state = Locked(State())
    private let sparingAnswers: Bool

    /// Creates an attempt; ``start(_:resuming:deadline:)`` starts it. `sparingAnswers`: a task whose answer has begun
    /// is not cancelled.
    init(sparingAnswers: Bool = false) { self.sparingAnswers = sparingAnswers }

    /// Resumes `task` for `continuation`, which the task's answer (``answered(_:)``), the caller's cancellation
    /// (``cancel()``) or `deadline` seconds, whichever comes first, resumes. A caller cancelled before this point
    /// resumes at once and the task is never sent.
    func start(_ task: URLSessionTask, resuming continuation: CheckedContinuation<Value, any Error>, deadline: TimeInterval) {
        let ended = state.withLock { state -> Bool in
            guard !state.ended else { return true }
            (state.continuation, state.task) = (continuation, task)
            return false
        }
        guard !ended else { return continuation.resume(throwing: CancellationError()) }
        task.resume()
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
            state.ended = true
            defer { (state.continuation, state.task) = (nil, nil) }
            return (state.continuation, state.task)
        }
        continuation?.resume(with: result)
        if cancellingTask, let task { cancelLater(task, unlessAnswered: sparingAnswers) }
    }
}

/// Cancels `task` from a dispatch queue, outside whatever lock the caller holds: the SDK's one way to cancel a
/// URLSession task (see ``URLTaskAttempt``). `unlessAnswered`: not once its response head came.
func cancelLater(_ task: URLSessionTask, unlessAnswered: Bool = false) {
    DispatchQueue.global(qos: .utility).async {
        if unlessAnswered, task.response != nil { return }
        task.cancel()
    }
}
