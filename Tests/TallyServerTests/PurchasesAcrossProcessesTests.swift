import Foundation
import TallyAPI
import TallyDevAppStore
import TallyLoad
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// App Store purchases through two `tally serve` processes on one PostgreSQL, with transactions and notifications
/// signed by the local App Store (in this test's process, on a clock that moves one second an event so that the App
/// Store's signing order is unambiguous): however the app's submissions and Apple's notifications are spread over the
/// two, repeated and reordered, each transaction is credited once, refunded at most once, and every ledger sums to its
/// balance.
@Suite("Purchases across server processes", .timeLimit(.minutes(4)))
struct PurchasesAcrossProcessesTests {
    @Test("50 concurrent submissions of one transaction across two processes credit it once")
    func fiftySubmissions() async throws {
        try await Self.withPair { pair, appStore, _ in
            let setup = pair.connection(0)
            let user = try await setup.newGuest()
            let bought = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let answers = try await concurrently(50, connect: { pair.connection($0 % 2) }) { _, api in
                try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            }
            #expect(answers.allSatisfy { $0.status == .ok }, "\(Set(answers.map { "\($0.status) \($0.errorCode ?? "")" }))")
            let purchases = try answers.map { try $0.decode(PurchaseResponse.self).purchase }
            #expect(Set(purchases.map(\.transactionId)) == [bought.transaction.transactionId])
            let entries = try await pair.connection(1).allEntries(user)
            #expect(entries.filter { $0.kind == "purchase" }.count == 1)
            #expect(try await pair.connection(1).wallet(user).balance == 100)
            try await pair.connection(1).expectBooksBalance(user)
            await setup.close()
        }
    }

    @Test("Random interleavings over two processes: each transaction credited once, refunded at most once, as the App Store last said")
    func interleavings() async throws {
        try await Self.withPair { pair, appStore, clock in
            let connections = [pair.connection(0), pair.connection(1)]
            var users: [TestUser] = []
            for index in 0..<3 { users.append(try await connections[index % 2].newGuest()) }
            var transactions = 0
            for seed in UInt64(1)...6 {
                transactions += try await Self.check(seed: seed, users: users, pair: pair, appStore: appStore, clock: clock)
            }
            #expect(transactions >= 30)
            for user in users { try await connections[0].expectBooksBalance(user) }
            for connection in connections { await connection.close() }
        }
    }

    /// What happens to one consumable, and what it must end as.
    private struct Bought {
        var purchase: DevAppStore.Purchase
        var owner: TestUser
        /// The App Store's last notification about it (by signing order) is a refund.
        var refundedAtLast: Bool
    }

    /// One event: the app submits the transaction as `user` (`stray`: another account on the device, refused), or
    /// the App Store's notification arrives.
    private enum Step: Sendable {
        case submit(String, TestUser, stray: Bool)
        case notify(DevAppStore.Notification)
    }

