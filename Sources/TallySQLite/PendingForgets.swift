import GRDB
import Synchronization

/// What the writer's open transaction changed of the cached values: forgotten in one go when it commits.
///
/// GRDB consults every transaction observer on every statement, so one `afterNextTransaction` per changed
/// wallet made a batch of n commands cost O(n²). Now each write transaction (``SQLiteStore/write(_:)``, a
/// ledger batch) registers one observer through ``watch(_:)``, and writes inside it only note what they
/// changed here.
final class PendingForgets: Sendable {
    private struct Pending {
        var wallets: Set<String> = []
        var sessions: Set<String> = []
        var everySession = false
    }

    private let pending = Mutex(Pending())
    private let wallets: CommittedCache<CachedWallet>
    private let sessions: CommittedCache<String>

    init(wallets: CommittedCache<CachedWallet>, sessions: CommittedCache<String>) {
        (self.wallets, self.sessions) = (wallets, sessions)
    }

    /// Called at the start of every write transaction: when it commits, the caches forget what it changed.
    func watch(_ db: Database) {
        db.afterNextTransaction(onCommit: { _ in self.committed() }, onRollback: { _ in self.rolledBack() })
    }

    /// The account's wallet changed.
    func wallet(_ userId: String) { pending.withLock { _ = $0.wallets.insert(userId) } }

    /// The session was revoked.
    func session(_ sessionId: String) { pending.withLock { _ = $0.sessions.insert(sessionId) } }

    /// Sessions were deleted without knowing their ids (an account was deleted).
    func everySession() { pending.withLock { $0.everySession = true } }

    /// The transaction committed: the caches forget what it changed.
    private func committed() {
        let changed = pending.withLock { pending in
            defer { pending = Pending() }
            return pending
        }
        if !changed.wallets.isEmpty { wallets.forget(changed.wallets) }
        if changed.everySession {
            sessions.forgetAll()
        } else if !changed.sessions.isEmpty {
            sessions.forget(changed.sessions)
        }
    }

    /// The transaction rolled back: nothing it did stays, so nothing is forgotten.
    private func rolledBack() { pending.withLock { $0 = Pending() } }
}
