import Foundation
import Logging
import ServiceLifecycle
import TallyAPI
import TallyAppStore
import TallyStore

/// Answers Apple's consumption requests (docs/purchases.md, "Refund defense"): each request the webhook queued
/// (``ConsumptionStore``) is decided from the ledger at the time of answering (``ConsumptionAnswerPlanner``) and sent
/// with Send Consumption Information; a failure is tried again on the planner's backoff until the 12-hour deadline.
///
/// One process answers at a time (the `consumption-answers` lease, taken for each pass). A pass runs when a request
/// is queued in this process (``poke()``) and every ``interval`` of the clock (tests advance a manual clock).
final class ConsumptionAnswers: Service, Sendable {
    let store: any TallyStorage
    let api: AppStoreServerAPIClient
    let policy: ConsumptionPolicy
    let clock: any TallyClock
    let logger: Logger
    /// Opened once migrations have run.
    let ready: StartupGate
    /// How often the queue is read without a poke.
    let interval: TimeInterval
    private let holder = UUID().uuidString
    private let pokes: AsyncStream<Void>
    private let poker: AsyncStream<Void>.Continuation

    /// The lease's name and length (longer than a pass of 50 answers at the client's timeout takes).
    static let lease = "consumption-answers"
    static let leaseLength: TimeInterval = 15 * 60

    init(
        store: any TallyStorage, api: AppStoreServerAPIClient, policy: ConsumptionPolicy, clock: any TallyClock, logger: Logger,
        ready: StartupGate, interval: TimeInterval = 30
    ) {
        (self.store, self.api, self.policy, self.clock, self.logger, self.ready, self.interval) =
            (store, api, policy, clock, logger, ready, interval)
        (pokes, poker) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// A request was queued: answer it now rather than at the next interval.
    func poke() { poker.yield() }

    func run() async throws {
        await ready.wait()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [clock, interval, poker] in
                while !Task.isCancelled {
                    do { try await clock.sleep(for: interval) } catch { return }
                    poker.yield()
                }
            }
            poker.yield()
            await cancelWhenGracefulShutdown {
                for await _ in self.pokes {
                    do {
                        _ = try await self.answerDue()
                    } catch {
                        self.logger.warning("consumption answers: a pass failed", metadata: ["error": "\(error)"])
                    }
                }
            }
            group.cancelAll()
        }
    }

    /// One pass: under the lease, every request due now (50 at most) answered, skipped, retried later or given up.
    /// Returns how many were handled (0 when another process holds the lease).
    @discardableResult
    func answerDue() async throws -> Int {
        let now = clock.now
        guard try await store.takeLease(Self.lease, holder: holder, until: now.addingTimeInterval(Self.leaseLength), now: now) else { return 0 }
        let due: [ConsumptionRequestRecord]
        do {
            due = try await store.dueConsumptionRequests(now: now, limit: 50)
            for record in due { try await answer(record) }
        } catch {
            try? await store.releaseLease(Self.lease, holder: holder)
            throw error
        }
        try await store.releaseLease(Self.lease, holder: holder)
        return due.count
    }

    /// Decides and sends one request's answer, and records how it went.
    func answer(_ record: ConsumptionRequestRecord) async throws {
        let request = record.request
        let now = clock.now
        guard now < record.deadline else {
            return try await finish(request, .expired(error: record.lastError ?? "the 12 hours Apple waits had passed"))
        }
        let facts = try await store.consumptionFacts(transactionId: request.transactionId)
        switch ConsumptionAnswerPlanner.decide(request, facts: facts, policy: policy) {
        case .skip(let reason):
            logger.info("consumption request not answered", metadata: ["tally.transaction": "\(request.transactionId)", "tally.why": "\(reason)"])
            try await finish(request, .skipped(reason: reason))
        case .send(let answer):
            let information = ConsumptionInformation(
                customerConsented: answer.customerConsented, deliveryStatus: ConsumptionDeliveryStatus(rawValue: answer.deliveryStatus),
                sampleContentProvided: answer.sampleContentProvided, consumptionPercentage: answer.consumptionPercentage,
                refundPreference: answer.refundPreference.map(RefundPreference.init(rawValue:)))
            let environment = AppStoreEnvironment(rawValue: request.environment) ?? .production
            do {
                try await api.sendConsumptionInformation(information, transactionId: request.transactionId, environment: environment)
            } catch {
                return try await failed(record, error)
            }
            let body = String(decoding: try JSONEncoder.sortedKeys.encode(information), as: UTF8.self)
            logger.info("consumption request answered", metadata: ["tally.transaction": "\(request.transactionId)"])
            try await finish(request, .sent(answer: body))
        }
    }

    /// A send that failed: tried again later while it may still help and the deadline allows, else given up.
    private func failed(_ record: ConsumptionRequestRecord, _ error: AppStoreServerAPIError) async throws {
        let now = clock.now
        let retryAt = ConsumptionAnswerPlanner.retryAt(afterAttempts: record.attempts + 1, now: now, deadline: record.deadline)
        // A refused key (401) may be fixed by the operator before the deadline: it is retried too, and logged as an error.
        let mayHelp = error.isRetryable || error.code == .unauthorized
        let level: Logger.Level = error.code == .unauthorized ? .error : .warning
        logger.log(
            level: level, "consumption answer failed",
            metadata: ["tally.transaction": "\(record.request.transactionId)", "error": "\(error)", "tally.retry": "\(mayHelp && retryAt != nil)"])
        if mayHelp, let retryAt {
            try await finish(record.request, .failed(error: error.description, retryAt: retryAt))
        } else {
            try await finish(record.request, .expired(error: error.description))
        }
    }

    private func finish(_ request: NewConsumptionRequest, _ result: ConsumptionAttemptResult) async throws {
        try await store.finishConsumptionAttempt(notificationUUID: request.notificationUUID, result, now: clock.now)
    }
}

extension JSONEncoder {
    /// An encoder writing keys sorted (stable bodies to record).
    static var sortedKeys: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
