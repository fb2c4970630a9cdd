import Foundation
import GRDB
import TallyStore
import Testing

@testable import TallySQLite

/// Schema migrations keep what the previous version stored.
@Suite("SQLite migrations", .timeLimit(.minutes(10)))
struct SQLiteMigrationTests {
    @Test("A database of schema v1 migrates to the latest: accounts, sessions, tokens and today's counts kept; devices become installations")
    func upgradeKeepsData() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try Schema.migrator.migrate(store.pool, upTo: "v1")
        let legacy = LegacyAccounts()
        try await store.pool.write { db in
            let (now, windowEnd) = (legacy.now.millis, legacy.windowEnd.millis)
            try db.execute(sql: "INSERT INTO users (id, created_at) VALUES (?, ?)", arguments: [legacy.guest, now])
            try db.execute(sql: "INSERT INTO users (id, email, password_hash, created_at) VALUES (?, ?, 'hash', ?)",
                arguments: [legacy.linked, legacy.email, now])
            for (user, device, balance, used) in [(legacy.guest, legacy.guestDevice, 25, 2), (legacy.linked, legacy.linkedDevice, 0, 3)] {
                try db.execute(sql: "INSERT INTO wallets (user_id, balance, held, version) VALUES (?, ?, 0, ?)",
                    arguments: [user, balance, balance > 0 ? 1 : 0])
                try db.execute(sql: "INSERT INTO device_credentials (device_hash, user_id, created_at) VALUES (?, ?, ?)",
                    arguments: [device, user, now])
                try db.execute(sql: "INSERT INTO quota_counters (user_id, quota, used, window_end) VALUES (?, 'readings', ?, ?)",
                    arguments: [user, used, windowEnd])
            }
            try db.execute(sql: """
                    INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
                    VALUES (?, 'grant', 25, 0, 25, 0, 'signup', ?)
                    """,
                arguments: [legacy.guest, now])
            try db.execute(sql: "INSERT INTO sessions (id, user_id, created_at) VALUES (?, ?, ?)", arguments: [legacy.session, legacy.guest, now])
            try db.execute(sql: "INSERT INTO refresh_tokens (token_hash, session_id, expires_at) VALUES (?, ?, ?)",
                arguments: [legacy.refresh, legacy.session, now + 3_600_000])
        }

        try await store.migrate()
        try await legacy.expectMigrated(store, .sqlite)

        // Accounts from before synced documents start writing them at version 1, and take them when they go.
        let written = try await store.writeDocument(
            DocumentMutation(collection: CollectionSpec(name: "notes"), docId: "first", operation: .put(.object([:]))),
            userId: legacy.linked, idempotency: nil, now: legacy.now
        ) { StoredResponse(status: $0.document.version == 1 && $0.created ? 201 : 500, body: []) }
        #expect(written.response.status == 201)
        #expect(try await store.changes(userId: legacy.linked, after: nil, limit: 10).changes.map(\.id) == ["first"])
        #expect(try await store.deleteUser(id: legacy.linked))
        #expect(try await store.document(userId: legacy.linked, collection: "notes", id: "first") == nil)
    }
}
