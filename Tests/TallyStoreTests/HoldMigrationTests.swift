import Foundation
import GRDB
import TallyStore
import Testing

@testable import TallySQLite

/// SQLite "v15" rebuilds `holds` so a premium AI call can hold 0 tokens: the holds stored before are kept as they were.
@Suite("Hold migrations", .timeLimit(.minutes(1)))
struct HoldMigrationTests {
    @Test("v15 keeps every hold, and takes a hold of 0 tokens but still no negative one")
    func zeroHolds() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try Schema.migrator.migrate(store.pool, upTo: "v14")
        let user = randomId("user-")
        try await store.pool.write { db in
            try db.execute(sql: "INSERT INTO users (id, created_at) VALUES (?, 0)", arguments: [user])
            try db.execute(sql: "INSERT INTO wallets (user_id, balance, held, version) VALUES (?, 50, 30, 2)", arguments: [user])
            try db.execute(sql: """
                INSERT INTO holds (id, user_id, amount, status, captured_amount, created_at, expires_at, settled_at)
                VALUES ('open-1', ?, 30, 'open', NULL, 1, 100, NULL), ('done-1', ?, 20, 'captured', 5, 1, 100, 2)
                """, arguments: [user, user])
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES ('zero', ?, 0, 'open', 1, 100)",
                    arguments: [user])
            }
        }
        try await store.migrate()
        try await store.pool.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, amount, status, captured_amount, settled_at FROM holds ORDER BY id")
            #expect(rows.map { $0["id"] as String } == ["done-1", "open-1"])
            #expect(rows.map { $0["amount"] as Int64 } == [20, 30] && rows.map { $0["captured_amount"] as Int64? } == [5, nil])
            #expect(rows.map { $0["settled_at"] as Int64? } == [2, nil] && rows.map { $0["status"] as String } == ["captured", "open"])
            try db.execute(sql: "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES ('zero', ?, 0, 'open', 1, 100)",
                arguments: [user])
            try db.execute(sql: "UPDATE holds SET status = 'captured', captured_amount = 0, settled_at = 2 WHERE id = 'zero'")
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES ('minus', ?, -1, 'open', 1, 100)",
                    arguments: [user])
            }
            // The indexes came back with the table.
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'holds' AND sql IS NOT NULL ORDER BY name")
            #expect(indexes == ["holds_open", "holds_user"])
        }
    }
}
