import Foundation
import GRDB
import PostgresNIO
import TallyStore
import Testing

@testable import TallyPostgres
@testable import TallySQLite

/// A refund takes back what was bought even when it was spent: the balance goes below zero, through a refund and
/// nothing else (a hold opened before it captures at most what it held), and the schemas hold every entry to that.
@Suite("Purchase debts", .timeLimit(.minutes(10)))
struct PurchaseDebtTests {
    typealias Facts = AppStoreFacts
    static let reading = ActionSpec(name: "reading", quota: "readings", tokens: 5)
    static let question = ActionSpec(name: "question", tokens: 3)

    @Test("A refund after the tokens were spent leaves a debt that refuses token charges, keeps free uses, and the next purchase pays",
        arguments: StoreKind.allCases)
    func refundAfterSpending(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            try await f.redeem(bought, by: user)
            for _ in 0..<30 { try await f.run(.performAction(userId: user, action: Self.question, quotaLimit: nil)) }
            #expect(try await f.balance(user) == 10, "[\(kind)]")

            try await f.deliver(Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now), signed: f.now))
            let debt = try #require(try await f.store.wallet(userId: user, now: f.now), "[\(kind)]")
            #expect(debt == WalletState(balance: -90, held: 0, version: 32), "[\(kind)]")
            let refund = try await f.entries(user, naming: bought.transactionId).last
            #expect(refund?.kind == .refund && refund?.amount == -100 && refund?.balanceAfter == -90, "[\(kind)]")

            // Every token charge is refused, with the account as it is; a hold too.
            let refused = await expectStoreError(.insufficientTokens, kind) {
                try await f.execute(.performAction(userId: user, action: Self.question, quotaLimit: nil))
            }
            #expect(refused?.state?.wallet.balance == -90, "[\(kind)]")
            await expectStoreError(.insufficientTokens, kind) {
                try await f.execute(.createHold(userId: user, holdId: randomId("hold-"), amount: 1, expiresAt: f.now.addingTimeInterval(60)))
            }
            // Free uses still work, and the fourth of three (paid) is refused.
            for _ in 0..<3 {
                let free = try await f.run(.performAction(userId: user, action: Self.reading, quotaLimit: 3))
                #expect(free.payment == .useQuota && free.state.wallet.balance == -90, "[\(kind)]")
            }
            await expectStoreError(.insufficientTokens, kind) {
                try await f.execute(.performAction(userId: user, action: Self.reading, quotaLimit: 3))
            }

            // The next purchase pays the debt first: it is just the sum.
            let second = Facts.consumable(for: user, purchased: f.now)
            let next = try await f.redeem(second, by: user)
            #expect(next.wallet.balance == 10, "[\(kind)]")
            let paid = try await f.run(.performAction(userId: user, action: Self.question, quotaLimit: nil))
            #expect(paid.payment == .charge(3) && paid.state.wallet.balance == 7, "[\(kind)]")
            // In debt again, a grant pays part of it.
            try await f.deliver(Facts.notification(.refund, second.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(try await f.run(.grant(userId: user, amount: 1, reason: "support")).state.wallet.balance == -92, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A hold opened before a refund still captures what it held (the balance goes down by at most that), or is released; no new hold",
        arguments: StoreKind.allCases)
    func holdAcrossRefund(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            try await f.redeem(bought, by: user)
            let (captured, released) = (randomId("hold-"), randomId("hold-"))
            let expires = f.now.addingTimeInterval(600)
            try await f.run(.createHold(userId: user, holdId: captured, amount: 60, expiresAt: expires))
            try await f.run(.createHold(userId: user, holdId: released, amount: 30, expiresAt: expires))
            try await f.deliver(Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(try await f.store.wallet(userId: user, now: f.now) == WalletState(balance: 0, held: 90, version: 4), "[\(kind)]")
            await expectStoreError(.insufficientTokens, kind) {
                try await f.execute(.createHold(userId: user, holdId: randomId("hold-"), amount: 1, expiresAt: expires))
            }
            await expectStoreError(.invalidInput, kind) { try await f.execute(.captureHold(userId: user, holdId: captured, amount: 61)) }
            let capture = try await f.run(.captureHold(userId: user, holdId: captured, amount: 50))
            #expect(capture.state.wallet == WalletState(balance: -50, held: 30, version: 5), "[\(kind)]")
            let release = try await f.run(.releaseHold(userId: user, holdId: released))
            #expect(release.state.wallet == WalletState(balance: -50, held: 0, version: 6), "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test(
        "The schema refuses, without the planner: a debit or a hold below what is available, a second credit or refund of a transaction, a purchase entry without its transaction, a premium change that moves tokens, a negative hold",
        arguments: StoreKind.allCases)
    func schemaHoldsTheRules(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            try await f.redeem(bought, by: user)
            let reference = bought.transactionId
            // (kind, amount, held change, balance after, held after, reference): each breaks one rule.
            var refused: [(String, Int64, Int64, Int64, Int64, String?)] = [
                ("debit", -101, 0, -1, 0, nil), ("hold", 0, 101, 100, 101, nil), ("purchase", 100, 0, 200, 0, reference),
                ("purchase", 100, 0, 200, 0, nil), ("premium", 5, 0, 105, 0, reference), ("release", 0, -1, 100, -1, nil),
                ("grant", 1, 0, 101, 0, reference), ("refund", 5, 0, 105, 0, reference + "-other"),
            ]
            try await Self.insert("refund", -100, 0, 0, 0, reference, user: user, into: f.store)
            refused.append(("refund", -1, 0, -1, 0, reference))
            for (entryKind, amount, heldChange, balance, held, reference) in refused {
                await #expect(throws: (any Error).self, "[\(kind)] \(entryKind) \(amount) \(heldChange)") {
                    try await Self.insert(entryKind, amount, heldChange, balance, held, reference, user: user, into: f.store)
                }
            }
            // Allowed: a refund below zero, a capture that leaves the balance below zero (what is available does not fall).
            try await Self.insert("refund", 0, 0, -5, 0, reference + "-2", user: user, into: f.store)
            try await Self.insert("capture", -3, -3, -8, 0, nil, user: user, into: f.store)
        }
    }

    /// Inserts a ledger row directly, as no store code does (the wallet is not moved).
    private static func insert(
        _ kind: String, _ amount: Int64, _ heldChange: Int64, _ balanceAfter: Int64, _ heldAfter: Int64, _ reference: String?,
        user: String, into store: any TallyStorage
    ) async throws {
        switch store {
        case let sqlite as SQLiteStore:
            try await sqlite.pool.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
                        VALUES (?, ?, ?, ?, ?, ?, 'schema test', 0, ?)
                        """,
                    arguments: [user, kind, amount, heldChange, balanceAfter, heldAfter, reference])
            }
        case let postgres as PostgresStore:
            try await postgres.rows(
                """
                INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
                VALUES (\(user), \(kind), \(amount), \(heldChange), \(balanceAfter), \(heldAfter), 'schema test', 0, \(reference))
                """)
        default:
            throw HarnessError("no such store")
        }
    }
}
