import Foundation
import GRDB
import PostgresNIO
import TallyStore
import Testing

@testable import TallyPostgres
@testable import TallySQLite

/// The two schemas, migrated to their latest versions, hold the same rows to the same rules: table by table, the same
/// unique keys (as column sets, partial or not), the same NOT NULL columns and the same CHECK constraints (compared by
/// the set of columns each one mentions: their SQL differs by dialect). What differs on purpose is listed in
/// ``knownDifferences`` with its reason; a difference not listed fails, and so does a listed one that is gone.
@Suite("Schema parity: SQLite and PostgreSQL", .timeLimit(.minutes(10)))
struct SchemaParityTests {
    /// The shape of one table as compared.
    struct TableShape: Hashable {
        /// Its columns.
        var columns: Set<String> = []
        /// Columns that refuse NULL (a primary key's included: both stores refuse a NULL key).
        var notNull: Set<String> = []
        /// Unique keys: columns in key order joined by `,` (an expression as `<expr>`), `partial` for a partial index.
        var uniques: Set<String> = []
        /// CHECK constraints, each as the sorted columns it mentions joined by `,`.
        var checks: Set<String> = []
    }

    /// Differences the schemas keep on purpose, each a line of ``differences(_:_:)`` with why it is right.
    static let knownDifferences: [String: String] = [
        // Tables of one store only.
        "table tally_schema_migrations: postgres only":
            "PostgreSQL's own migration ledger (SQLite's is GRDB's `grdb_migrations`, not compared)",
        "table server_instances: postgres only":
            "the heartbeats by which several server processes agree on their keys (KeyAgreement); a SQLite store is one process",
        "table session_revocations: postgres only":
            "the revocation feed other processes poll; SQLite's one process forgets a revoked session as its write commits",
        // Booleans: PostgreSQL's BOOLEAN type holds them to two values; SQLite's INTEGER needs a CHECK.
        "purchases check claimed: sqlite only": "a boolean: `claimed IN (0, 1)` is PostgreSQL's BOOLEAN type",
        "consumption_consents check consented: sqlite only": "a boolean: `consented = 0 OR consented = 1` is PostgreSQL's BOOLEAN type",
        "documents check deleted: sqlite only": "a boolean: `deleted IN (0, 1)` is PostgreSQL's BOOLEAN type",
        // A tombstone's data: NULL on SQLite, '' on PostgreSQL (NOT NULL there); the same rules in that shape.
        "documents not null data: postgres only": "a tombstone's data is '' on PostgreSQL, NULL on SQLite (documents_tombstone)",
        "documents check data: sqlite only":
            "a live document's data is an object: SQLite's `json_type(data) = 'object' OR data IS NULL` (a tombstone's NULL), PostgreSQL's `deleted OR left(data, 1) = '{'` (data, deleted)",
        "documents check deleted,range_value: sqlite only":
            "a tombstone has no range value: a CHECK of its own on SQLite, part of PostgreSQL's documents_tombstone",
        "documents check data,deleted,range_value: postgres only":
            "documents_tombstone: `deleted = (data = '') AND (NOT deleted OR range_value IS NULL)`, SQLite's two CHECKs in one",
        // The same rules, split into CHECKs differently.
        "ledger_entries check amount,kind: sqlite only":
            "the amounts of purchase, refund, reversal and premium entries: four CHECKs on SQLite, part of ledger_entries_purchase_amounts_check",
        "ledger_entries check held_change,kind: sqlite only":
            "those entries hold nothing: a CHECK of its own on SQLite, part of ledger_entries_purchase_amounts_check",
        "ledger_entries check amount,held_change,kind: postgres only":
            "ledger_entries_purchase_amounts_check: SQLite's five CHECKs on kind, amount and held_change in one",
        "users check apple_email,apple_sub: sqlite only":
            "an Apple email only with an identity: SQLite added each column with its own CHECK, PostgreSQL's users_apple_contact has both",
        "users check apple_refresh_token,apple_sub: sqlite only":
            "an Apple refresh token only with an identity: as above, part of PostgreSQL's users_apple_contact",
        "users check apple_email,apple_refresh_token,apple_sub: postgres only": "users_apple_contact: SQLite's two CHECKs in one",
        // Redundant on PostgreSQL.
        "purchases check claimed,kind,refunded_tokens,reversed_at: postgres only":
            "v9's CHECK that a subscription is unclaimed, unrefunded and unreversed, implied by purchases_subscription_check and purchases_refunded_check since v15; SQLite dropped it when it rebuilt the table, PostgreSQL kept it",
    ]

