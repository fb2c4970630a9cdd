import Synchronization
import TallyStore

/// What the writer's open transaction changed of the cached values: forgotten in one go when it commits.
///
/// Writes inside a transaction only note here what they changed; the writer calls ``committed()`` or
/// ``rolledBack()`` on its own thread as the transaction ends (``SQLiteStore/inWriteTransaction(_:_:)``),
/// before the next one can begin. No GRDB transaction observer: GRDB consults observers on every
/// statement, which cost O(n²) per batch with one per wallet, and still showed with one per transaction.
final class PendingForgets: Sendable {
    private struct Pending {
        var wallets: Set<String> = []
        var sessions: Set<String> = []
        var everySession = false
        var documents: Set<String> = []
        var accounts: Set<String> = []
        var purchases: Set<String> = []
    }

    private let pending = Mutex(Pending())
    private let wallets: CommittedCache<CachedWallet>
    private let sessions: CommittedCache<String>
    private let pages: DocumentPageCache
    private let replays: ReplayCache

    init(wallets: CommittedCache<CachedWallet>, sessions: CommittedCache<String>, pages: DocumentPageCache, replays: ReplayCache) {
        (self.wallets, self.sessions, self.pages, self.replays) = (wallets, sessions, pages, replays)
    }

    /// The account's wallet changed (its cached replays hold the wallet: they are forgotten too).
    func wallet(_ userId: String) { pending.withLock { _ = $0.wallets.insert(userId) } }

    /// What a replay's answer reads of the account other than its wallet changed: its premium, its merge into another
    /// account, its existence.
    func account(_ userId: String) { pending.withLock { _ = $0.accounts.insert(userId) } }

    /// The purchase row of `transactionId` was written.
    func purchase(_ transactionId: String) { pending.withLock { _ = $0.purchases.insert(transactionId) } }

    /// The session was revoked.
    func session(_ sessionId: String) { pending.withLock { _ = $0.sessions.insert(sessionId) } }

    /// The account's documents may have changed (a document write, a push, the account's deletion).
    func documents(_ userId: String) { pending.withLock { _ = $0.documents.insert(userId) } }

    /// Sessions were deleted without knowing their ids (an account was deleted).
    func everySession() { pending.withLock { $0.everySession = true } }

    /// The transaction committed: the caches forget what it changed.
    func committed() {
        let changed = pending.withLock { pending in
            defer { pending = Pending() }
            return pending
        }
        if !changed.wallets.isEmpty { wallets.forget(changed.wallets) }
        if !changed.wallets.isEmpty || !changed.accounts.isEmpty || !changed.purchases.isEmpty {
            replays.forget(users: changed.wallets.union(changed.accounts), transactions: changed.purchases)
        }
        if !changed.documents.isEmpty { pages.forget(changed.documents) }
        if changed.everySession {
            sessions.forgetAll()
        } else if !changed.sessions.isEmpty {
            sessions.forget(changed.sessions)
        }
    }

    /// The transaction rolled back: nothing it did stays, so nothing is forgotten.
    func rolledBack() { pending.withLock { $0 = Pending() } }
}
