import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// The access tokens a process trusts for a few seconds (``SessionCache``): an eviction (a sign-out or a deletion,
/// here or announced by another process) wins over a lookup that raced it.
@Suite("Session cache", .timeLimit(.minutes(1)))
struct SessionCacheTests {
    private static let alice = Identity(userId: "alice", sessionId: "phone")
    private static let bob = Identity(userId: "bob", sessionId: "laptop")

    @Test("An eviction drops the session's and the user's tokens, and a lookup begun before it cannot put one back")
    func evictionsWinOverLookupsInFlight() {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let cache = SessionCache(clock: clock)
        let expiry = clock.now.addingTimeInterval(600)
        cache.remember("a1", identity: Self.alice, expiresAt: expiry, readAt: cache.epoch)
        cache.remember("b1", identity: Self.bob, expiresAt: expiry, readAt: cache.epoch)
        guard case .trusted(Self.alice) = cache.lookup("a1") else { Issue.record("a1 not trusted"); return }

        // A lookup of Alice's session begins, the session is signed out, then the lookup answers "live".
        let lookupBegan = cache.epoch
        cache.evict(sessionId: "phone")
        #expect(cache.lookup("a1") == nil)
        cache.remember("a1", identity: Self.alice, expiresAt: expiry, readAt: lookupBegan)
        #expect(cache.lookup("a1") == nil, "a lookup that raced the sign-out put the token back")
        guard case .trusted(Self.bob) = cache.lookup("b1") else { Issue.record("another session's token was dropped"); return }

        // Deleting Bob's account drops his tokens; a lookup begun after an eviction is kept.
        cache.evict(userId: "bob")
        #expect(cache.lookup("b1") == nil)
        cache.remember("a2", identity: Self.alice, expiresAt: expiry, readAt: cache.epoch)
        guard case .trusted(Self.alice) = cache.lookup("a2") else { Issue.record("a fresh lookup was not kept"); return }
    }
}