    @Test("Each table has the same unique keys, NOT NULL columns and CHECKs on both stores, but for the differences listed")
    func parity() async throws {
        let sqlite = try await Self.sqliteShapes()
        var checked = false
        try await withPostgresStore(isolated: true) { store in
            let postgres = try await Self.postgresShapes(store)
            let found = Self.differences(sqlite, postgres)
            let unexplained = found.filter { Self.knownDifferences[$0] == nil }
            let gone = Set(Self.knownDifferences.keys).subtracting(found)
            #expect(unexplained.isEmpty, "differences without a reason in knownDifferences:\n\(unexplained.sorted().joined(separator: "\n"))")
            #expect(gone.isEmpty, "listed differences that are gone (remove them):\n\(gone.sorted().joined(separator: "\n"))")
            #expect(sqlite.count > 20 && postgres.count > 20, "the test reads the schemas (\(sqlite.count), \(postgres.count) tables)")
            #expect(sqlite["wallets"]?.checks.isEmpty == false, "CHECKs are parsed: \(sqlite["wallets"].map { "\($0)" } ?? "no wallets")")
            checked = true
        }
        // Without a database the PostgreSQL side is skipped (see `withPostgresStore`); the SQLite side still parsed.
        if !checked { #expect(sqlite["wallets"]?.checks.isEmpty == false) }
    }

    @Test("The CHECK reader finds the columns a clause mentions, not its string literals or keywords")
    func checkColumns() {
        let sql = """
            CREATE TABLE t (a INTEGER NOT NULL CHECK (a >= 0), -- a's comment: CHECK (status)
              "b" TEXT CHECK (b IN ('a', 'open')) /* not CHECK (a) */, status TEXT,
              CONSTRAINT ties CHECK ((status = 'open') = (b IS NULL)), CHECK(a <= length(b)))
            """
        #expect(Self.checkColumns(createTable: sql, columns: ["a", "b", "status", "open"]) == ["a", "b", "b,status", "a,b"])
    }

    /// One line per difference between the schemas' `sqlite` and `postgres` tables.
    static func differences(_ sqlite: [String: TableShape], _ postgres: [String: TableShape]) -> Set<String> {
        var found = Set<String>()
        for table in Set(sqlite.keys).subtracting(postgres.keys) { found.insert("table \(table): sqlite only") }
        for table in Set(postgres.keys).subtracting(sqlite.keys) { found.insert("table \(table): postgres only") }
        for table in Set(sqlite.keys).intersection(postgres.keys) {
            let (s, p) = (sqlite[table]!, postgres[table]!)
            func compare(_ what: String, _ a: Set<String>, _ b: Set<String>) {
                for item in a.subtracting(b) { found.insert("\(table) \(what) \(item): sqlite only") }
                for item in b.subtracting(a) { found.insert("\(table) \(what) \(item): postgres only") }
            }
            compare("column", s.columns, p.columns)
            compare("not null", s.notNull.intersection(p.columns), p.notNull.intersection(s.columns))
            compare("unique", s.uniques, p.uniques)
            compare("check", s.checks, p.checks)
        }
        return found
    }

    // MARK: SQLite

    /// Every table of a freshly migrated SQLite store (GRDB's migration table left out).
    static func sqliteShapes() async throws -> [String: TableShape] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try await store.migrate()
        return try await store.pool.read { db in
            var shapes: [String: TableShape] = [:]
            let tables = try Row.fetchAll(
                db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'grdb_migrations'")
            for table in tables {
                let name: String = table["name"]
                var shape = TableShape()
                var primaryKey: [(Int, String)] = []
                // `table_xinfo`: generated columns too (`table_info` leaves them out).
                for column in try Row.fetchAll(db, sql: #"SELECT name, "notnull" AS not_null, pk FROM pragma_table_xinfo(?)"#, arguments: [name]) {
                    let columnName: String = column["name"]
                    shape.columns.insert(columnName)
                    if column["not_null"] as Bool { shape.notNull.insert(columnName) }
                    let pk: Int = column["pk"]
                    if pk > 0 { primaryKey.append((pk, columnName)) }
                }
                if !primaryKey.isEmpty {
                    let key = primaryKey.sorted { $0.0 < $1.0 }.map(\.1)
                    shape.uniques.insert(key.joined(separator: ","))
                    shape.notNull.formUnion(key)
                }
                for index in try Row.fetchAll(db, sql: #"SELECT name, "unique" AS is_unique, partial FROM pragma_index_list(?)"#, arguments: [name])
                where index["is_unique"] as Bool {
                    let indexName: String = index["name"]
                    let columns = try Row.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?) ORDER BY seqno", arguments: [indexName])
                        .map { ($0["name"] as String?) ?? "<expr>" }
                    shape.uniques.insert(columns.joined(separator: ",") + (index["partial"] as Bool ? " partial" : ""))
                }
                shape.checks = Set(checkColumns(createTable: table["sql"], columns: shape.columns))
                shapes[name] = shape
            }
            return shapes
        }
    }

    /// The columns each CHECK clause of a `CREATE TABLE` statement mentions (sorted, joined by `,`), in order: the
    /// clause's text with its string literals taken out, searched for the table's column names as whole words.
    static func checkColumns(createTable sql: String, columns: Set<String>) -> [String] {
        let text = Array(withoutComments(sql))
        var found: [String] = []
        var index = 0
        func isWord(_ c: Character) -> Bool { c.isLetter || c.isNumber || c == "_" }
        while index < text.count {
            // Skip string literals and quoted identifiers as wholes (a CHECK inside one is not a clause).
            if text[index] == "'" {
                index += 1
                while index < text.count, text[index] != "'" { index += 1 }
                index += 1
                continue
            }
            guard index + 5 <= text.count, String(text[index..<index + 5]).uppercased() == "CHECK",
                index == 0 || !isWord(text[index - 1]), index + 5 == text.count || !isWord(text[index + 5])
            else {
                index += 1
                continue
            }
            var cursor = index + 5
            while cursor < text.count, text[cursor].isWhitespace { cursor += 1 }
            guard cursor < text.count, text[cursor] == "(" else {
                index = cursor
                continue
            }
            // The clause: up to the matching parenthesis, string literals blanked.
            var depth = 0
            var clause = ""
            var inString = false
            while cursor < text.count {
                let c = text[cursor]
                if inString {
                    if c == "'" { inString = false }
                    clause.append(" ")
                } else if c == "'" {
                    inString = true
                    clause.append(" ")
                } else {
                    if c == "(" { depth += 1 }
                    if c == ")" { depth -= 1 }
                    clause.append(c == "\"" ? " " : c)
                    if depth == 0 { break }
                }
                cursor += 1
            }
            let words = Set(clause.split(whereSeparator: { !isWord($0) }).map { $0.lowercased() })
            found.append(columns.filter { words.contains($0.lowercased()) }.sorted().joined(separator: ","))
            index = cursor + 1
        }
        return found
    }

    /// `sql` without its `--` comments (to the end of their line) and `/* */` comments, string literals left whole:
    /// a comment's apostrophe would otherwise open a string.
    static func withoutComments(_ sql: String) -> String {
        let text = Array(sql)
        var kept = ""
        var index = 0
        while index < text.count {
            let c = text[index]
            let next: Character? = index + 1 < text.count ? text[index + 1] : nil
            if c == "'" {
                kept.append(c)
                index += 1
                while index < text.count {
                    kept.append(text[index])
                    index += 1
                    if text[index - 1] == "'" { break }
                }
            } else if c == "-", next == "-" {
                while index < text.count, text[index] != "\n" { index += 1 }
            } else if c == "/", next == "*" {
                index += 2
                while index + 1 < text.count, !(text[index] == "*" && text[index + 1] == "/") { index += 1 }
                index += 2
                kept.append(" ")
            } else {
                kept.append(c)
                index += 1
            }
        }
        return kept
    }

    // MARK: PostgreSQL

    /// Every table of `store`'s schema (its `search_path`'s first: an isolated store's own), the migration ledger included.
    static func postgresShapes(_ store: PostgresStore) async throws -> [String: TableShape] {
        var shapes: [String: TableShape] = [:]
        for row in try await store.rows(
            """
            SELECT table_name::TEXT, column_name::TEXT, is_nullable = 'NO' AS not_null FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name IN (
              SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')
            """)
        {
            let (table, column, notNull) = try row.decode((String, String, Bool).self)
            shapes[table, default: TableShape()].columns.insert(column)
            if notNull { shapes[table, default: TableShape()].notNull.insert(column) }
        }
        // Unique indexes, those behind PRIMARY KEY and UNIQUE constraints (pg_constraint's `p` and `u`) included.
        for row in try await store.rows(
            """
            SELECT t.relname::TEXT, i.indpred IS NOT NULL AS partial,
                   array_to_string(ARRAY(
                     SELECT coalesce(a.attname::TEXT, '<expr>') FROM unnest(i.indkey::INT2[]) WITH ORDINALITY AS k(attnum, n)
                     LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.n), ',') AS columns
            FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace
            WHERE ns.nspname = current_schema() AND i.indisunique
            """)
        {
            let (table, partial, columns) = try row.decode((String, Bool, String).self)
            shapes[table, default: TableShape()].uniques.insert(columns + (partial ? " partial" : ""))
        }
        // CHECK constraints (`c`) by the columns they mention (`conkey`).
        for row in try await store.rows(
            """
            SELECT t.relname::TEXT,
                   array_to_string(ARRAY(
                     SELECT a.attname::TEXT FROM unnest(c.conkey) AS k(attnum)
                     JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY 1), ',') AS columns
            FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace
            WHERE ns.nspname = current_schema() AND c.contype = 'c'
            """)
        {
            let (table, columns) = try row.decode((String, String).self)
            shapes[table, default: TableShape()].checks.insert(columns)
        }
        return shapes
    }
}
