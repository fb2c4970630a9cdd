import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// Random interleavings of everything that happens to purchases (seeded: a failure names its seed): the app's
/// submissions repeated, each notification delivered and retried in any order, refunds (whole or in part) and their
/// reversals (a refund after a reversed refund too), a few at a time concurrently — on each store, and on PostgreSQL
/// through two stores at once. Whatever the order, each transaction is credited once to the account it belongs to, its
/// refunds and their reversals alternate (each reversal undoing its own refund), it ends as the App Store's last word
/// says, and every ledger sums to its balance.
@Suite("Purchase interleavings", .timeLimit(.minutes(5)))
struct PurchasePropertyTests {
    static let seeds: ClosedRange<UInt64> = 1...25

    @Test("Random interleavings leave each transaction credited once, its refunds and reversals alternating, as the App Store last said",
        arguments: StoreKind.allCases)
    func interleavings(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            var transactions = 0
            for seed in Self.seeds { transactions += try await Self.check(seed: seed, on: [f.store], f) }
            #expect(transactions >= 150, "[\(kind)] the property saw \(transactions) transactions")
        }
    }

    @Test("PostgreSQL: the same interleavings sent through two stores at once")
    func interleavingsAcrossStores() async throws {
        try await withTwoPostgresStores { first, second in
            let f = Fixture(store: first, kind: .postgres, clock: ManualClock(defaultStart))
            for seed in Self.seeds { _ = try await Self.check(seed: seed, on: [first, second], f) }
        }
    }

    /// Plays the scenario of `seed` on `stores` (each step on one of them, at random) and checks the books; returns how
    /// many transactions it had.
    static func check(seed: UInt64, on stores: [any TallyStorage], _ f: Fixture) async throws -> Int {
        var users: [String] = []
        for _ in 0..<3 { users.append(try await f.newUser()) }
        var random = SplitMix64(seed: seed)
        let scenario = PurchaseScenario(users: users, start: f.now, random: &random)
        let label = "[\(f.kind)] seed \(seed)"
        var steps = scenario.deliveries[...]
        while !steps.isEmpty {
            let batch = Array(steps.prefix(Int.random(in: 1...4, using: &random)))
            steps = steps.dropFirst(batch.count)
            let routed = batch.map { ($0, stores[Int.random(in: 0..<stores.count, using: &random)]) }
            try await play(routed, label, f)
        }

        var entries: [LedgerEntryRecord] = []
        var owners: [Int64: String] = [:]
        for user in users {
            for entry in try await f.allEntries(user, pageSize: 50) {
                entries.append(entry)
                owners[entry.id] = user
            }
        }
        for bought in scenario.consumables {
            let id = bought.transaction.transactionId
            // Its entries: the credit under its id; each refund and the reversal undoing it under the refund's own
            // reference (the id, `#n` after it from the second).
            let mine = entries.filter { $0.reference == id || $0.reference?.hasPrefix(id + "#") == true }.sorted { $0.id < $1.id }
            #expect(mine.filter { $0.kind == .purchase }.count <= 1, "\(label) \(id) credited twice")
            let rounds = mine.filter { $0.kind != .purchase }
            for (index, entry) in rounds.enumerated() {
                // Refund, reversal, refund, …: each reversal right after its own refund, giving back what it took.
                #expect(entry.kind == (index.isMultiple(of: 2) ? .refund : .refundReversed), "\(label) \(id) \(rounds.map(\.kind))")
                if !index.isMultiple(of: 2) {
                    #expect(entry.reference == rounds[index - 1].reference && entry.amount == -rounds[index - 1].amount, "\(label) \(rounds)")
                }
            }
            #expect(Set(rounds.filter { $0.kind == .refund }.map(\.reference)).count == rounds.filter { $0.kind == .refund }.count, "\(label)")
            // Its owner's, also when a refund came before any credit (the owner is kept for a reversal).
            let found = try await f.allPurchases(bought.owner, pageSize: 100).first { $0.transactionId == id }
            let record = try #require(found, "\(label) \(id) is listed nowhere")
            #expect(record.userId == bought.owner, "\(label) \(record)")
            let net = mine.reduce(Int64(0)) { $0 + $1.amount }
            if bought.refundedAtLast {
                #expect(record.status == .refunded, "\(label) \(record)")
                let credited = mine.contains { $0.kind == .purchase }
                #expect(net == (credited ? bought.tokens - (record.refundedTokens ?? -1) : 0), "\(label) \(record) net \(net)")
                if bought.percentage == nil { #expect(net == 0, "\(label) a whole refund left \(net)") }
            } else {
                #expect(record.status == .credited && net == bought.tokens, "\(label) \(record) net \(net)")
            }
            if let purchase = mine.first(where: { $0.kind == .purchase }) {
                #expect(owners[purchase.id] == bought.owner, "\(label) credited to another account")
            }
        }
        for subscribed in scenario.subscriptions {
            let premium = entries.filter { $0.reference == subscribed.original }
            #expect(premium.allSatisfy { $0.kind == .premium && owners[$0.id] == subscribed.owner }, "\(label)")
        }
        for user in users {
            let expected = scenario.subscriptions.filter { $0.owner == user }.map(\.end).max()
            #expect(try await f.boughtPremium(user) == expected, "\(label) \(user): \(scenario.subscriptions)")
        }
        try await f.checkInvariants(users)
        return scenario.consumables.count + scenario.subscriptions.count
    }

    /// Runs `steps` concurrently: submissions may be refused (another account's), nothing else may fail.
    private static func play(_ steps: [(PurchaseScenario.Step, any TallyStorage)], _ label: String, _ f: Fixture) async throws {
        let now = f.now
        let results = try await concurrently(steps.count) { index in
            let (step, store) = steps[index]
            switch step {
            case .submit(let transaction, let userId): _ = try await store.redeem(transaction, userId: userId, now: now)
            case .deliver(let notification): _ = try await store.apply(notification, now: now)
            }
        }
        for result in results {
            switch result {
            case .success: continue
            case .failure(let error) where error.code == .purchaseClaimed: continue
            default: Issue.record("\(label): \(result)")
            }
        }
    }
}

