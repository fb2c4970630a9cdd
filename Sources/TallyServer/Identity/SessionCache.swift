import Foundation
import Synchronization
import TallyAPI
import TallyStore

/// Remembers access tokens that were verified and whose session was found live, for a few seconds,
/// so a busy client's reads skip the signature check and the session lookup.
///
/// Sign-out and account deletion evict their entries on this instance at once, and on the other instances
/// sharing a PostgreSQL database as soon as they hear of it (the notification that also ends the session's
/// event streams, see `PostgresWiring`); a revocation nobody announces (a reused refresh token, a session
/// beyond the cap), or a notification lost, stops a token within ``recheckInterval`` plus the store's own
/// delay (PostgreSQL's revocation feed: under 3 s). A lookup that raced an eviction cannot put its token
/// back: every eviction moves ``epoch``, and ``remember(_:identity:expiresAt:readAt:)`` keeps a token only
/// when it has not moved since the lookup began (as the stores' own caches do). Each entry is rechecked
/// after a random part of the interval (between half and all of it), so tokens first seen together —
/// a server's first second under load — do not all go back to the store in the same instant.
final class SessionCache: Sendable {
    struct Entry {
        let identity: Identity
        let expiresAt: Date
        let recheckAt: Date
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// Moved (under the `entries` lock) by every eviction of a session or a user.
    private let evictions = Atomic<UInt64>(0)
    private let clock: any TallyClock
    /// How long a session found live is trusted before it is looked up again.
    let recheckInterval: TimeInterval
    /// Entries kept at most; the cache is cleared when full (cheap, and it refills on demand).
    let capacity: Int

    init(clock: any TallyClock, recheckInterval: TimeInterval = 2, capacity: Int = 50_000) {
        self.clock = clock
        self.recheckInterval = recheckInterval
        self.capacity = capacity
    }

    /// What the cache knows about a token.
    enum Lookup {
        /// Verified, unexpired, and its session was found live less than a recheck interval ago.
        case trusted(Identity)
        /// Verified and unexpired (its signature need not be checked again), but its session must be looked
        /// up again.
        case recheck(Identity, expiresAt: Date)
    }

    /// What is known about `token`; `nil` when it must be verified from scratch.
    func lookup(_ token: String) -> Lookup? {
        let now = clock.now
        return entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            guard entry.expiresAt > now else {
                entries[token] = nil
                return nil
            }
            return now < entry.recheckAt ? .trusted(entry.identity) : .recheck(entry.identity, expiresAt: entry.expiresAt)
        }
    }

    /// Forgets one token (its session was found dead).
    func evict(token: String) {
        _ = entries.withLock { $0.removeValue(forKey: token) }
    }

    /// Taken before a token's session is looked up; pass it to ``remember(_:identity:expiresAt:readAt:)``.
    var epoch: UInt64 { evictions.load(ordering: .acquiring) }

    /// Records a token just verified against a live session, unless a session or a user was evicted since
    /// the lookup that found it live began (`epoch`).
    func remember(_ token: String, identity: Identity, expiresAt: Date, readAt epoch: UInt64) {
        let trusted = recheckInterval * Double.random(in: 0.5...1)
        store(Entry(identity: identity, expiresAt: expiresAt, recheckAt: clock.now.addingTimeInterval(trusted)), for: token, readAt: epoch)
    }

    /// Records a token this instance just signed: its first use skips the signature check but still looks
    /// its session up (a reused refresh token may have revoked it meanwhile).
    func rememberSigned(_ token: String, identity: Identity, expiresAt: Date) {
        store(Entry(identity: identity, expiresAt: expiresAt, recheckAt: .distantPast), for: token, readAt: nil)
    }

    private func store(_ entry: Entry, for token: String, readAt epoch: UInt64?) {
        entries.withLock { entries in
            if let epoch, evictions.load(ordering: .relaxed) != epoch { return }
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[token] = entry
        }
    }

    /// Forgets every token of a session (sign-out).
    func evict(sessionId: String) {
        entries.withLock { entries in
            evictions.add(1, ordering: .releasing)
            entries = entries.filter { $0.value.identity.sessionId != sessionId }
        }
    }

    /// Forgets every token of a user (account deletion).
    func evict(userId: String) {
        entries.withLock { entries in
            evictions.add(1, ordering: .releasing)
            entries = entries.filter { $0.value.identity.userId != userId }
        }
    }
}
