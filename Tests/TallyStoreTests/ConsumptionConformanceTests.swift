import Foundation
import TallyStore
import Testing

/// `ConsumptionStore` on every store: the durable queue of Apple's consumption requests (one row per notification,
/// under concurrency too), consent, the facts an answer is decided from (a purchase's ledger, a merged guest's), and
/// Apple's decisions.
@Suite("Consumption conformance", .timeLimit(.minutes(2)))
struct ConsumptionConformanceTests {
    static let question = ActionSpec(name: "question", tokens: 1)

    static func request(_ transactionId: String, at date: Date, uuid: String = randomId("n-")) -> NewConsumptionRequest {
        NewConsumptionRequest(
            notificationUUID: uuid, transactionId: transactionId, environment: "Production", reason: "UNINTENDED_PURCHASE", requestedAt: date)
    }

    @Test("A request is queued once per notification, even 20 times at once; it is due at once and leaves the queue when answered", arguments: StoreKind.allCases)
    func queueOnce(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let transactionId = randomId("tx-")
            let request = Self.request(transactionId, at: f.now)
            let queued = try await concurrently(20) { _ in try await f.store.queueConsumptionRequest(request) }
            let answers = queued.compactMap { if case .success(let queuedNow) = $0 { queuedNow } else { nil } }
            #expect(answers.count == 20 && answers.filter { $0 }.count == 1, "[\(kind)] one queued it, none failed")
            let due = try await f.store.dueConsumptionRequests(now: f.now, limit: 1_000).filter { $0.request.transactionId == transactionId }
            #expect(due.count == 1 && due.first?.status == .pending && due.first?.attempts == 0, "[\(kind)]")
            #expect(due.first?.deadline == f.now.addingTimeInterval(12 * 3600) && due.first?.request == request, "[\(kind)]")

            let retry = f.now.addingTimeInterval(30)
            try await f.store.finishConsumptionAttempt(notificationUUID: request.notificationUUID, .failed(error: "500", retryAt: retry), now: f.now)
            #expect(try await f.store.dueConsumptionRequests(now: f.now, limit: 1_000).allSatisfy { $0.request != request }, "[\(kind)] not due before its retry")
            let again = try await f.store.dueConsumptionRequests(now: retry, limit: 1_000).first { $0.request == request }
            #expect(again?.attempts == 1 && again?.lastError == "500", "[\(kind)]")

            try await f.store.finishConsumptionAttempt(notificationUUID: request.notificationUUID, .sent(answer: #"{"a":1}"#), now: retry)
            // A late copy of the same attempt's end changes nothing: only a pending request is finished.
            try await f.store.finishConsumptionAttempt(notificationUUID: request.notificationUUID, .expired(error: "late"), now: retry)
            let records = try await f.store.consumptionRequests(transactionId: transactionId)
            try #require(records.count == 1, "[\(kind)]")
            #expect(records[0].status == .sent && records[0].answer == #"{"a":1}"# && records[0].attempts == 2, "[\(kind)]")
            #expect(records[0].answeredAt == retry, "[\(kind)]")
            #expect(try await f.store.dueConsumptionRequests(now: day(30), limit: 1_000).allSatisfy { $0.request != request }, "[\(kind)]")

            try await f.store.recordRefundDecision(transactionId: transactionId, .refundDeclined, at: retry)
            try await f.store.recordRefundDecision(transactionId: transactionId, .refund, at: day(40))  // the first decision stays
            let decided = try await f.store.consumptionRequests(transactionId: transactionId)
            #expect(decided.first?.decision == .refundDeclined && decided.first?.decidedAt == retry, "[\(kind)]")
        }
    }

    @Test("The facts of a pack 60 % spent: its account, its consent, and 60,000 milliunits", arguments: StoreKind.allCases)
    func factsOfASpentPack(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let purchase = AppStoreFacts.consumable(tokens: 100, for: user, purchased: f.now)
            try await f.redeem(purchase, by: user)
            for _ in 0..<60 { try await f.run(.performAction(userId: user, action: Self.question, quotaLimit: nil)) }

            var facts = try #require(try await f.store.consumptionFacts(transactionId: purchase.transactionId))
            #expect(facts.userId == user && facts.consentedAt == nil, "[\(kind)]")
            #expect(facts.consumption.lot(of: purchase.transactionId)?.consumptionMilliunits == 60_000, "[\(kind)]")

            try await f.store.setConsumptionConsent(userId: user, consented: true, now: f.now)
            facts = try #require(try await f.store.consumptionFacts(transactionId: purchase.transactionId))
            #expect(facts.consentedAt == f.now, "[\(kind)]")
            try await f.store.setConsumptionConsent(userId: user, consented: false, now: f.now)
            #expect(try await f.store.consumptionFacts(transactionId: purchase.transactionId)?.consentedAt == nil, "[\(kind)] withdrawn")
            #expect(try await f.store.consumptionFacts(transactionId: randomId("tx-")) == nil, "[\(kind)] no such purchase")
        }
    }

    @Test("Buy, spend, buy, spend, and quantity 2: the documented percentages", arguments: StoreKind.allCases)
    func buySpendBuySpend(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let first = AppStoreFacts.consumable(tokens: 100, for: user, purchased: f.now)
            try await f.redeem(first, by: user)
            for _ in 0..<70 { try await f.run(.performAction(userId: user, action: Self.question, quotaLimit: nil)) }
            let second = AppStoreFacts.consumable(tokens: 50, quantity: 2, for: user, purchased: f.now)
            try await f.redeem(second, by: user)
            for _ in 0..<50 { try await f.run(.performAction(userId: user, action: Self.question, quotaLimit: nil)) }
            let facts = try #require(try await f.store.consumptionFacts(transactionId: second.transactionId))
            #expect(facts.consumption.lot(of: first.transactionId)?.consumptionMilliunits == 100_000, "[\(kind)]")
            #expect(facts.consumption.lot(of: second.transactionId)?.credited == 100, "[\(kind)] 2 × 50")
            #expect(facts.consumption.lot(of: second.transactionId)?.consumptionMilliunits == 20_000, "[\(kind)]")
        }
    }

    @Test("A guest's pack merged into an account is answered from the account's ledger, with what the guest spent", arguments: StoreKind.allCases)
    func mergedGuest(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.signIn(device: randomId("dev-")).user.id
            let purchase = AppStoreFacts.consumable(tokens: 100, for: guest, purchased: f.now)
            try await f.redeem(purchase, by: guest)
            for _ in 0..<30 { try await f.run(.performAction(userId: guest, action: Self.question, quotaLimit: nil)) }
            let account = try await f.newUser(tokens: 10)
            _ = try await f.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
            _ = try await f.store.merge(guestId: guest, into: account, now: f.now)
            for _ in 0..<40 { try await f.run(.performAction(userId: account, action: Self.question, quotaLimit: nil)) }
            try await f.store.setConsumptionConsent(userId: account, consented: true, now: f.now)

            let facts = try #require(try await f.store.consumptionFacts(transactionId: purchase.transactionId))
            #expect(facts.userId == account && facts.consentedAt != nil, "[\(kind)]")
            // The account's 10 granted tokens are spent first, then 30 more of the pack: 60 of 100.
            #expect(facts.consumption.lot(of: purchase.transactionId)?.spent == 60, "[\(kind)]")
            #expect(facts.consumption.balance == (try await f.balance(account)), "[\(kind)]")
        }
    }
}
