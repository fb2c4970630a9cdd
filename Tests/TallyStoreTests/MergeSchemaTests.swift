import Foundation
import GRDB
import PostgresNIO
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres
@testable import TallySQLite

/// The migration to Apple identities and merges (SQLite v10, PostgreSQL 12) keeps the books and accounts as they were,
/// and the migrated schema holds the new rules by itself, without the planner.
@Suite("Merge and Apple identity schema", .timeLimit(.minutes(10)))
struct MergeSchemaTests {
    /// After the migration: the books written before it (``PurchaseMigrationTests/OldBooks``, and an open hold of 5) as
    /// they were, ids going on after the deleted account's, the account neither linked to Apple nor merged, and a merge
    /// of it into an Apple account.
    static func expectMigrated(_ books: PurchaseMigrationTests.OldBooks, _ store: any TallyStorage, _ kind: StoreKind) async throws {
        let (kept, now) = (books.kept, books.now)
        let f = Fixture(store: store, kind: kind, clock: ManualClock(now))
        #expect(try await store.wallet(userId: kept, now: now) == WalletState(balance: 20, held: 5, version: 3), "[\(kind)]")
        #expect(try await f.allEntries(kept).map(\.kind) == [.grant, .debit, .hold], "[\(kind)]")
        let user = try await store.user(id: kept)
        #expect(user?.hasAppleIdentity == false && user?.mergedInto == nil && user?.isGuest == true, "[\(kind)]")
        let next = try await f.run(.grant(userId: kept, amount: 1, reason: "after"))
        #expect((next.entry?.id ?? 0) > 5, "[\(kind)] entry id \(String(describing: next.entry?.id)) reused")
        let account = try await store.signInWithApple(
            AppleCredential(subject: randomId("sub-")), sessionId: randomId(), refresh: f.refresh(), sessionsPerUser: 5, signupGrant: 0,
            now: now)
        let merged = try await store.merge(guestId: kept, into: account.user.id, now: now)
        #expect(merged.summary.tokensMoved == 21 && merged.summary.holdsMoved == 1 && merged.summary.holdsReleased == 0, "[\(kind)]")
        try await f.checkInvariants([kept, account.user.id])
    }

    @Test("SQLite: a v9 database migrates to v10 with its books, entry ids and id sequence kept")
    func sqliteMigration() async throws {
        try await withSQLite { store in
            try Schema.migrator.migrate(store.pool, upTo: "v9")
            let books = PurchaseMigrationTests.OldBooks()
            try await store.pool.write { db in
                try books.write(db)
                try db.execute(
                    sql: "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES (?, ?, 5, 'open', 0, ?)",
                    arguments: [randomId(), books.kept, books.now.addingTimeInterval(600).millis])
            }
            try await store.migrate()
            try await Self.expectMigrated(books, store, .sqlite)
            let leftovers = try await store.pool.read { db in try db.tableExists("next_ledger_entries") }
            #expect(!leftovers, "the migration's table was renamed")
        }
    }

    @Test("PostgreSQL: a database of schema 11 migrates to 12 with its books and entry ids kept")
    func postgresMigration() async throws {
        try await withPostgresStore(isolated: true, migrated: false) { store in
            try await store.migrate(upTo: 11)
            let books = PurchaseMigrationTests.OldBooks()
            try await books.write(store)
            try await store.rows(
                """
                INSERT INTO holds (id, user_id, amount, status, created_at, expires_at)
                VALUES (\(randomId()), \(books.kept), 5, 'open', 0, \(books.now.addingTimeInterval(600).millis))
                """)
            try await store.migrate()
            try await Self.expectMigrated(books, store, .postgres)
        }
    }