/// A seeded App Store history of a few purchases and what the apps submit, in a shuffled order of delivery, with what
/// each purchase must end as (the App Store's last word, by its signing order).
struct PurchaseScenario {
    enum Step: Sendable {
        case submit(VerifiedTransaction, userId: String)
        case deliver(VerifiedNotification)
    }

    struct Consumable {
        var transaction: VerifiedTransaction
        var tokens: Int64
        /// The account it must be credited to: the one its appAccountToken names, else the only one to submit it.
        var owner: String
        /// Its last notification, by signing order, is a refund.
        var refundedAtLast: Bool
        /// The part its last refund takes (nil: all).
        var percentage: Int?
    }

    struct Subscription: CustomStringConvertible {
        var original: String
        var owner: String
        /// Its premium's end, as its last notification says.
        var end: Date
        var description: String { "\(original): \(owner) until \(end)" }
    }

    private(set) var deliveries: [Step] = []
    private(set) var consumables: [Consumable] = []
    private(set) var subscriptions: [Subscription] = []

    init(users: [String], start: Date, random: inout SplitMix64) {
        let minutes = { (count: Int) in start.addingTimeInterval(Double(count) * 60) }
        for index in 0..<Int.random(in: 5...7, using: &random) {
            let owner = users.randomElement(using: &random)!
            let named = Int.random(in: 0..<10, using: &random) < 7
            let (tokens, quantity) = (Int64.random(in: 1...500, using: &random), Int.random(in: 1...3, using: &random))
            let bought = AppStoreFacts.consumable(
                tokens: tokens, quantity: quantity, for: named ? owner : nil, purchased: minutes(index))
            var notices = [AppStoreFacts.notification(.oneTimeCharge, bought, signed: minutes(index))]
            var percentage: Int?
            // Refunded, reversed, refunded again, reversed again: each refund as its own notification, in signing order.
            for round in 0..<Int.random(in: 0...2, using: &random) {
                guard round == 0 || notices.last?.type == .refundReversed else { break }
                percentage = Bool.random(using: &random) ? nil : Int.random(in: 0...100_000, using: &random)
                let refunded = minutes(index + 10 + 20 * round)
                notices.append(
                    AppStoreFacts.notification(
                        .refund, bought.signed(at: refunded, revoked: refunded, percentage: percentage), signed: refunded))
                if Bool.random(using: &random) {
                    let reversed = minutes(index + 20 + 20 * round)
                    notices.append(AppStoreFacts.notification(.refundReversed, bought.signed(at: reversed), signed: reversed))
                }
            }
            var steps = notices.flatMap { notice in Array(repeating: Step.deliver(notice), count: Int.random(in: 1...3, using: &random)) }
            // The app submits it at least once (and finishes it then: it never comes back after the last notification).
            steps += Array(repeating: .submit(bought, userId: owner), count: Int.random(in: 1...3, using: &random))
            // Another account on the device submits one that names its owner: refused, or it credits the owner.
            if named && Bool.random(using: &random) { steps.append(.submit(bought, userId: users.randomElement(using: &random)!)) }
            deliveries += steps
            consumables.append(
                Consumable(
                    transaction: bought, tokens: tokens * Int64(quantity), owner: owner, refundedAtLast: notices.last?.type == .refund,
                    percentage: percentage))
        }
        for _ in 0..<2 { addSubscription(owner: users.randomElement(using: &random)!, start: start, random: &random) }
        deliveries.shuffle(using: &random)
    }

