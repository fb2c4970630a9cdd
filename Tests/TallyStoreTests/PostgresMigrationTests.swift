import Foundation
import PostgresNIO
import TallyStore
import Testing

@testable import TallyPostgres

/// Schema migrations keep what the previous version stored (in a schema of the test's own).
@Suite("PostgreSQL migrations", .timeLimit(.minutes(10)))
struct PostgresMigrationTests {
    @Test(
        "A database of schema 4 migrates to the latest: accounts, sessions, tokens and today's counts kept; devices become installations")
    func upgradeKeepsData() async throws {
        try await withPostgresStore(isolated: true, migrated: false) { store in
            try await store.migrate(upTo: 4)
            let legacy = LegacyAccounts()
            let (now, windowEnd) = (legacy.now.millis, legacy.windowEnd.millis)
            try await store.rows("INSERT INTO users (id, created_at) VALUES (\(legacy.guest), \(now))")
            try await store.rows(
                "INSERT INTO users (id, email, password_hash, created_at) VALUES (\(legacy.linked), \(legacy.email), 'hash', \(now))")
            for (user, device, balance, used) in [(legacy.guest, legacy.guestDevice, Int64(25), Int64(2)), (legacy.linked, legacy.linkedDevice, 0, 3)] {
                try await store.rows(
                    "INSERT INTO wallets (user_id, balance, held, version) VALUES (\(user), \(balance), 0, \(balance > 0 ? Int64(1) : 0))")
                try await store.rows("INSERT INTO device_credentials (device_hash, user_id, created_at) VALUES (\(device), \(user), \(now))")
                try await store.rows(
                    "INSERT INTO quota_counters (user_id, quota, used, window_end) VALUES (\(user), 'readings', \(used), \(windowEnd))")
            }
            try await store.rows(
                """
                INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
                VALUES (\(legacy.guest), 'grant', 25, 0, 25, 0, 'signup', \(now))
                """)
            try await store.rows("INSERT INTO sessions (id, user_id, created_at) VALUES (\(legacy.session), \(legacy.guest), \(now))")
            try await store.rows(
                "INSERT INTO refresh_tokens (token_hash, session_id, expires_at) VALUES (\(legacy.refresh), \(legacy.session), \(now + 3_600_000))")

            try await store.migrate()
            try await legacy.expectMigrated(store, .postgres)
        }
    }

    @Test("A database of schema 5 migrates to 6 while four processes start at once: accounts kept, documents written and removed with their user")
    func documentsMigration() async throws {
        try await withPostgresStore(isolated: true, migrated: false) { store in
            try await store.migrate(upTo: 5)
            let now = defaultStart
            // Written as schema 5 has it (the store's own statements read the latest schema's columns).
            let userId = randomId("user-")
            try await store.rows("INSERT INTO users (id, created_at) VALUES (\(userId), \(now.millis))")
            try await store.rows("INSERT INTO wallets (user_id, balance, held, version) VALUES (\(userId), 25, 0, 1)")
            try await store.rows(
                """
                INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
                VALUES (\(userId), 'grant', 25, 0, 25, 0, 'signup', \(now.millis))
                """)
            // Each call runs on its own connection, as several server processes starting at once do.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 { group.addTask { try await store.migrate() } }
                try await group.waitForAll()
            }
            let applied: [Int64] = try await store.rows("SELECT version::BIGINT AS version FROM tally_schema_migrations ORDER BY version")
                .map { try Columns($0)["version"] }
            #expect(applied == PostgresSchema.migrations.map { Int64($0.version) })
            #expect(try await store.wallet(userId: userId, now: now) == WalletState(balance: 25, held: 0, version: 1))

            let note = CollectionSpec(name: "notes")
            let written = try await store.writeDocument(
                DocumentMutation(collection: note, docId: "first", operation: .put(.object(["text": .string("kept")]))), userId: userId,
                idempotency: nil, now: now
            ) { outcome in StoredResponse(status: outcome.created ? 201 : 200, body: []) }
            #expect(written.response.status == 201)
            #expect(try await store.document(userId: userId, collection: "notes", id: "first")?.version == 1)
            #expect(try await store.deleteUser(id: userId))
            let left = try await store.rows("SELECT (SELECT count(*) FROM documents) + (SELECT count(*) FROM sync_state) AS rows")
            #expect(try Columns(try #require(left.first))["rows"] == Int64(0))
        }
    }
}