    @Test(
        "The schema refuses, without the planner: a second merge_out or merge_in of a guest, a merge entry naming its own account or moving held tokens, a negative merge_in below what is available, an Apple identity on an installation's guest or on two accounts, a merged account with a way in",
        arguments: StoreKind.allCases)
    func schemaHoldsTheRules(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.newUser(tokens: 4)
            let account = try await f.newUser(tokens: 2)
            _ = try await f.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
            _ = try await f.store.merge(guestId: guest, into: account, now: f.now)
            let insert = """
                INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
                VALUES (?, ?, ?, ?, ?, ?, 'schema test', 0, ?)
                """
            let other = try await f.newUser()
            // (user, kind, amount, held change, balance after, held after, reference): each breaks one rule.
            let refused: [[RawValue]] = [
                [.text(guest), .text("merge_out"), .int(0), .int(0), .int(0), .int(0), .text(account)],
                [.text(account), .text("merge_in"), .int(0), .int(0), .int(6), .int(0), .text(guest)],
                [.text(other), .text("merge_in"), .int(0), .int(0), .int(0), .int(0), .text(other)],
                [.text(other), .text("merge_out"), .int(0), .int(0), .int(0), .int(0), .null],
                [.text(other), .text("merge_in"), .int(0), .int(1), .int(0), .int(1), .text(randomId())],
                [.text(other), .text("merge_in"), .int(-1), .int(0), .int(-1), .int(0), .text(randomId())],
            ]
            for values in refused {
                await #expect(throws: (any Error).self, "[\(kind)] \(values)") { try await Self.execute(insert, values, on: f.store) }
            }
            // Allowed: a negative merge_in that leaves something available.
            try await Self.execute(insert, [.text(account), .text("merge_in"), .int(-1), .int(0), .int(5), .int(0), .text(other)], on: f.store)

            let sub = randomId("sub-")
            let device = randomId("dev-")
            let onDevice = try await f.signIn(device: device).user.id
            let linked = try await f.newUser()
            _ = try await f.store.linkApple(userId: linked, credential: AppleCredential(subject: sub), now: f.now)
            let refusedUpdates: [(String, [RawValue])] = [
                ("UPDATE users SET apple_sub = ?, apple_linked_at = 0 WHERE id = ?", [.text(randomId()), .text(onDevice)]),
                ("UPDATE users SET apple_sub = ?, apple_linked_at = 0, installation = NULL WHERE id = ?", [.text(sub), .text(onDevice)]),
                ("UPDATE users SET apple_email = 'x@example.com' WHERE id = ?", [.text(onDevice)]),
                ("UPDATE users SET email = 'x@example.com', password_hash = 'h' WHERE id = ?", [.text(guest)]),
                ("UPDATE users SET installation = ? WHERE id = ?", [.text(device), .text(guest)]),
                ("UPDATE users SET merged_into = id WHERE id = ?", [.text(other)]),
                ("UPDATE users SET merged_into = ? WHERE id = ?", [.text(account), .text(linked)]),
                ("INSERT INTO merges (guest_id, account_id, summary, merged_at) VALUES (?, ?, '{}', 0)", [.text(guest), .text(other)]),
            ]
            for (sql, values) in refusedUpdates {
                await #expect(throws: (any Error).self, "[\(kind)] \(sql)") { try await Self.execute(sql, values, on: f.store) }
            }
        }
    }

    /// A value bound to a raw statement.
    enum RawValue: Sendable, CustomStringConvertible {
        case text(String), int(Int64), null

        var description: String {
            switch self {
            case .text(let text): text
            case .int(let int): "\(int)"
            case .null: "NULL"
            }
        }
    }

    /// Runs `sql` (`?` placeholders) with `values` bound, directly, as no store code does.
    static func execute(_ sql: String, _ values: [RawValue], on store: any TallyStorage) async throws {
        switch store {
        case let sqlite as SQLiteStore:
            let arguments = StatementArguments(values.map { value -> (any DatabaseValueConvertible)? in
                switch value {
                case .text(let text): text
                case .int(let int): int
                case .null: nil
                }
            })
            try await sqlite.pool.write { db in try db.execute(sql: sql, arguments: arguments) }
        case let postgres as PostgresStore:
            var bindings = PostgresBindings()
            var numbered = ""
            for character in sql {
                if character == "?" {
                    numbered += "$\(bindings.count + 1)"
                    switch values[bindings.count] {
                    case .text(let text): bindings.append(text)
                    case .int(let int): bindings.append(int)
                    case .null: bindings.appendNull()
                    }
                } else {
                    numbered.append(character)
                }
            }
            try await postgres.rows(PostgresQuery(unsafeSQL: numbered, binds: bindings))
        default:
            throw HarnessError("no such store")
        }
    }

    /// A fresh, unmigrated SQLite store in a directory of its own.
    private func withSQLite(_ body: (SQLiteStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path))
    }
}
