import Foundation
import GRDB
import TallyStore
import Testing

@testable import TallySQLite

/// The statements every metered request runs on SQLite compile without an ephemeral table. SQLite 3.40 turns a CHECK's
/// `IN (…)` list of three or more constants into an ephemeral table that each insert builds and drops (a temporary
/// b-tree: its pager opened, its pages allocated and zeroed): the ledger's three such lists made its insert cost 51 µs
/// instead of 16 µs and the SQLite action 0.67× of what it was before them (benchmarks/bench-issue43-ab-2026-11-26.md).
@Suite("SQLite: hot statements build no ephemeral tables", .timeLimit(.minutes(1)))
struct SQLiteHotStatementsTests {
    /// Each hot write, as the store runs it (literals for its bound parameters).
    static let statements = [
        """
        INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
        VALUES ('u', 'debit', -1, 0, 5, 0, 'x', 1, NULL)
        """,
        "INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at) VALUES ('u', 'k', 'f', 200, x'', 1)",
        "INSERT INTO quota_counters (user_id, quota, used, window_end) VALUES ('u', 'q', 1, 1)",
        "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES ('h', 'u', 5, 'open', 1, 2)",
        "UPDATE holds SET status = 'captured', captured_amount = 1, settled_at = 2 WHERE id = 'h' AND status = 'open'",
    ]

    @Test("No hot write of the migrated schema opens an ephemeral table", arguments: statements)
    func noEphemeralTables(sql: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try await store.migrate()
        // On the writer: a reader connection is query-only and compiles no CHECKs.
        let opcodes = try await store.pool.write { db in try Row.fetchAll(db, sql: "EXPLAIN \(sql)").map { $0["opcode"] as String? ?? "" } }
        #expect(!opcodes.isEmpty)
        #expect(!opcodes.contains("OpenEphemeral"), "\(sql.prefix(40))… builds an ephemeral table on every run")
    }
}
