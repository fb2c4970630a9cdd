/// The work a client starts without a caller to wait for it (revalidations, refetches of observed keys), each
/// kept until it ends, so that a change of user cancels the work done for the user who left.
final class BackgroundTasks: Sendable {
    private struct Running {
        let task: Task<Void, Never>
        /// Works for the signed-in user (a change of user cancels it), not for data of no user (the price list).
        let isUserData: Bool
    }

    private struct State {
        var nextId: UInt64 = 0
        var running: [UInt64: Running] = [:]
    }

    private let state = Locked(State())

    /// Creates an empty set.
    init() {}

    /// How many tasks have not ended (tests use it).
    var count: Int { state.withLock { $0.running.count } }

    /// Runs `operation` in a task of its own, kept until it ends; returns its id, for ``cancel(_:)``.
    @discardableResult
    func start(isUserData: Bool, _ operation: @escaping @Sendable () async -> Void) -> UInt64 {
        state.withLock { state in
            state.nextId += 1
            let id = state.nextId
            // Made and kept under the lock: the task's removal of itself, which takes the lock, comes after.
            let task = Task {
                await operation()
                self.state.withLock { _ = $0.running.removeValue(forKey: id) }
            }
            state.running[id] = Running(task: task, isUserData: isUserData)
            return id
        }
    }

    /// Cancels the task `id` if it is still running.
    func cancel(_ id: UInt64) {
        state.withLock { $0.running.removeValue(forKey: id) }?.task.cancel()
    }

    /// Cancels every task working for the signed-in user (sign-out, another user) and returns once they have ended
    /// (their requests are cancelled, not waited for); work for data of no user goes on.
    func cancelUserWork() async {
        let cancelled = state.withLock { state -> [Task<Void, Never>] in
            let ids = state.running.filter { $0.value.isUserData }.map(\.key)
            return ids.compactMap { state.running.removeValue(forKey: $0)?.task }
        }
        for task in cancelled { task.cancel() }
        for task in cancelled { await task.value }
    }
}