    /// Plays seed `seed`'s history of five to seven purchases, each step on one process at random, a few steps at once,
    /// then checks each transaction's entries and net amount; returns how many transactions it had.
    private static func check(seed: UInt64, users: [TestUser], pair: ServerPair, appStore: DevAppStore, clock: ManualClock) async throws -> Int {
        var random = SplitMix64(seed: seed)
        var bought: [Bought] = []
        var steps: [Step] = []
        for _ in 0..<Int.random(in: 5...7, using: &random) {
            let owner = users.randomElement(using: &random)!
            let named = Int.random(in: 0..<10, using: &random) < 7
            clock.advance(by: 1)
            let purchase = try appStore.purchase(
                productId: TestProducts.tokens100, appAccountToken: named ? UUID(uuidString: owner.userId) : nil,
                quantity: Int.random(in: 1...3, using: &random), send: false)
            let id = purchase.transaction.transactionId
            var notices = [purchase.notification]
            if Bool.random(using: &random) {
                clock.advance(by: 1)
                notices.append(try appStore.refund(id, percentage: Bool.random(using: &random) ? nil : Int.random(in: 1_000...99_000, using: &random), send: false))
                if Bool.random(using: &random) {
                    clock.advance(by: 1)
                    notices.append(try appStore.reverseRefund(id, send: false))
                }
            }
            steps += notices.flatMap { notice in Array(repeating: Step.notify(notice), count: Int.random(in: 1...3, using: &random)) }
            // The app's submissions, on both processes; at least one, so that an unnamed purchase finds its owner.
            steps += Array(repeating: .submit(purchase.signedTransaction, owner, stray: false), count: Int.random(in: 1...3, using: &random))
            if named, Bool.random(using: &random), let stray = users.filter({ $0.userId != owner.userId }).randomElement(using: &random) {
                steps.append(.submit(purchase.signedTransaction, stray, stray: true))
            }
            bought.append(Bought(purchase: purchase, owner: owner, refundedAtLast: notices.count == 2))
        }
        steps.shuffle(using: &random)
        let label = "seed \(seed)"
        var rest = steps[...]
        while !rest.isEmpty {
            let batch = Array(rest.prefix(Int.random(in: 1...4, using: &random)))
            rest = rest.dropFirst(batch.count)
            let routes = batch.map { _ in Int.random(in: 0..<2, using: &random) }
            let answers = try await concurrently(batch.count, connect: { pair.connection(routes[$0]) }) { index, api in
                switch batch[index] {
                case .submit(let signed, let user, _):
                    try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: signed))
                case .notify(let notification):
                    try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: notification.body, as: UTF8.self))
                }
            }
            for (step, answer) in zip(batch, answers) {
                if case .submit(_, _, stray: true) = step {
                    #expect(answer.errorCode == "purchase_claimed", "\(label): \(answer.status) \(answer.text)")
                } else {
                    #expect(answer.status == .ok, "\(label): \(answer.status) \(answer.text)")
                }
            }
        }
        // Each consumable ends with one entry of each kind it had, in its owner's ledger, netting what Apple last said.
        let reader = pair.connection(seed % 2 == 0 ? 0 : 1)
        var entries: [String: [LedgerEntry]] = [:]
        for user in users { entries[user.userId] = try await reader.allEntries(user) }
        for item in bought {
            let id = item.purchase.transaction.transactionId
            let tokens = Int64(100 * item.purchase.transaction.quantity)
            // The stand-in sells in Sandbox: each entry's reason says so before the transaction.
            let mine = entries.flatMap { owner, list in list.filter { $0.reason?.hasPrefix("Sandbox \(id) ") == true }.map { (owner, $0) } }
            let counts = Dictionary(grouping: mine, by: \.1.kind).mapValues(\.count)
            #expect(counts.values.allSatisfy { $0 == 1 }, "\(label) \(id): \(counts)")
            #expect(mine.allSatisfy { $0.0 == item.owner.userId }, "\(label) \(id) credited to another account")
            let net = mine.reduce(Int64(0)) { $0 + $1.1.amount }
            // Listed for its owner, also when refunded before any credit (nothing credited then, and the owner kept).
            let listed: Page<Purchase> = try await reader.send(.get, "/v1/purchases?limit=100", token: item.owner.accessToken).decode()
            let record = try #require(listed.items.first { $0.transactionId == id }, "\(label) \(id) not listed")
            if counts.isEmpty {
                #expect(item.refundedAtLast && record.status == PurchaseStatus.refunded, "\(label) \(id): \(record.status), never credited")
                continue
            }
            #expect(counts["purchase"] == 1, "\(label) \(id): \(counts)")
            if item.refundedAtLast {
                #expect(record.status == PurchaseStatus.refunded && net >= 0 && net < tokens, "\(label) \(id): \(record.status) net \(net)")
            } else {
                #expect(record.status == PurchaseStatus.credited && net == tokens, "\(label) \(id): \(record.status) net \(net)")
            }
        }
        await reader.close()
        return bought.count
    }

    /// Two processes on a scratch PostgreSQL database selling ``TestProducts`` from a local App Store whose root they
    /// trust, and that App Store (on a manual clock started now: the processes check validity on the signed dates).
    static func withPair(_ body: @Sendable (ServerPair, DevAppStore, ManualClock) async throws -> Void) async throws {
        let clock = ManualClock(Date())
        let appStore = try TestProducts.appStore(clock: clock)
        try await TestProducts.withRootFile(appStore) { appStoreYAML in
            let config = """
                guestSignupsPerIPPerHour: 100000
                quotas: []
                actions: [{name: ai.query, tokens: 3}]
                \(appStoreYAML)
                """
            try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
                try await ServerPair.with(url: url, config: config) { pair in
                    try await body(pair, appStore, clock)
                    #expect(pair.stop() == [.exited(0), .exited(0)])
                }
            }
        }
    }
}
