import Foundation
import Logging
import TallySQLite
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// Housekeeping sweeps, on the embedded store and a manual clock.
@Suite("Housekeeping", .timeLimit(.minutes(1)))
struct HousekeepingTests {
    @Test("A sweep purges sessions revoked a day ago with their tokens; live sessions stay")
    func sweepPurgesSessionsAndFailures() async throws {
        let (store, directory) = try await Self.scratchStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualClock()
        let (revoked, revokedToken) = try await Self.signIn(store, clock)
        let (live, liveToken) = try await Self.signIn(store, clock)
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

    @Test("The service sweeps once started and again when its clock passes the interval")
    func runSweepsOnItsClock() async throws {
        let (store, directory) = try await Self.scratchStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ManualClock()
        let (grant, refresh) = try await Self.signIn(store, clock)
        try await store.revokeSession(id: grant.sessionId, now: clock.now)
        let ready = StartupGate()
        let housekeeping = Housekeeping(
            store: store, clock: clock, interval: .seconds(600), logger: Logger(label: "tally.test"), ready: ready)
        let running = Task { try await housekeeping.run() }
        defer { running.cancel() }

        ready.open()
        try await clock.waitForSleepers()  // the first sweep is done: it found nothing to purge
        #expect(try await store.refreshTokenSession(hash: refresh.hash) == grant.sessionId)

        // The revoked session's day passes while the service sleeps: it stays until the interval is over too.
        clock.set(clock.now.addingTimeInterval(Housekeeping.sessionRetention + 1))
        try await clock.waitForSleepers()  // woken (its deadline passed), swept, asleep again
        #expect(try await store.refreshTokenSession(hash: refresh.hash) == nil, "the sweep after the interval purges it")
    }

    private static func scratchStore() async throws -> (SQLiteStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-housekeeping-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try await store.migrate()
        return (store, directory)
    }

    private static func signIn(_ store: SQLiteStore, _ clock: ManualClock) async throws -> (SessionGrant, NewRefreshToken) {
        let refresh = NewRefreshToken(hash: UUID().uuidString, expiresAt: clock.now.addingTimeInterval(30 * 86_400))
        let grant = try await store.signInGuest(
            deviceHash: UUID().uuidString, ipHash: "ip", signupsPerHour: 100, signupGrant: 0, sessionId: UUID().uuidString,
            refresh: refresh, sessionsPerUser: 50, now: clock.now)
        return (grant, refresh)
    }
}
