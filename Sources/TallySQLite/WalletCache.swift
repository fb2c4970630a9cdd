import Foundation
import Synchronization
import TallyStore

/// The wallets this process read last, so that reading a wallet is a dictionary lookup instead of a trip to
/// a reader connection (two thread hand-offs, the largest item in a `GET /v1/wallet` profile).
///
/// Correct because one process owns the database (``SQLiteStore`` locks the file) and every change to a
/// wallet or its holds is an ``SQLiteStore/append(_:userId:now:_:)`` on the single writer, which forgets the
/// account when its transaction commits. A read stores what it found only if no commit forgot anything
/// since it began (``epoch``): a read that raced a commit cannot put back the state the commit replaced.
/// An entry carries the earliest expiry of the account's open holds; from then on the cache misses, and the
/// store's read releases the expired hold through the writer.
final class WalletCache: Sendable {
    /// A wallet as last read, and when its first open hold expires (`nil`: nothing held).
    struct Entry: Sendable {
        var wallet: WalletState
        var firstExpiry: Date?
    }

    private struct State {
        var epoch: UInt64 = 0
        var entries: [String: Entry] = [:]
    }

    private let state = Mutex(State())
    /// Wallets kept at most; the cache starts over when full (it refills on demand).
    let capacity: Int

    init(capacity: Int = 100_000) {
        self.capacity = capacity
    }

    /// The account's wallet if it is cached and none of its holds has expired by `now`.
    func wallet(_ userId: String, now: Date) -> WalletState? {
        state.withLock { state in
            guard let entry = state.entries[userId] else { return nil }
            if let expiry = entry.firstExpiry, expiry <= now { return nil }
            return entry.wallet
        }
    }

    /// Taken before a read; pass it to ``store(_:for:readAt:)``.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps what a read found, unless a commit changed some wallet since the read began at `epoch`.
    func store(_ entry: Entry, for userId: String, readAt epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            if state.entries.count >= capacity, state.entries[userId] == nil { state.entries.removeAll(keepingCapacity: true) }
            state.entries[userId] = entry
        }
    }

    /// Forgets the account's wallet: its transaction has committed a change to it.
    func forget(_ userId: String) {
        state.withLock { state in
            state.epoch &+= 1
            state.entries[userId] = nil
        }
    }
}
