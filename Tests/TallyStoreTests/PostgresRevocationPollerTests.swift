import Foundation
import Logging
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// The revocation poller sleeps on the store's clock, so a test advances a ``ManualClock`` to make it poll.
@Suite("PostgreSQL: the revocation poller", .timeLimit(.minutes(1)))
struct PostgresRevocationPollerTests {
    @Test("The poller reads the feed again when its clock passes the interval: a session another process revoked is forgotten then")
    func pollsOnItsClock() async throws {
        let url = try postgresURL()
        var logger = Logger(label: "tally.poller-tests")
        logger.logLevel = .warning
        let clock = ManualClock(defaultStart)
        // Sessions trusted for an hour after a poll: only a poll can make the reader forget one.
        let writer = PostgresStore(
            configuration: try PostgresStore.configuration(url: url, maximumConnections: 2), logger: logger,
            sessionStaleness: .seconds(3600))
        let reader = PostgresStore(
            configuration: try PostgresStore.configuration(url: url, maximumConnections: 2), logger: logger,
            sessionStaleness: .seconds(3600), clock: clock)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await writer.run() }
            defer { group.cancelAll() }
            try await writer.migrate()
            group.addTask { try await reader.run() }
            try await clock.waitForSleepers()  // the reader's first poll is done: its feed is fresh

            let grant = try await writer.signInGuest(
                deviceHash: randomId("device-"), ipHash: randomId("ip-"), signupsPerHour: 1_000_000, signupGrant: 0,
                sessionId: randomId("session-"),
                refresh: NewRefreshToken(hash: randomId("refresh-"), expiresAt: clock.now.addingTimeInterval(3600)),
                sessionsPerUser: 50, now: clock.now)
            #expect(try await reader.liveSessionUser(sessionId: grant.sessionId) == grant.user.id)
            try await writer.revokeSession(id: grant.sessionId, now: clock.now)
            #expect(
                try await reader.liveSessionUser(sessionId: grant.sessionId) == grant.user.id,
                "remembered until the next poll (else this test shows nothing about the poller)")

            clock.advance(by: PostgresStore.revocationPollInterval - 0.001)
            #expect(clock.sleeperCount == 1, "not yet due")
            clock.advance(by: 0.001)
            try await clock.waitForSleepers()  // woken, polled, asleep again
            #expect(try await reader.liveSessionUser(sessionId: grant.sessionId) == nil)
        }
    }
}
