import Foundation

/// Apple's consumption requests (`CONSUMPTION_REQUEST`: a customer asked for a refund of a consumable) and the answers
/// Tally sends from the ledger (docs/purchases.md, "Refund defense"). The store keeps a durable queue — one row per
/// request, by notification — and each user's consent; ``ConsumptionAnswerPlanner`` decides each answer.
public protocol ConsumptionStore: Sendable {
    /// Records whether `userId` consents to Tally sharing their consumption with Apple, at `now`.
    func setConsumptionConsent(userId: String, consented: Bool, now: Date) async throws

    /// Queues `request` unless its notification was queued before; true when queued now.
    func queueConsumptionRequest(_ request: NewConsumptionRequest) async throws -> Bool

    /// The pending requests whose next attempt is due at `now`, oldest first.
    func dueConsumptionRequests(now: Date, limit: Int) async throws -> [ConsumptionRequestRecord]

    /// What an answer about `transactionId` is decided from, read in one snapshot; nil when no account was credited
    /// for it (an unclaimed purchase, or none).
    func consumptionFacts(transactionId: String) async throws -> ConsumptionFacts?

    /// Records how an attempt at answering request `notificationUUID` ended.
    func finishConsumptionAttempt(notificationUUID: String, _ result: ConsumptionAttemptResult, now: Date) async throws

    /// Records Apple's decision about `transactionId` (a `REFUND` or `REFUND_DECLINED` notification) on its requests
    /// not yet decided.
    func recordRefundDecision(transactionId: String, _ decision: RefundDecision, at: Date) async throws

    /// The requests about `transactionId`, oldest first (the console's timeline, tests).
    func consumptionRequests(transactionId: String) async throws -> [ConsumptionRequestRecord]
}

/// A verified `CONSUMPTION_REQUEST`, to queue.
public struct NewConsumptionRequest: Sendable, Hashable {
    /// The notification's id: a request is queued once.
    public var notificationUUID: String
    /// The consumable the customer wants refunded.
    public var transactionId: String
    /// `Production` or `Sandbox`: where the answer goes.
    public var environment: String
    /// Apple's `consumptionRequestReason` (`UNINTENDED_PURCHASE`, …), if given.
    public var reason: String?
    /// When Apple signed the request: the answer is due within ``ConsumptionRequestRecord/answerWindow`` of it.
    public var requestedAt: Date

    /// Creates a request.
    public init(notificationUUID: String, transactionId: String, environment: String, reason: String?, requestedAt: Date) {
        self.notificationUUID = notificationUUID
        self.transactionId = transactionId
        self.environment = environment
        self.reason = reason
        self.requestedAt = requestedAt
    }
}

/// Where a request stands.
public enum ConsumptionRequestStatus: String, Sendable, Hashable, CaseIterable {
    /// Not answered yet: tried at its next attempt.
    case pending
    /// Answered: Apple accepted it (202).
    case sent
    /// Not answered on purpose: the user did not consent, or no account was credited for it.
    case skipped
    /// Its deadline passed before Apple accepted an answer.
    case expired
}

/// Apple's decision on a refund request.
public enum RefundDecision: String, Sendable, Hashable {
    /// Refunded (`REFUND`).
    case refund = "REFUND"
    /// Declined (`REFUND_DECLINED`).
    case refundDeclined = "REFUND_DECLINED"
}

/// One consumption request, as stored.
public struct ConsumptionRequestRecord: Sendable, Hashable {
    /// How long Apple waits for an answer: 12 hours from the request.
    public static let answerWindow: TimeInterval = 12 * 3600

    /// The request.
    public var request: NewConsumptionRequest
    /// Where it stands.
    public var status: ConsumptionRequestStatus
    /// Attempts made.
    public var attempts: Int
    /// When it is tried next (pending only).
    public var nextAttemptAt: Date
    /// The JSON body Apple accepted (sent), or why nothing was sent (skipped, expired).
    public var answer: String?
    /// The last attempt's failure, if it failed.
    public var lastError: String?
    /// When it was answered, skipped or expired.
    public var answeredAt: Date?
    /// Apple's decision, once a `REFUND` or `REFUND_DECLINED` came.
    public var decision: RefundDecision?
    /// When Apple decided.
    public var decidedAt: Date?

    /// The last moment an answer counts.
    public var deadline: Date { request.requestedAt.addingTimeInterval(Self.answerWindow) }

    /// Creates a record.
    public init(
        request: NewConsumptionRequest, status: ConsumptionRequestStatus, attempts: Int, nextAttemptAt: Date, answer: String?,
        lastError: String?, answeredAt: Date?, decision: RefundDecision?, decidedAt: Date?
    ) {
        self.request = request
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.answer = answer
        self.lastError = lastError
        self.answeredAt = answeredAt
        self.decision = decision
        self.decidedAt = decidedAt
    }
}

/// How an attempt at answering ended.
public enum ConsumptionAttemptResult: Sendable, Hashable {
    /// Apple accepted `answer` (the JSON sent).
    case sent(answer: String)
    /// Not sent on purpose, for `reason`.
    case skipped(reason: String)
    /// Failed with `error`; tried again at `retryAt`.
    case failed(error: String, retryAt: Date)
    /// Failed with `error`, and the deadline has passed: given up.
    case expired(error: String)
}

/// What an answer is decided from: the account credited for the purchase, its ledger (with those of guests merged
/// into it) and its consent.
public struct ConsumptionFacts: Sendable, Hashable {
    /// The account that holds the purchase's tokens now (a guest's merge moves them to its account).
    public var userId: String
    /// Whether that account's user consented, and when; nil when they never said.
    public var consentedAt: Date?
    /// Whether the account was deleted (its tokens can no longer be used).
    public var accountDeleted: Bool
    /// How much of each purchase the account spent (``PurchaseConsumption`` over its ledger and its merged guests').
    public var consumption: PurchaseConsumption

    /// Creates facts.
    public init(userId: String, consentedAt: Date?, accountDeleted: Bool, consumption: PurchaseConsumption) {
        self.userId = userId
        self.consentedAt = consentedAt
        self.accountDeleted = accountDeleted
        self.consumption = consumption
    }
}
