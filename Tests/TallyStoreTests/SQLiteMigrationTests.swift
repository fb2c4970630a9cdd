import Foundation
import GRDB
import TallyStore
import Testing

@testable import TallySQLite

/// Schema migrations keep what the previous version stored.
@Suite("SQLite migrations")
struct SQLiteMigrationTests {
    @Test("A database of schema v1 migrates to the latest with its accounts, sessions and tokens intact")
    func upgradeKeepsData() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try Schema.migrator.migrate(store.pool, upTo: "v1")
        let now = defaultStart
        let refresh = NewRefreshToken(hash: randomId("rt-"), expiresAt: now.addingTimeInterval(3600))
        let grant = try await store.signInGuest(
            deviceHash: randomId("dev-"), ipHash: randomId("ip-"), signupsPerHour: 10, signupGrant: 25, sessionId: randomId("ses-"),
            refresh: refresh, sessionsPerUser: 50, now: now)

        try await store.migrate()
        #expect(try await store.user(id: grant.user.id) == grant.user)
        #expect(try await store.wallet(userId: grant.user.id, now: now)?.balance == 25)
        #expect(try await store.liveSessionUser(sessionId: grant.sessionId) == grant.user.id)
        #expect(try await store.refreshTokenSession(hash: refresh.hash) == grant.sessionId)
        guard case .admit = try await store.beginSignIn(account: randomId(), address: randomId(), policy: SignInPolicy(), now: now) else {
            Issue.record("the new table refuses a first attempt")
            return
        }
    }
}
