import Foundation
import GRDB
import PostgresNIO
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres
@testable import TallySQLite

/// The migration to purchases (SQLite v9, PostgreSQL 11) keeps the books as they were — wallets, entries, their ids,
/// and the ids used before — and the migrated schema takes refunds below zero and refuses the rest.
@Suite("Purchase migrations", .timeLimit(.minutes(10)))
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

/// The migration to one row per subscription (SQLite v13, PostgreSQL 15): the rows of each renewal of an original
/// transaction become one row per account that listed it, saying what the subscription's state says (moved away from
/// the accounts that no longer hold it; revoked after a REVOKE, refunded after a REFUND); a consumable's refund counts
/// as its first.
@Suite("Purchase status migrations", .timeLimit(.minutes(10)))
struct PurchaseStatusMigrationTests {
    /// Purchases as stored before: `moved` renewed once while `earlier` held it, then restored by `later`; `revoked`
    /// revoked by Family Sharing; `refunded` refunded; `waiting` two periods no account holds; `consumable` refunded once.
    struct OldPurchases {
        let earlier = randomId(), later = randomId()
        let moved = randomId("otx-"), revoked = randomId("otx-"), refunded = randomId("otx-"), waiting = randomId("otx-")
        let renewal = randomId("tx-"), waitingRenewal = randomId("tx-"), consumable = randomId("tx-")

        /// (transaction, original, user, purchased day, expires day, signed day)
        var periods: [(String, String, String?, Double, Double, Double)] {
            [
                (moved, moved, later, 0, 30, 31), (renewal, moved, earlier, 30, 60, 30), (revoked, revoked, earlier, 0, 30, 0),
                (refunded, refunded, later, 0, 30, 0), (waiting, waiting, nil, 0, 30, 0), (waitingRenewal, waiting, nil, 30, 60, 30),
            ]
        }
        /// (original, holder, expires day, revoked day, signed day)
        var subscriptions: [(String, String?, Double, Double?, Double)] {
            [(moved, later, 60, nil, 31), (revoked, earlier, 30, 10, 10), (refunded, later, 30, 12, 12), (waiting, nil, 60, nil, 30)]
        }
        /// (uuid, type, transaction, signed day): the revocations the subscriptions' states came from.
        var notifications: [(String, String, String, Double)] {
            [(randomId("n-"), "REFUND", revoked, 5), (randomId("n-"), "REVOKE", revoked, 10), (randomId("n-"), "REFUND", refunded, 12)]
        }

        func millis(_ days: Double) -> Int64 { Int64((day(days).timeIntervalSince1970 * 1000).rounded()) }

        /// The rows, as SQL statements with their arguments (`?` placeholders), in order.
        var statements: [(String, [(any Sendable)?])] {
            var all: [(String, [(any Sendable)?])] = []
            for user in [earlier, later] {
                all.append(("INSERT INTO users (id, created_at) VALUES (?, 0)", [user]))
                all.append(("INSERT INTO wallets (user_id, balance, held, version) VALUES (?, 0, 0, 0)", [user]))
            }
            for (transaction, original, user, purchased, expires, signed) in periods {
                all.append((
                    """
                    INSERT INTO purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id,
                      claimed, purchased_at, expires_at, revoked_at, refunded_tokens, reversed_at, signed_at, recorded_at)
                    VALUES (?, ?, 'com.example.premium.monthly', 'subscription', 1, NULL, 'Sandbox', ?, ?, ?, ?, NULL, NULL, NULL, ?, ?)
                    """, [transaction, original, user, false, millis(purchased), millis(expires), millis(signed), millis(signed)]))
            }
            all.append((
                """
                INSERT INTO purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id,
                  claimed, purchased_at, expires_at, revoked_at, refunded_tokens, reversed_at, signed_at, recorded_at)
                VALUES (?, ?, 'com.example.tokens.100', 'consumable', 1, 100, 'Sandbox', ?, ?, ?, NULL, ?, 0, NULL, ?, ?)
                """, [consumable, consumable, earlier, false, millis(1), millis(2), millis(2), millis(1)]))
            for (original, holder, expires, revokedAt, signed) in subscriptions {
                all.append((
                    """
                    INSERT INTO subscriptions (original_transaction_id, product_id, environment, user_id, expires_at, grace_until, revoked_at, signed_at)
                    VALUES (?, 'com.example.premium.monthly', 'Sandbox', ?, ?, NULL, ?, ?)
                    """, [original, holder, millis(expires), revokedAt.map(millis), millis(signed)]))
            }
            for (uuid, type, transaction, signed) in notifications {
                all.append((
                    "INSERT INTO purchase_notifications (uuid, type, transaction_id, signed_at, received_at) VALUES (?, ?, ?, ?, ?)",
                    [uuid, type, transaction, millis(signed), millis(signed)]))
            }
            return all
        }

