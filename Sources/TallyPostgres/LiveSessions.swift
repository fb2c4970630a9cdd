import Foundation
import Synchronization
import TallyStore
import TallyAPI

/// A session revoked, or every session of an account deleted (`sessionId == nil`), as the revocation feed
/// (`session_revocations`) lists it.
struct SessionRevocation: Sendable, Equatable {
    var sessionId: String?
    var userId: String
}

/// Sessions this process found live, answered from memory while the revocation feed is fresh.
///
/// Every authenticated request asks whether its token's session is still live. With several processes on
/// one database no process sees the others' sign-outs, so that question was one statement per request
/// (the most frequent statement under load). Now each process polls the sessions revoked in the last
/// ``PostgresStore/revocationWindow`` about once a second (``apply(_:polledAt:)``) and forgets them; between
/// polls it trusts what it found. A revocation committed before a poll began is in that poll's answer, so
/// an answer from memory is never older than the last successful poll's start, and the cache answers only
/// while that was less than ``staleness`` ago: a feed that stops (database down, process overloaded) makes
/// every lookup go to the database again, never trust longer.
///
/// What this process's own writes change it learns from their declarations, not from the feed: its entries read
/// ``reads`` (a session's row, and its account's, whose deletion removes the session by cascade), and when a
/// transaction that changed one of those commits, the store makes it forget what the transaction noted
/// (``forget(_:)``: a session by id, an account's sessions, or everything).
///
/// A lookup that raced a poll cannot put back a session the poll forgot: the last poll's answer is kept as
/// tombstones that ``remember(_:user:readAt:)`` refuses, and forgetting this process's writes moves ``epoch``
/// (as in the SQLite store's committed cache). A poll that lists only other sessions does not spoil the
/// lookups in flight, so under steady sign-out traffic lookups still land in the cache.
///
/// What a poll lists that the previous applied poll did not goes to the observer (``observe(_:)``): the server
/// ends those sessions' streams and forgets their tokens, so a sign-out reaches every process within a poll
/// even when its notification is never heard (a listener behind a transaction pooler).
final class LiveSessions: Sendable {
    /// The tables a cached answer reads: `sessions` (the lookup's) and `users` (an account's deletion removes its
    /// sessions by cascade, naming none; a change to an account's row makes its sessions be looked up once more).
    static let reads = CacheReads(.sessions, .users)

    fileprivate struct State {
        var entries: [String: String] = [:]
        /// The sessions of `entries` by user, so that forgetting an account's sessions does not walk them all.
        var byUser: [String: Set<String>] = [:]
        var epoch: UInt64 = 0
        /// Sessions revoked, and accounts deleted, as the last applied poll listed them.
        var revokedSessions: Set<String> = []
        var deletedUsers: Set<String> = []
        /// When the last successful poll began.
        var freshAsOf: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    private let observer = Mutex<(@Sendable ([SessionRevocation]) -> Void)?>(nil)
    private let now: @Sendable () -> ContinuousClock.Instant
    /// How long after a successful poll began the cache still answers.
    let staleness: Duration
    /// Sessions kept at most; the cache starts over when full (it refills on demand).
    let capacity: Int

    init(
        staleness: Duration = .seconds(3), capacity: Int = 100_000,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.staleness = staleness
        self.capacity = capacity
        self.now = now
    }

    /// The user of a session known live, while the feed is fresh; `nil` means "ask the database".
    func user(of sessionId: String) -> String? {
        let now = now()
        return state.withLock { state in
            guard let freshAsOf = state.freshAsOf, now - freshAsOf < staleness else { return nil }
            return state.entries[sessionId]
        }
    }

    /// Taken before a database lookup; pass it to ``remember(_:user:readAt:)``.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps a session the database found live, unless the last poll lists it (or its account) as revoked,
    /// or this process revoked sessions since the lookup began.
    func remember(_ sessionId: String, user userId: String, readAt epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch, !state.revokedSessions.contains(sessionId), !state.deletedUsers.contains(userId)
            else { return }
            if state.entries.count >= capacity, state.entries[sessionId] == nil { state.removeAll() }
            state.insert(sessionId, user: userId)
        }
    }

    /// The instant to pass to ``apply(_:polledAt:)``: taken just before the poll's query is sent.
    var pollStart: ContinuousClock.Instant { now() }

    /// Forgets the revoked sessions and deleted accounts a poll that began at `start` found, and marks the
    /// cache fresh as of `start`.
    func apply(_ revocations: [SessionRevocation], polledAt start: ContinuousClock.Instant) {
        let sessions = Set(revocations.compactMap(\.sessionId))
        let users = Set(revocations.filter { $0.sessionId == nil }.map(\.userId))
        let news = state.withLock { state -> [SessionRevocation] in
            for session in sessions { state.remove(session) }
            for user in users { state.removeSessions(of: user) }
            // Every poll lists the whole window, so the later poll's answer is the one to keep.
            guard state.freshAsOf.map({ $0 <= start }) ?? true else { return [] }
            state.freshAsOf = start
            let news = revocations.filter { revocation in
                revocation.sessionId.map { !state.revokedSessions.contains($0) } ?? !state.deletedUsers.contains(revocation.userId)
            }
            (state.revokedSessions, state.deletedUsers) = (sessions, users)
            return news
        }
        if !news.isEmpty, let observer = observer.withLock({ $0 }) { observer(news) }
    }

    /// Sets what is told of each newly listed revocation (see the type's summary).
    func observe(_ handler: @escaping @Sendable ([SessionRevocation]) -> Void) {
        observer.withLock { $0 = handler }
    }

    /// Forgets a session another process revoked, on hearing so (its notification), at once.
    func forget(sessionId: String) {
        _ = forget(CollectionOfOne(ChangedRows.session(sessionId)))
    }

    /// Forgets every session of an account another process deleted, on hearing so, at once.
    func forget(userId: String) {
        _ = forget(CollectionOfOne(ChangedRows.user(userId)))
    }

    /// Forgets what committed writes changed: `.session(id)` that session, `.user(id)` the account's sessions, `.all`
    /// every session (`.transaction` rows of these tables are not by a key it has: everything too). Moves ``epoch``,
    /// so a lookup in flight does not put back what was forgotten; returns the epoch before and after.
    @discardableResult
    func forget(_ rows: some Collection<ChangedRows>) -> (before: UInt64, after: UInt64) {
        state.withLock { state in
            let before = state.epoch
            state.epoch &+= 1
            for changed in rows {
                switch changed {
                case .session(let id): state.remove(id)
                case .user(let id): state.removeSessions(of: id)
                case .all, .transaction: state.removeAll()
                }
            }
            return (before, state.epoch)
        }
    }
}

extension LiveSessions.State {
    /// Keeps `sessionId` as live for `userId`.
    fileprivate mutating func insert(_ sessionId: String, user userId: String) {
        if let previous = entries.updateValue(userId, forKey: sessionId), previous != userId { byUser[previous]?.remove(sessionId) }
        byUser[userId, default: []].insert(sessionId)
    }

    /// Forgets `sessionId`.
    fileprivate mutating func remove(_ sessionId: String) {
        guard let userId = entries.removeValue(forKey: sessionId) else { return }
        byUser[userId]?.remove(sessionId)
        if byUser[userId]?.isEmpty == true { byUser[userId] = nil }
    }

    /// Forgets every session of `userId`.
    fileprivate mutating func removeSessions(of userId: String) {
        for sessionId in byUser.removeValue(forKey: userId) ?? [] { entries[sessionId] = nil }
    }

    /// Forgets every session.
    fileprivate mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        byUser.removeAll(keepingCapacity: true)
    }
}
