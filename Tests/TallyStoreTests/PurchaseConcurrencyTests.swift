import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// One purchase submitted and notified many times at once, against every store, and across two PostgreSQL stores
/// (two server processes): one credit, one refund, one reversal.
@Suite("Purchase concurrency", .timeLimit(.minutes(2)))
struct PurchaseConcurrencyTests {
    typealias Facts = AppStoreFacts

    @Test("50 concurrent submissions of one transaction credit it once: by one account, and by ten (the nine others refused)",
        arguments: StoreKind.allCases)
    func concurrentSubmissions(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(purchased: f.now)
            let results = try await concurrently(50) { _ in try await f.redeem(bought, by: user) }
            let redemptions = results.compactMap { if case .success(let redemption) = $0 { redemption } else { nil } }
            #expect(redemptions.count == 50, "[\(kind)] \(results.filter { if case .success = $0 { false } else { true } })")
            #expect(redemptions.filter { !$0.changedUsers.isEmpty }.count == 1, "[\(kind)] one call credited")
            #expect(redemptions.allSatisfy { $0.wallet.balance == 100 && $0.purchase.status == .credited }, "[\(kind)]")
            #expect(try await f.entries(user, naming: bought.transactionId).count == 1, "[\(kind)]")

            var users: [String] = []
            for _ in 0..<10 { users.append(try await f.newUser()) }
            let contested = Facts.consumable(purchased: f.now)
            let accounts = users
            let attempts = try await concurrently(50) { index in try await f.redeem(contested, by: accounts[index % 10]) }
            var (winners, refused, unexpected) = (Set<String>(), 0, [String]())
            for attempt in attempts {
                switch attempt {
                case .success(let redemption): winners.insert(redemption.purchase.userId ?? "none")
                case .failure(let error) where error.code == .purchaseClaimed: refused += 1
                default: unexpected.append("\(attempt)")
                }
            }
            #expect(winners.count == 1 && refused == 45 && unexpected.isEmpty, "[\(kind)] \(winners) \(refused) \(unexpected)")
            var credits = 0
            for account in users { credits += try await f.entries(account, naming: contested.transactionId).count }
            #expect(credits == 1, "[\(kind)]")
            try await f.checkInvariants(users + [user])
        }
    }

    @Test("Submissions, a notification's retries and copies under other ids, all at once: one credit", arguments: StoreKind.allCases)
    func submissionsAndNotifications(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            let charge = Facts.notification(.oneTimeCharge, bought, signed: f.now)
            let results = try await concurrently(60) { index -> (changed: [String], duplicate: Bool) in
                switch index % 3 {
                case 0: return (try await f.redeem(bought, by: user).changedUsers, false)
                case 1:
                    let outcome = try await f.deliver(charge)
                    return (outcome.changedUsers, outcome.disposition == .duplicate)
                default: return (try await f.deliver(Facts.notification(.oneTimeCharge, bought, signed: f.now)).changedUsers, false)
                }
            }
            let done = results.compactMap { if case .success(let result) = $0 { result } else { nil } }
            #expect(done.count == 60, "[\(kind)] \(results.filter { if case .success = $0 { false } else { true } })")
            #expect(done.filter { !$0.changed.isEmpty }.count == 1, "[\(kind)]")
            #expect(done.filter(\.duplicate).count == 19, "[\(kind)] the retries of one notification, all but the first")
            #expect(try await f.balance(user) == 100, "[\(kind)]")

            // Twenty refunds (their own ids) and then twenty reversals, each batch at once: one of each.
            f.clock.advance(by: 60)
            let refund = bought.signed(at: f.now, revoked: f.now, percentage: 50_000)
            _ = try await concurrently(20) { _ in try await f.deliver(Facts.notification(.refund, refund, signed: f.now)) }
            #expect(try await f.balance(user) == 50, "[\(kind)]")
            f.clock.advance(by: 60)
            let reversal = bought.signed(at: f.now)
            _ = try await concurrently(20) { _ in try await f.deliver(Facts.notification(.refundReversed, reversal, signed: f.now)) }
            #expect(try await f.entries(user, naming: bought.transactionId).map(\.amount) == [100, -50, 50], "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("PostgreSQL: 50 submissions across two stores credit once; refunds and premium from one store reach the other's cached plans")
    func acrossTwoStores() async throws {
        try await withTwoPostgresStores { first, second in
            let clock = ManualClock(defaultStart)
            let user = try await newPostgresUser(first, tokens: 0, now: clock.now)
            let bought = Facts.consumable(purchased: clock.now)
            let results = try await concurrently(50) { index in
                try await (index % 2 == 0 ? first : second).redeem(bought, userId: user, now: clock.now)
            }
            let redemptions = results.compactMap { if case .success(let redemption) = $0 { redemption } else { nil } }
            #expect(redemptions.count == 50 && redemptions.filter { !$0.changedUsers.isEmpty }.count == 1, "\(results.count)")
            let books = Fixture(store: second, kind: .postgres, clock: clock)
            #expect(try await books.entries(user, naming: bought.transactionId).count == 1)

            // The second store caches the account by charging it; the first refunds: the second's next charge is refused.
            let question = ActionSpec(name: "question", tokens: 3)
            let charge = { (store: PostgresStore) in
                try await store.execute(.performAction(userId: user, action: question, quotaLimit: nil), idempotency: nil, now: clock.now) {
                    try RenderedBody.render($0)
                }
            }
            _ = try await charge(second)
            #expect(second.accounts.account(user) != nil, "the second store planned from its cache")
            let refund = Facts.notification(.refund, bought.signed(at: clock.now, revoked: clock.now), signed: clock.now)
            let refunds = try await concurrently(10) { index in try await (index % 2 == 0 ? first : second).apply(refund, now: clock.now) }
            #expect(refunds.filter { if case .success(let outcome) = $0 { outcome.disposition == .applied } else { false } }.count == 1)
            await expectStoreError(.insufficientTokens, .postgres) { try await charge(second) }
            #expect(try await second.wallet(userId: user, now: clock.now)?.balance == -3)

            // Premium bought through the first lifts the second's cached quota.
            let reading = ActionSpec(name: "reading", quota: "readings")
            let original = randomId("otx-")
            _ = try await first.redeem(
                Facts.period(original, of: original, purchased: clock.now, expires: clock.now.addingTimeInterval(86_400)), userId: user,
                now: clock.now)
            let read = try await second.execute(.performAction(userId: user, action: reading, quotaLimit: 0), idempotency: nil, now: clock.now) {
                try RenderedBody.render($0)
            }
            #expect(try RenderedBody.decode(read.response).payment == "premium")
            try await books.checkInvariants([user])
        }
    }
}
