import Foundation
import TallyAPI
import TallyStore

/// An account as some statement of this process last saw it: what an action plans from, plus the wallet
/// row's stamp that the write compares against.
///
/// A hint, never the truth: the write's compare-and-set on `stamp` (the wallet row's `xmin`) is what makes
/// it correct. Every write to what a plan reads — wallet, quota counters, the user row — rewrites the
/// wallet row (ledger writes update it; counter, profile and credential writes rewrite it unchanged), so a
/// stale account fails its write and is read again.
struct CachedAccount: Sendable {
    /// The user, the wallet, every quota counter and a guest's installation with its counters (only its guest writes
    /// those, and every action of the guest moves the wallet row, so the stamp covers them too).
    var state: AccountState
    /// The wallet row's `xmin` as text.
    var stamp: String
    /// An id for the account's next ledger entry, taken from the sequence after every entry the account had
    /// at `stamp` (so later than all of them, as long as the stamp still matches); `nil` when none was taken.
    var entryId: Int64?
}

/// The accounts this process wrote last, so that an action on one of them is a single statement (the write,
/// with its compare-and-set) instead of a read and a write.
///
/// An account another process writes too makes the cached write fail now and then; it is then no longer
/// `trusted`, and its actions read first (two statements, as without the cache) until a read finds the
/// account as this process left it. So a cache that keeps missing costs no more than a wasted write now
/// and then.
///
/// Only accounts with nothing held are kept: their open holds (none) cannot have expired, so a matching
/// stamp proves there is nothing to release first. Entries live `lifetime` at most (on the monotonic
/// clock, not the business clock): `xmin` is a 32-bit transaction id, and a short life keeps an old
/// stamp from ever meeting a wrapped-around one. Bounded by `capacity`; when full, it starts over.
///
/// The stamp makes a stale entry cost a wasted write, not a wrong one; this process's own committed writes still make
/// it forget what they changed (``forget(_:)``, derived from their declarations and ``reads``), so that its next action
/// reads instead of writing from what it knows is gone.
final class AccountCache: @unchecked Sendable {
    static let capacity = 50_000
    static let lifetime: Duration = .seconds(30)
    /// The tables an entry reads: the user row, the wallet, the quota counters (the account's and its installation's)
    /// and the holds (only accounts with nothing held are kept).
    static let reads = CacheReads(.users, .wallets, .quotaCounters, .installationQuotaCounters, .holds)

    private struct Entry {
        var account: CachedAccount
        var trusted: Bool
        var storedAt: ContinuousClock.Instant
    }

    private let lock = NSLock()
    private var entries: [String: Entry] = [:]

    /// The account if it was stored less than `lifetime` ago, and whether to write from it without a read.
    func account(_ userId: String) -> (account: CachedAccount, trusted: Bool)? {
        let now = ContinuousClock.now
        return lock.withLock {
            guard let entry = entries[userId] else { return nil }
            guard now - entry.storedAt < Self.lifetime else {
                entries[userId] = nil
                return nil
            }
            return (entry.account, entry.trusted)
        }
    }

    /// Remembers `account` as this process just wrote it (forgets it when something is held).
    func store(_ account: CachedAccount, trusted: Bool) {
        let userId = account.state.user.id
        guard account.state.wallet.held == 0 else { return remove(userId) }
        let now = ContinuousClock.now
        lock.withLock {
            if entries.count >= Self.capacity, entries[userId] == nil { entries.removeAll(keepingCapacity: true) }
            entries[userId] = Entry(account: account, trusted: trusted, storedAt: now)
        }
    }

    /// Forgets the account.
    func remove(_ userId: String) {
        _ = lock.withLock { entries.removeValue(forKey: userId) }
    }

    /// Forgets what committed writes changed: `.user(id)` that account; rows of another key, or `.all`, every account.
    func forget(_ rows: some Collection<ChangedRows>) {
        lock.withLock {
            for changed in rows {
                guard case .user(let userId) = changed else { return entries.removeAll(keepingCapacity: true) }
                entries.removeValue(forKey: userId)
            }
        }
    }
}
