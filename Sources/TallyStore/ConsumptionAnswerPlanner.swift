import Foundation

/// How the app answers consumption requests (`appStore.consumption`): consent, sample content and the ordered refund
/// preference rules.
public struct ConsumptionPolicy: Sendable, Hashable {
    /// One rule: when its condition holds, `prefer` is sent (nil: no preference); the first rule that holds decides.
    public struct Rule: Sendable, Hashable {
        /// What must hold; an empty condition always holds.
        public var when: Condition
        /// Apple's `refundPreference` (`DECLINE`, `GRANT_FULL`, `GRANT_PRORATED`), or nil to send none.
        public var prefer: String?

        /// A rule.
        public init(when: Condition = Condition(), prefer: String?) {
            self.when = when
            self.prefer = prefer
        }
    }

    /// What a rule asks of a request; every part given must hold.
    public struct Condition: Sendable, Hashable {
        /// The purchase is at least this consumed (milliunits).
        public var consumedAtLeast: Int?
        /// The purchase is at most this consumed (milliunits).
        public var consumedAtMost: Int?
        /// The purchase is (true) or is not (false) the account's first.
        public var firstPurchase: Bool?
        /// Apple's `consumptionRequestReason` is one of these.
        public var reasons: [String]?

        /// A condition.
        public init(consumedAtLeast: Int? = nil, consumedAtMost: Int? = nil, firstPurchase: Bool? = nil, reasons: [String]? = nil) {
            self.consumedAtLeast = consumedAtLeast
            self.consumedAtMost = consumedAtMost
            self.firstPurchase = firstPurchase
            self.reasons = reasons
        }

        func holds(consumed: Int, firstPurchase isFirst: Bool, reason: String?) -> Bool {
            if let consumedAtLeast, consumed < consumedAtLeast { return false }
            if let consumedAtMost, consumed > consumedAtMost { return false }
            if let firstPurchase, firstPurchase != isFirst { return false }
            if let reasons, !reasons.contains(reason ?? "") { return false }
            return true
        }
    }

    /// The app's terms cover sharing consumption with Apple: every user counts as consenting.
    public var consentedByTerms: Bool
    /// The app gives every user something free before buying (a signup grant, free daily uses): a sample was provided.
    public var sampleContentProvided: Bool
    /// The refund preference rules, in order.
    public var rules: [Rule]

    /// A policy.
    public init(consentedByTerms: Bool = false, sampleContentProvided: Bool = false, rules: [Rule] = []) {
        self.consentedByTerms = consentedByTerms
        self.sampleContentProvided = sampleContentProvided
        self.rules = rules
    }
}

/// What Tally sends Apple about one purchase (Send Consumption Information v2's fields).
public struct ConsumptionAnswer: Sendable, Hashable, Codable {
    /// Always true: Tally answers only for users who consented (Apple refuses anything else).
    public var customerConsented = true
    /// `DELIVERED`, or an `UNDELIVERED_*` value.
    public var deliveryStatus: String
    /// Whether the user had free uses offered or spent before buying.
    public var sampleContentProvided: Bool
    /// How much of the purchase was spent, milliunits.
    public var consumptionPercentage: Int
    /// The first matching rule's preference, if any.
    public var refundPreference: String?

    /// An answer.
    public init(deliveryStatus: String, sampleContentProvided: Bool, consumptionPercentage: Int, refundPreference: String?) {
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}

/// Decides each consumption request's answer, and when a failed attempt is tried again. Pure.
public enum ConsumptionAnswerPlanner {
    /// What to do with a request.
    public enum Decision: Sendable, Hashable {
        /// Send this answer.
        case send(ConsumptionAnswer)
        /// Send nothing, for this reason (recorded, and shown in the console).
        case skip(String)
    }

    /// The answer to `request` from `facts` under `policy`: nothing without consent, or when no account holds the
    /// purchase (never credited, or its account deleted: its ledger is gone with it).
    public static func decide(_ request: NewConsumptionRequest, facts: ConsumptionFacts?, policy: ConsumptionPolicy) -> Decision {
        guard let facts, !facts.accountDeleted, let lot = facts.consumption.lot(of: request.transactionId) else {
            return .skip("no account holds this purchase (it was never credited, or its account was deleted)")
        }
        guard facts.consentedAt != nil || policy.consentedByTerms else {
            return .skip("the user has not consented to sharing consumption (POST /v1/purchases/consumption-consent)")
        }
        let consumed = lot.consumptionMilliunits
        let isFirst = facts.consumption.lots.first { $0.transactionId != nil }?.transactionId == request.transactionId
        let rule = policy.rules.first { $0.when.holds(consumed: consumed, firstPurchase: isFirst, reason: request.reason) }
        return .send(
            ConsumptionAnswer(
                deliveryStatus: "DELIVERED", sampleContentProvided: policy.sampleContentProvided || lot.freeSpentBefore,
                consumptionPercentage: consumed, refundPreference: rule?.prefer))
    }

    /// When to try again after `attempts` failed attempts: 30 s, 1 min, 2 min … at most 30 min after `now`, and a
    /// minute before `deadline` at the latest; nil when even that has passed (the request expires).
    public static func retryAt(afterAttempts attempts: Int, now: Date, deadline: Date) -> Date? {
        let delay = min(1_800, 30 * pow(2, Double(max(0, min(attempts - 1, 16)))))
        let next = min(now.addingTimeInterval(delay), deadline.addingTimeInterval(-60))
        return next > now ? next : nil
    }
}