    /// A subscription's two periods and one of its endings: none, a failed renewal with a grace period (which may end),
    /// an expiry, or a refund of the second period (which may be reversed).
    private mutating func addSubscription(owner: String, start: Date, random: inout SplitMix64) {
        let day = { (days: Double) in start.addingTimeInterval(days * 86_400) }
        let original = randomId("otx-")
        let named = Bool.random(using: &random)
        let first = AppStoreFacts.period(original, of: original, for: named ? owner : nil, purchased: day(0), expires: day(30))
        let second = AppStoreFacts.period(of: original, for: named ? owner : nil, purchased: day(30), expires: day(60))
        var notices = [
            AppStoreFacts.notification(.subscribed, first, signed: day(0)), AppStoreFacts.notification(.didRenew, second, signed: day(30)),
        ]
        var end = day(60)
        switch Int.random(in: 0..<4, using: &random) {
        case 1:
            notices.append(AppStoreFacts.notification(.didFailToRenew, second.signed(at: day(60)), signed: day(60), grace: day(76)))
            end = day(76)
            if Bool.random(using: &random) {
                notices.append(AppStoreFacts.notification(.gracePeriodExpired, second.signed(at: day(76)), signed: day(76)))
                end = day(60)
            }
        case 2:
            notices.append(AppStoreFacts.notification(.expired, second.signed(at: day(61)), signed: day(61)))
        case 3:
            notices.append(AppStoreFacts.notification(.refund, second.signed(at: day(45), revoked: day(45)), signed: day(45)))
            end = day(45)
            if Bool.random(using: &random) {
                notices.append(AppStoreFacts.notification(.refundReversed, second.signed(at: day(50)), signed: day(50)))
                end = day(60)
            }
        default: break
        }
        deliveries += notices.flatMap { notice in Array(repeating: Step.deliver(notice), count: Int.random(in: 1...3, using: &random)) }
        deliveries += Array(repeating: .submit(first, userId: owner), count: Int.random(in: 1...2, using: &random))
        if Bool.random(using: &random) { deliveries.append(.submit(second, userId: owner)) }
        subscriptions.append(Subscription(original: original, owner: owner, end: end))
    }
}
