import Foundation

/// Lets one optimistic action per account run at a time in this process; the others wait their turn, in
/// arrival order, and then plan from what the previous one wrote (``AccountCache``).
///
/// Actions on one account serialise on its wallet row anyway. Without the gate, concurrent ones would all
/// plan from the same state, all but one would fail their compare-and-set after waiting for its commit,
/// and each would read and write again; with it, they queue in memory and each writes once. Other
/// processes are not gated: their writes are caught by the compare-and-set.
///
/// The gate is taken before any database work and released before the locking path runs, and no code
/// waits for a gate while holding a connection or another gate, so it cannot deadlock with either. A
/// waiting task that is cancelled still waits for its turn (no longer than the actions ahead of it take).
final class AccountGate: @unchecked Sendable {
    private let lock = NSLock()
    /// Accounts with an action running, each with the actions waiting for it.
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// Runs `body` once no other action of this process runs on the account.
    func withTurn<T>(_ userId: String, _ body: () async throws -> T) async rethrows -> T {
        await enter(userId)
        defer { leave(userId) }
        return try await body()
    }

    private func enter(_ userId: String) async {
        let isFree = lock.withLock {
            guard waiting[userId] == nil else { return false }
            waiting[userId] = []
            return true
        }
        if isFree { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isFree = lock.withLock {
                // The running action may have left between the check above and now.
                guard waiting[userId] != nil else {
                    waiting[userId] = []
                    return true
                }
                waiting[userId]?.append(continuation)
                return false
            }
            if isFree { continuation.resume() }
        }
    }

    /// Hands the turn to the first waiter, or frees the account.
    private func leave(_ userId: String) {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            guard var queue = waiting[userId], !queue.isEmpty else {
                waiting[userId] = nil
                return nil
            }
            let first = queue.removeFirst()
            waiting[userId] = queue
            return first
        }
        next?.resume()
    }
}
