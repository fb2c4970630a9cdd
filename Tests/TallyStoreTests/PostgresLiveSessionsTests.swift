import Foundation
import Synchronization
import Testing

@testable import TallyPostgres

/// ``LiveSessions`` without a database: a manual monotonic clock decides freshness.
@Suite("PostgreSQL: live sessions cache", .timeLimit(.minutes(1)))
struct PostgresLiveSessionsTests {
    /// A monotonic instant that only moves when told.
    final class Ticker: Sendable {
        private let instant = Mutex(ContinuousClock.now)
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
        func advance(_ duration: Duration) { instant.withLock { $0 += duration } }
    }

    @Test("Nothing is answered before the first poll, and a remembered session is answered after it")
    func answersOnlyWhileFresh() {
        let ticker = Ticker()
        let sessions = LiveSessions(staleness: .seconds(3), now: { ticker.now })
        sessions.remember("s1", user: "u1", readAt: sessions.epoch)
        #expect(sessions.user(of: "s1") == nil)
        sessions.apply([], polledAt: sessions.pollStart)
        #expect(sessions.user(of: "s1") == "u1")
        #expect(sessions.user(of: "s2") == nil)
        ticker.advance(.milliseconds(2999))
        #expect(sessions.user(of: "s1") == "u1")
        ticker.advance(.milliseconds(1))
        #expect(sessions.user(of: "s1") == nil, "a feed silent for 3 s must send lookups back to the database")
        sessions.apply([], polledAt: sessions.pollStart)
        #expect(sessions.user(of: "s1") == "u1")
    }

    @Test("A poll forgets revoked sessions and every session of a deleted account")
    func pollForgets() {
        let ticker = Ticker()
        let sessions = LiveSessions(now: { ticker.now })
        for (session, user) in [("s1", "u1"), ("s2", "u1"), ("s3", "u2"), ("s4", "u3")] {
            sessions.remember(session, user: user, readAt: sessions.epoch)
        }
        sessions.apply(
            [SessionRevocation(sessionId: "s3", userId: "u2"), SessionRevocation(sessionId: nil, userId: "u1")],
            polledAt: sessions.pollStart)
        #expect(sessions.user(of: "s1") == nil)
        #expect(sessions.user(of: "s2") == nil)
        #expect(sessions.user(of: "s3") == nil)
        #expect(sessions.user(of: "s4") == "u3")
    }

    @Test("A lookup that raced a poll's forgetting does not put its session back")
    func raceWithPoll() {
        let ticker = Ticker()
        let sessions = LiveSessions(now: { ticker.now })
        let epoch = sessions.epoch  // a lookup begins, finds s1 live...
        sessions.apply([SessionRevocation(sessionId: "s1", userId: "u1")], polledAt: sessions.pollStart)  // ...a poll forgets it...
        sessions.remember("s1", user: "u1", readAt: epoch)  // ...and the lookup's answer arrives
        #expect(sessions.user(of: "s1") == nil)
        sessions.remember("s2", user: "u1", readAt: epoch)
        #expect(sessions.user(of: "s2") == "u1", "a poll that lists other sessions does not spoil a lookup in flight")

        let deleted = sessions.epoch
        sessions.apply([SessionRevocation(sessionId: nil, userId: "u2")], polledAt: sessions.pollStart)
        sessions.remember("s3", user: "u2", readAt: deleted)
        #expect(sessions.user(of: "s3") == nil, "nor put back a session of an account the poll lists as deleted")
    }

    @Test("A lookup that raced a revocation by this process does not put its session back")
    func raceWithLocalForget() {
        let ticker = Ticker()
        let sessions = LiveSessions(now: { ticker.now })
        sessions.apply([], polledAt: sessions.pollStart)
        let epoch = sessions.epoch
        sessions.forget(sessionId: "s1")
        sessions.remember("s1", user: "u1", readAt: epoch)
        #expect(sessions.user(of: "s1") == nil)
    }

    @Test("An older poll finishing late does not move freshness back")
    func freshnessNeverMovesBack() {
        let ticker = Ticker()
        let sessions = LiveSessions(staleness: .seconds(3), now: { ticker.now })
        sessions.remember("s1", user: "u1", readAt: sessions.epoch)
        let early = sessions.pollStart
        ticker.advance(.seconds(2))
        sessions.apply([], polledAt: sessions.pollStart)
        sessions.apply([], polledAt: early)
        ticker.advance(.seconds(2))
        #expect(sessions.user(of: "s1") == "u1")
    }

    @Test("Revocations by this process are forgotten at once")
    func localForget() {
        let ticker = Ticker()
        let sessions = LiveSessions(now: { ticker.now })
        sessions.apply([], polledAt: sessions.pollStart)
        sessions.remember("s1", user: "u1", readAt: sessions.epoch)
        sessions.remember("s2", user: "u2", readAt: sessions.epoch)
        sessions.forget(sessionId: "s1")
        sessions.forget(userId: "u2")
        #expect(sessions.user(of: "s1") == nil)
        #expect(sessions.user(of: "s2") == nil)
    }
}