        /// After the migration: one row per account, each saying where its subscription stands; the books go on.
        func expectMigrated(_ store: any TallyStorage, _ kind: StoreKind) async throws {
            let f = Fixture(store: store, kind: kind, clock: ManualClock(day(20)))
            let mine = try await f.allPurchases(earlier, pageSize: 10).sorted { $0.originalTransactionId < $1.originalTransactionId }
            let theirs = try await f.allPurchases(later, pageSize: 10).sorted { $0.originalTransactionId < $1.originalTransactionId }
            let statuses = { (rows: [PurchaseRecord]) in Dictionary(uniqueKeysWithValues: rows.map { ($0.originalTransactionId, $0.status) }) }
            #expect(statuses(mine) == [moved: .movedAway, revoked: .revoked, consumable: .refunded], "[\(kind)] \(mine)")
            #expect(statuses(theirs) == [moved: .active, refunded: .refunded], "[\(kind)] \(theirs)")
            let held = try #require(theirs.first { $0.originalTransactionId == moved })
            #expect(held.transactionId == renewal && held.premiumUntil == day(60) && held.purchasedAt == day(0), "[\(kind)] \(held)")
            let unclaimed = try await store.unclaimedPurchases(after: nil, limit: 100, now: f.now).filter { $0.originalTransactionId == waiting }
            #expect(unclaimed.count == 1 && unclaimed.first?.transactionId == waitingRenewal, "[\(kind)] \(unclaimed)")

            // The migrated rows take new facts: a renewal, the consumable's reversal and its second refund.
            let next = AppStoreFacts.period(of: moved, purchased: day(60), expires: day(90))
            f.clock.set(day(60))
            try await f.deliver(AppStoreFacts.notification(.didRenew, next, signed: day(60)))
            #expect(try await f.allPurchases(later, pageSize: 10).filter { $0.originalTransactionId == moved }.map(\.transactionId) == [next.transactionId], "[\(kind)]")
            #expect(try await f.boughtPremium(later) == day(90), "[\(kind)]")
            // Refunded before its credit, its owner recorded: the reversal credits it, and a refund after that is its second.
            let bought = AppStoreFacts.consumable(consumable, purchased: day(1))
            try await f.deliver(AppStoreFacts.notification(.refundReversed, bought.signed(at: day(61)), signed: day(61)))
            #expect(try await f.balance(earlier) == 100, "[\(kind)]")
            try await f.deliver(AppStoreFacts.notification(.refund, bought.signed(at: day(62), revoked: day(62)), signed: day(62)))
            #expect(try await f.balance(earlier) == 0, "[\(kind)]")
            #expect(try await f.allEntries(earlier).map(\.reference) == [consumable, consumable + "#2"], "[\(kind)]")
            try await f.checkInvariants([earlier, later])
        }
    }

    @Test("SQLite: a v11 database's renewal rows become one row per subscription and account, each with its status")
    func sqlite() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try Schema.migrator.migrate(store.pool, upTo: "v11")
        let old = OldPurchases()
        try await store.pool.write { db in
            for (sql, arguments) in old.statements {
                try db.execute(sql: sql, arguments: StatementArguments(arguments.map { $0 as? (any DatabaseValueConvertible) }))
            }
        }
        try await store.migrate()
        try await old.expectMigrated(store, .sqlite)
    }

    @Test("PostgreSQL: a database of schema 13's renewal rows become one row per subscription and account, each with its status")
    func postgres() async throws {
        try await withPostgresStore(isolated: true, migrated: false) { store in
            try await store.migrate(upTo: 13)
            let old = OldPurchases()
            for (sql, arguments) in old.statements {
                var bindings = PostgresBindings()
                var text = ""
                var index = 0
                for character in sql {
                    if character == "?" {
                        index += 1
                        text += "$\(index)"
                    } else {
                        text.append(character)
                    }
                }
                for argument in arguments {
                    switch argument {
                    case let value as String: bindings.append(value)
                    case let value as Int64: bindings.append(value)
                    case let value as Bool: bindings.append(value)
                    case .none: bindings.appendNull()
                    default: throw HarnessError("no binding for \(String(describing: argument))")
                    }
                }
                try await store.rows(PostgresQuery(unsafeSQL: text, binds: bindings))
            }
            try await store.migrate()
            try await old.expectMigrated(store, .postgres)
        }
    }
}
