import Synchronization
import TallyStore

/// Replays answered from memory: an app submits its unfinished transactions again at every launch, and a consumable
/// already credited to the submitter is answered from what this process read last of it — the purchase row, and the
/// account and wallet as one statement read them together (``SQLiteStore/replayQuery``) — instead of a trip to a
/// reader connection.
///
/// Correct for the reasons ``CommittedCache`` is (one process owns the file; a read stores what it found only if no
/// commit forgot anything since it began), and because every commit forgets each entry it could change: the cache
/// reads `purchases`, `users` and `wallets` (``SQLiteStore/replayReads``), and a commit that wrote them forgets the
/// entries of the accounts and transactions it wrote (``WriterChanges``), or all of them for rows of no such key.
final class ReplayCache: Sendable {
    /// What a replay is answered from: one snapshot of the purchase and the account that holds it.
    struct Entry: Sendable {
        var purchase: StoredPurchase
        var account: PurchaseAccount
    }

    private struct State {
        var epoch: UInt64 = 0
        var entries: [String: Entry] = [:]
        /// The transactions cached for each account, to forget them with it.
        var byUser: [String: Set<String>] = [:]
    }

    private let state = Mutex(State())
    /// Entries kept at most; the cache starts over when full (it refills on demand).
    let capacity: Int

    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    /// The entry for `transactionId`, if `userId` holds it.
    func entry(_ transactionId: String, userId: String) -> Entry? {
        state.withLock { state in
            guard let entry = state.entries[transactionId], entry.account.user.id == userId else { return nil }
            return entry
        }
    }

    /// Taken before a read; pass it to ``store(_:readAt:)``.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps what a read found, unless a commit forgot something since the read began at `epoch`.
    func store(_ entry: Entry, readAt epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            let (transactionId, userId) = (entry.purchase.transactionId, entry.account.user.id)
            if state.entries.count >= capacity, state.entries[transactionId] == nil {
                state.entries.removeAll(keepingCapacity: true)
                state.byUser.removeAll(keepingCapacity: true)
            }
            state.entries[transactionId] = entry
            state.byUser[userId, default: []].insert(transactionId)
        }
    }

    /// Forgets every entry: a committed transaction changed rows it read without a key the cache is indexed by.
    func forgetAll() {
        state.withLock { state in
            state.epoch &+= 1
            state.entries.removeAll(keepingCapacity: true)
            state.byUser.removeAll(keepingCapacity: true)
        }
    }

    /// Forgets the entries of `users` and those of `transactions`: a committed transaction changed them.
    func forget(users: Set<String>, transactions: Set<String>) {
        state.withLock { state in
            state.epoch &+= 1
            for userId in users {
                for transactionId in state.byUser.removeValue(forKey: userId) ?? [] { state.entries[transactionId] = nil }
            }
            for transactionId in transactions {
                guard let entry = state.entries.removeValue(forKey: transactionId) else { continue }
                state.byUser[entry.account.user.id]?.remove(transactionId)
            }
        }
    }
}
