import Foundation
import Logging
import TallySQLite
import TallyStore
import Testing

@testable import TallyServer

/// One housekeeping sweep, on the embedded store and a manual clock.
@Suite("Housekeeping")
struct HousekeepingTests {
    @Test("A sweep purges sessions revoked a day ago with their tokens; live sessions stay")
    func sweepPurgesSessionsAndFailures() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-housekeeping-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try await store.migrate()
        let clock = ManualClock()
        func signIn() async throws -> (SessionGrant, NewRefreshToken) {
            let refresh = NewRefreshToken(hash: UUID().uuidString, expiresAt: clock.now.addingTimeInterval(30 * 86_400))
            let grant = try await store.signInGuest(
                deviceHash: UUID().uuidString, ipHash: "ip", signupsPerHour: 100, signupGrant: 0, sessionId: UUID().uuidString,
                refresh: refresh, sessionsPerUser: 50, now: clock.now)
            return (grant, refresh)
        }
        let (revoked, revokedToken) = try await signIn()
        let (live, liveToken) = try await signIn()
        try await store.revokeSession(id: revoked.sessionId, now: clock.now)
        let housekeeping = Housekeeping(
            store: store, clock: clock, interval: .seconds(1), logger: Logger(label: "tally.test"), ready: StartupGate())

        clock.advance(by: Housekeeping.sessionRetention - 1)
        _ = try await housekeeping.sweep()
        #expect(try await store.refreshTokenSession(hash: revokedToken.hash) == revoked.sessionId, "purged before its day was over")
        clock.advance(by: 2)
        _ = try await housekeeping.sweep()
        #expect(try await store.refreshTokenSession(hash: revokedToken.hash) == nil)
        #expect(try await store.refreshTokenSession(hash: liveToken.hash) == live.sessionId)
        #expect(try await store.liveSessionUser(sessionId: live.sessionId) == live.user.id)
    }
}
