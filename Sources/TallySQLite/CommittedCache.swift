import Foundation
import Synchronization
import TallyStore

/// Values this process read last, kept until a commit changes them: the embedded store answers its hottest
/// reads — a wallet, a session's liveness — from memory instead of a trip to a reader connection (two
/// thread hand-offs, the largest item in a `GET /v1/wallet` profile).
///
/// Correct because one process owns the database (``SQLiteStore`` locks the file) and every write is declared with
/// the tables it changes (``SQLiteWrites``): when its transaction commits, each cache forgets the rows it changed of
/// the tables the cache reads (``WriterChanges``). A read stores what it found only if no commit forgot anything
/// since the read began (``epoch``): a read that raced a commit cannot put back the value the commit replaced.
final class CommittedCache<Value: Sendable>: Sendable {
    private struct State {
        var epoch: UInt64 = 0
        var entries: [String: Value] = [:]
    }

    private let state = Mutex(State())
    /// Entries kept at most; the cache starts over when full (it refills on demand).
    let capacity: Int

    init(capacity: Int = 100_000) {
        self.capacity = capacity
    }

    /// The cached value, if any.
    func value(_ key: String) -> Value? {
        state.withLock { $0.entries[key] }
    }

    /// Taken before a read; pass it to ``store(_:for:readAt:)``.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps what a read found, unless a commit forgot something since the read began at `epoch`.
    func store(_ value: Value, for key: String, readAt epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            if state.entries.count >= capacity, state.entries[key] == nil { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = value
        }
    }

    /// Keeps a value a transaction has just committed, on the writer's thread after the commit's forgets: no later
    /// commit can have forgotten it yet.
    func storeCommitted(_ value: Value, for key: String) {
        state.withLock { state in
            if state.entries.count >= capacity, state.entries[key] == nil { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = value
        }
    }

    /// Forgets one value: a committed transaction changed it.
    func forget(_ key: String) {
        state.withLock { state in
            state.epoch &+= 1
            state.entries[key] = nil
        }
    }

    /// Forgets several values a committed transaction changed.
    func forget(_ keys: Set<String>) {
        state.withLock { state in
            state.epoch &+= 1
            for key in keys { state.entries[key] = nil }
        }
    }

    /// Forgets every value (for a change whose keys are not known, such as deleting an account's sessions).
    func forgetAll() {
        state.withLock { state in
            state.epoch &+= 1
            state.entries.removeAll(keepingCapacity: true)
        }
    }
}

/// A wallet as last read, and when its first open hold expires (`nil`: nothing held): from then on the
/// cache does not answer, and the store's read releases the expired hold through the writer.
struct CachedWallet: Sendable {
    var wallet: WalletState
    var firstExpiry: Date?

    /// The wallet, unless a hold has expired by `now`.
    func wallet(at now: Date) -> WalletState? {
        if let firstExpiry, firstExpiry <= now { return nil }
        return wallet
    }
}
