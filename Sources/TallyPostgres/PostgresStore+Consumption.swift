import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// Records the user's consent and its time.
    public func setConsumptionConsent(userId: String, consented: Bool, now: Date) async throws {
        var statement = BoundStatement()
        let write = Writes.setConsumptionConsent(
            userId: statement.bind(userId), consented: statement.bind(consented), now: statement.bind(now.millis))
        try await run(write, statement, changing: [.user(userId)])
    }

    /// Queues the request once per notification, due at once: one statement, so two processes cannot both queue it.
    public func queueConsumptionRequest(_ request: NewConsumptionRequest) async throws -> Bool {
        var statement = BoundStatement()
        let write = Writes.queueConsumptionRequest(
            notificationUUID: statement.bind(request.notificationUUID), transactionId: statement.bind(request.transactionId),
            environment: statement.bind(request.environment), reason: statement.bind(request.reason),
            requestedAt: statement.bind(request.requestedAt.millis))
        let queued = try await run(write, statement, changing: [.transaction(request.transactionId)])
        return !queued.isEmpty
    }

    /// The pending requests due at `now`, oldest first.
    public func dueConsumptionRequests(now: Date, limit: Int) async throws -> [ConsumptionRequestRecord] {
        try await rows(
            """
            SELECT \(unescaped: ConsumptionRequestRecord.columns) FROM consumption_requests
            WHERE status = 'pending' AND next_attempt_at <= \(now.millis)
            ORDER BY next_attempt_at, notification_uuid LIMIT \(limit)
            """
        ).map { try ConsumptionRequestRecord(Columns($0)) }
    }

    /// The account holding the purchase, its consent and its consumption, in one read-only snapshot.
    public func consumptionFacts(transactionId: String) async throws -> ConsumptionFacts? {
        try await transaction { connection in
            try await connection.rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            guard
                let holderRow = try await connection.rows(
                    """
                    SELECT l.user_id, u.merged_into FROM ledger_entries l JOIN users u ON u.id = l.user_id
                    WHERE l.kind = 'purchase' AND l.reference = \(transactionId)
                    """, logger: logger
                ).first.map(Columns.init)
            else { return nil }
            let holder: String = try holderRow["user_id"]
            let mergedInto: String? = try holderRow["merged_into"]
            let account = mergedInto ?? holder
            func entries(_ userId: String) async throws -> [LedgerEntryRecord] {
                try await connection.rows(
                    """
                    SELECT id, kind, amount, held_change, balance_after, reason, created_at, reference FROM ledger_entries
                    WHERE user_id = \(userId) ORDER BY id
                    """, logger: logger
                ).map { try LedgerEntryRecord(Columns($0)) }
            }
            var handovers: [String: PurchaseConsumption.Handover] = [:]
            let guests = try await connection.rows("SELECT id FROM users WHERE merged_into = \(account)", logger: logger)
            for guest in guests {
                let id: String = try Columns(guest)["id"]
                handovers[id] = PurchaseConsumption(entries: try await entries(id)).handedOver
            }
            let consent = try await connection.rows(
                "SELECT consented, changed_at FROM consumption_consents WHERE user_id = \(account)", logger: logger
            ).first.map(Columns.init)
            var consentedAt: Date?
            if let consent, try consent["consented"] as Bool { consentedAt = Date(millis: try consent["changed_at"]) }
            return ConsumptionFacts(
                userId: account, consentedAt: consentedAt, accountDeleted: false,
                consumption: PurchaseConsumption(entries: try await entries(account), mergedIn: handovers))
        }
    }

    /// Records an attempt's end: one more attempt, and the status, answer or next attempt it leaves.
    public func finishConsumptionAttempt(notificationUUID: String, _ result: ConsumptionAttemptResult, now: Date) async throws {
        let (status, answer, error, next): (ConsumptionRequestStatus, String?, String?, Int64?) =
            switch result {
            case .sent(let answer): (.sent, answer, nil, nil)
            case .skipped(let reason): (.skipped, reason, nil, nil)
            case .failed(let error, let retryAt): (.pending, nil, error, retryAt.millis)
            case .expired(let error): (.expired, nil, error, nil)
            }
        let answeredAt: Int64? = status == .pending ? nil : now.millis
        var statement = BoundStatement()
        let write = Writes.finishConsumptionAttempt(
            notificationUUID: statement.bind(notificationUUID), status: statement.bind(status.rawValue), answer: statement.bind(answer),
            error: statement.bind(error), next: statement.bind(next), answeredAt: statement.bind(answeredAt))
        try await run(write, statement, changing: [.all])
    }

    /// Records Apple's decision on the requests of the transaction not yet decided.
    public func recordRefundDecision(transactionId: String, _ decision: RefundDecision, at: Date) async throws {
        var statement = BoundStatement()
        let write = Writes.recordRefundDecision(
            transactionId: statement.bind(transactionId), decision: statement.bind(decision.rawValue), at: statement.bind(at.millis))
        try await run(write, statement, changing: [.transaction(transactionId)])
    }

    /// The requests about the transaction, oldest first.
    public func consumptionRequests(transactionId: String) async throws -> [ConsumptionRequestRecord] {
        try await rows(
            """
            SELECT \(unescaped: ConsumptionRequestRecord.columns) FROM consumption_requests WHERE transaction_id = \(transactionId)
            ORDER BY requested_at, notification_uuid
            """
        ).map { try ConsumptionRequestRecord(Columns($0)) }
    }
}

extension ConsumptionRequestRecord {
    /// The columns ``init(_:)`` reads, in its order.
    static let columns = """
        notification_uuid, transaction_id, environment, reason, requested_at, status, attempts, next_attempt_at, answer, \
        last_error, answered_at, decision, decided_at
        """

    /// A `consumption_requests` row of ``columns``.
    init(_ row: Columns) throws {
        let status: String = try row["status"]
        let attempts: Int32 = try row["attempts"]
        let decision: String? = try row["decision"]
        self.init(
            request: NewConsumptionRequest(
                notificationUUID: try row["notification_uuid"], transactionId: try row["transaction_id"],
                environment: try row["environment"], reason: try row["reason"], requestedAt: Date(millis: try row["requested_at"])),
            status: ConsumptionRequestStatus(rawValue: status) ?? .pending, attempts: Int(attempts),
            nextAttemptAt: Date(millis: try row["next_attempt_at"]), answer: try row["answer"], lastError: try row["last_error"],
            answeredAt: (try row["answered_at"] as Int64?).map(Date.init(millis:)), decision: decision.flatMap(RefundDecision.init(rawValue:)),
            decidedAt: (try row["decided_at"] as Int64?).map(Date.init(millis:)))
    }
}
