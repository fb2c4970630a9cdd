import Foundation
import GRDB
import PostgresNIO
import TallyStore
import Testing

@testable import TallyPostgres
@testable import TallySQLite

/// The migration to purchases (SQLite v9, PostgreSQL 11) keeps the books as they were — wallets, entries, their ids,
/// and the ids used before — and the migrated schema takes refunds below zero and refuses the rest.
@Suite("Purchase migrations")
struct PurchaseMigrationTests {
    /// Books from before purchases: an account with a grant, a debit and an open hold; a deleted account whose entries
    /// had the highest ids.
    struct OldBooks {
        let kept = randomId()
        let gone = randomId()
        let now = defaultStart

        /// After the migration: the kept account's books as they were, and entry ids that go on after the deleted ones.
        func expectMigrated(_ store: any TallyStorage, _ kind: StoreKind) async throws {
            let f = Fixture(store: store, kind: kind, clock: ManualClock(now))
            #expect(try await store.wallet(userId: kept, now: now) == WalletState(balance: 20, held: 5, version: 3), "[\(kind)]")
            let entries = try await f.allEntries(kept)
            #expect(entries.map(\.kind) == [.grant, .debit, .hold] && entries.allSatisfy { $0.reference == nil }, "[\(kind)]")
            #expect(try await store.user(id: kept)?.purchasedPremiumUntil == nil, "[\(kind)]")
            let next = try await f.run(.grant(userId: kept, amount: 1, reason: "after"))
            #expect((next.entry?.id ?? 0) > 5, "[\(kind)] entry id \(String(describing: next.entry?.id)) reused")

            // A purchase spent and refunded: below zero, as the new rules allow.
            let bought = AppStoreFacts.consumable(for: kept, purchased: now)
            try await f.redeem(bought, by: kept)
            try await f.run(.performAction(userId: kept, action: ActionSpec(name: "all", tokens: 116), quotaLimit: nil))
            try await f.deliver(AppStoreFacts.notification(.refund, bought.signed(at: now, revoked: now), signed: now))
            #expect(try await store.wallet(userId: kept, now: now) == WalletState(balance: -95, held: 5, version: 7), "[\(kind)]")
            try await f.checkInvariants([kept])
        }

        /// The wallets: (user, balance, held, version).
        var wallets: [(String, Int64, Int64, Int64)] { [(kept, 20, 5, 3), (gone, 0, 0, 2)] }
        /// The entries: (user, kind, amount, held change, balance after, held after), in id order 1...5.
        var entries: [(String, String, Int64, Int64, Int64, Int64)] {
            [
                (kept, "grant", 25, 0, 25, 0), (kept, "debit", -5, 0, 20, 0), (kept, "hold", 0, 5, 20, 5),
                (gone, "grant", 3, 0, 3, 0), (gone, "debit", -3, 0, 0, 0),
            ]
        }

        /// Writes the books into an SQLite database of an older schema (as its rows were then), and deletes `gone`.
        func write(_ db: Database) throws {
            for (user, balance, held, version) in wallets {
                try db.execute(sql: "INSERT INTO users (id, created_at) VALUES (?, 0)", arguments: [user])
                try db.execute(sql: "INSERT INTO wallets (user_id, balance, held, version) VALUES (?, ?, ?, ?)",
                    arguments: [user, balance, held, version])
            }
            for (user, kind, amount, heldChange, balance, held) in entries {
                try db.execute(
                    sql: """
                        INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
                        VALUES (?, ?, ?, ?, ?, ?, 'old', 0)
                        """,
                    arguments: [user, kind, amount, heldChange, balance, held])
            }
            try db.execute(sql: "DELETE FROM users WHERE id = ?", arguments: [gone])
        }

        /// Writes the books into a PostgreSQL database of an older schema, and deletes `gone`.
        func write(_ store: PostgresStore) async throws {
            for (user, balance, held, version) in wallets {
                try await store.rows("INSERT INTO users (id, created_at) VALUES (\(user), 0)")
                try await store.rows(
                    "INSERT INTO wallets (user_id, balance, held, version) VALUES (\(user), \(balance), \(held), \(version))")
            }
            for (user, kind, amount, heldChange, balance, held) in entries {
                try await store.rows(
                    """
                    INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
                    VALUES (\(user), \(kind), \(amount), \(heldChange), \(balance), \(held), 'old', 0)
                    """)
            }
            try await store.rows("DELETE FROM users WHERE id = \(gone)")
        }
    }

    @Test("SQLite: a v8 database migrates to purchases with its books, entry ids and id sequence kept")
    func sqlite() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try Schema.migrator.migrate(store.pool, upTo: "v8")
        let books = OldBooks()
        try await store.pool.write { db in try books.write(db) }
        try await store.migrate()
        try await books.expectMigrated(store, .sqlite)
        let checks = try await store.pool.read { db in try db.tableExists("next_wallets") || db.tableExists("next_ledger_entries") }
        #expect(!checks, "the migration's tables were renamed")
    }

    @Test("PostgreSQL: a database of schema 10 migrates to purchases with its books and entry ids kept")
    func postgres() async throws {
        try await withPostgresStore(isolated: true, migrated: false) { store in
            try await store.migrate(upTo: 10)
            let books = OldBooks()
            try await books.write(store)
            try await store.migrate()
            try await books.expectMigrated(store, .postgres)
        }
    }
}
