import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// Records the user's consent and its time.
    public func setConsumptionConsent(userId: String, consented: Bool, now: Date) async throws {
        _ = try await rows(
            """
            INSERT INTO consumption_consents (user_id, consented, changed_at) VALUES (\(userId), \(consented), \(now.millis))
            ON CONFLICT (user_id) DO UPDATE SET consented = excluded.consented, changed_at = excluded.changed_at
            """)
    }

    /// Queues the request once per notification, due at once: one statement, so two processes cannot both queue it.
    public func queueConsumptionRequest(_ request: NewConsumptionRequest) async throws -> Bool {
        let queued = try await rows(
            """
            INSERT INTO consumption_requests
              (notification_uuid, transaction_id, environment, reason, requested_at, status, next_attempt_at)
            VALUES (\(request.notificationUUID), \(request.transactionId), \(request.environment), \(request.reason),
                    \(request.requestedAt.millis), 'pending', \(request.requestedAt.millis))
            ON CONFLICT (notification_uuid) DO NOTHING RETURNING notification_uuid
            """)
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
        _ = try await rows(
            """
            UPDATE consumption_requests SET status = \(status.rawValue), attempts = attempts + 1, answer = \(answer),
              last_error = \(error), next_attempt_at = COALESCE(\(next)::BIGINT, next_attempt_at), answered_at = \(answeredAt)
            WHERE notification_uuid = \(notificationUUID) AND status = 'pending'
            """)
    }

    /// Records Apple's decision on the requests of the transaction not yet decided.
    public func recordRefundDecision(transactionId: String, _ decision: RefundDecision, at: Date) async throws {
        _ = try await rows(
            """
            UPDATE consumption_requests SET decision = \(decision.rawValue), decided_at = \(at.millis)
            WHERE transaction_id = \(transactionId) AND decision IS NULL
            """)
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
