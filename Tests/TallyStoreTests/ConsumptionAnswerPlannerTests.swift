import Foundation
import TallyStore
import Testing

/// ``ConsumptionAnswerPlanner``: what is sent for a request, and when a failed send is tried again.
@Suite("Consumption answer planner", .timeLimit(.minutes(1)))
struct ConsumptionAnswerPlannerTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func facts(spent: Int64, consented: Bool = true, grantsFirst: Bool = false) -> ConsumptionFacts {
        var entries: [LedgerEntryRecord] = []
        var balance: Int64 = 0
        func add(_ kind: EntryKind, _ amount: Int64, _ reference: String? = nil) {
            balance += amount
            entries.append(
                LedgerEntryRecord(
                    id: Int64(entries.count + 1), kind: kind, amount: amount, heldChange: 0, balanceAfter: balance, reason: nil, createdAt: now,
                    reference: reference))
        }
        if grantsFirst {
            add(.grant, 5)
            add(.debit, -5)
        }
        add(.purchase, 100, "t1")
        add(.debit, -spent)
        return ConsumptionFacts(
            userId: "u", consentedAt: consented ? now : nil, accountDeleted: false, consumption: PurchaseConsumption(entries: entries))
    }

    static func request(_ transactionId: String = "t1", reason: String? = "UNINTENDED_PURCHASE") -> NewConsumptionRequest {
        NewConsumptionRequest(notificationUUID: "n", transactionId: transactionId, environment: "Sandbox", reason: reason, requestedAt: now)
    }

    @Test("No consent, no purchase or a deleted account: nothing is sent; the terms stand for consent")
    func skips() {
        let policy = ConsumptionPolicy()
        guard case .skip(let why) = ConsumptionAnswerPlanner.decide(Self.request(), facts: Self.facts(spent: 1, consented: false), policy: policy)
        else {
            Issue.record("sent without consent")
            return
        }
        #expect(why.contains("consent"))
        if case .send = ConsumptionAnswerPlanner.decide(Self.request(), facts: nil, policy: policy) { Issue.record("no account holds it") }
        if case .send = ConsumptionAnswerPlanner.decide(Self.request("t2"), facts: Self.facts(spent: 1), policy: policy) {
            Issue.record("answered for a purchase the ledger does not hold")
        }
        var deleted = Self.facts(spent: 1)
        deleted.accountDeleted = true
        if case .send = ConsumptionAnswerPlanner.decide(Self.request(), facts: deleted, policy: policy) { Issue.record("a deleted account") }
        let byTerms = ConsumptionAnswerPlanner.decide(
            Self.request(), facts: Self.facts(spent: 60, consented: false), policy: ConsumptionPolicy(consentedByTerms: true))
        #expect(byTerms == .send(ConsumptionAnswer(deliveryStatus: "DELIVERED", sampleContentProvided: false, consumptionPercentage: 60_000, refundPreference: nil)))
    }

    @Test("Rules: the first that holds decides; a reason filter, bounds inclusive; a grant spent before buying is a sample")
    func rules() {
        let policy = ConsumptionPolicy(
            rules: [
                .init(when: .init(reasons: ["LEGAL"]), prefer: nil),
                .init(when: .init(consumedAtLeast: 50_000), prefer: "DECLINE"),
                .init(when: .init(consumedAtMost: 5_000, firstPurchase: true), prefer: "GRANT_FULL"),
            ])
        func preference(_ spent: Int64, reason: String = "OTHER", grantsFirst: Bool = false) -> String? {
            guard case .send(let answer) = ConsumptionAnswerPlanner.decide(
                Self.request(reason: reason), facts: Self.facts(spent: spent, grantsFirst: grantsFirst), policy: policy)
            else { return "skipped" }
            return answer.refundPreference
        }
        #expect(preference(50) == "DECLINE" && preference(49) == nil && preference(5) == "GRANT_FULL" && preference(6) == nil)
        #expect(preference(90, reason: "LEGAL") == nil, "the LEGAL rule comes first")
        guard case .send(let sampled) = ConsumptionAnswerPlanner.decide(Self.request(), facts: Self.facts(spent: 1, grantsFirst: true), policy: policy)
        else {
            Issue.record("skipped")
            return
        }
        #expect(sampled.sampleContentProvided)
    }

    @Test("Retries: 30 s, 1 min, 2 min … at most 30 min, a minute before the deadline at the latest, then none")
    func retries() {
        let deadline = Self.now.addingTimeInterval(12 * 3600)
        let delays = (1...9).map { ConsumptionAnswerPlanner.retryAt(afterAttempts: $0, now: Self.now, deadline: deadline)!.timeIntervalSince(Self.now) }
        #expect(delays == [30, 60, 120, 240, 480, 960, 1_800, 1_800, 1_800])
        let late = deadline.addingTimeInterval(-300)
        #expect(ConsumptionAnswerPlanner.retryAt(afterAttempts: 9, now: late, deadline: deadline) == deadline.addingTimeInterval(-60))
        #expect(ConsumptionAnswerPlanner.retryAt(afterAttempts: 1, now: deadline.addingTimeInterval(-30), deadline: deadline) == nil)
    }
}
