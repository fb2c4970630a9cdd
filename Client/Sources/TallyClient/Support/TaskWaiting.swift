/// `task`'s value, or `CancellationError` as soon as the calling task is cancelled; `task` itself goes on.
/// (`Task.value` waits for the task whatever happens to the caller: a change of user waits for the leaving user's work,
/// and a wait that cancelling could not end, in work that a refresh losing the session made wait, would never end.)
func valueUnlessCancelled<Success: Sendable>(of task: Task<Success, any Error>) async throws -> Success {
    let waiter = Locked<CheckedContinuation<Success, any Error>?>(nil)
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let cancelled = waiter.withLock { waiter -> Bool in
                if Task.isCancelled { return true }
                waiter = continuation
                return false
            }
            if cancelled { return continuation.resume(throwing: CancellationError()) }
            Task {
                let result = await task.result
                waiter.withLock { waiter in
                    defer { waiter = nil }
                    return waiter
                }?.resume(with: result)
            }
        }
    } onCancel: {
        waiter.withLock { waiter in
            defer { waiter = nil }
            return waiter
        }?.resume(throwing: CancellationError())
    }
}
