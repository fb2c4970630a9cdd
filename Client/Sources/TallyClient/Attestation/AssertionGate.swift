import Foundation

/// A first-come-first-served async lock: one holder at a time, the others wait in order without blocking a thread.
/// ``Attestor`` holds it over each asserted attempt, from the assertion to the server's answer, so that the assertions
/// of one client reach the server in the order of their counters (App Attest's counter must rise at each one the
/// server accepts).
///
/// Cancelling a waiting task takes it out of the queue at once: ``enter()`` throws `CancellationError` and the task
/// never holds the gate. A task cancelled at the moment the gate was handed to it passes it on and throws too. The
/// holder must call ``leave()`` exactly once, whatever happens (a `defer`): it is synchronous for that reason, which an
/// actor's method would not be. Built on ``Locked`` (no `Mutex`: iOS 15).
final class AssertionGate: Sendable {
    private struct State {
        var held = false
        var lastTicket: UInt64 = 0
        /// The tasks waiting, first come first.
        var waiters: [(ticket: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        /// Tests waiting for this many tasks to wait (``waitForWaiters(_:)``).
        var watchers: [(ticket: UInt64, count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        mutating func makeTicket() -> UInt64 {
            lastTicket &+= 1
            return lastTicket
        }

        mutating func admittedWatchers() -> [CheckedContinuation<Void, Never>] {
            let count = waiters.count
            let admitted = watchers.filter { $0.count <= count }.map(\.continuation)
            watchers.removeAll { $0.count <= count }
            return admitted
        }
    }

    private let state = Locked(State())

    init() {}

    /// Waits for the gate and takes it; the caller must then ``leave()`` it. Throws `CancellationError`, without the
    /// gate, when the calling task is or gets cancelled before holding it.
    func enter() async throws {
        let ticket = state.withLock { $0.makeTicket() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock: a cancellation either happened before (seen here) or finds the waiter queued.
                let (outcome, watchers) = state.withLock { state -> (Result<Bool, CancellationError>, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled { return (.failure(CancellationError()), []) }
                    if !state.held {
                        state.held = true
                        return (.success(true), [])
                    }
                    state.waiters.append((ticket, continuation))
                    return (.success(false), state.admittedWatchers())
                }
                for watcher in watchers { watcher.resume() }
                switch outcome {
                case .failure(let error): continuation.resume(throwing: error)
                case .success(true): continuation.resume()
                case .success(false): break  // resumed by leave() or by the cancellation handler
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            removed?.resume(throwing: CancellationError())
        }
        // Handed the gate just as the task was cancelled: it goes to the next, and this task does not act.
        if Task.isCancelled {
            leave()
            throw CancellationError()
        }
    }

    /// Gives the gate to the first waiting task, or frees it.
    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiters.isEmpty else {
                state.held = false
                return nil
            }
            return state.waiters.removeFirst().continuation  // still held: by the next task now
        }
        next?.resume()
    }

    /// Returns once at least `count` tasks wait for the gate, or the calling task is cancelled (tests).
    func waitForWaiters(_ count: Int) async {
        let ticket = state.withLock { $0.makeTicket() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.waiters.count >= count || Task.isCancelled { return true }
                    state.watchers.append((ticket, count, continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.watchers.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.watchers.remove(at: index).continuation
            }
            watcher?.resume()
        }
    }
}
