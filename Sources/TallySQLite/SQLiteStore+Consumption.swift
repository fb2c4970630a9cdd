import Foundation
import GRDB
import TallyStore

extension SQLiteStore: ConsumptionStore {
    /// Records the user's consent and its time.
    public func setConsumptionConsent(userId: String, consented: Bool, now: Date) async throws {
        try await write { db in
            try db.run(SQLiteWrites.setConsumptionConsent, changing: .user(userId),
                arguments: [userId, consented ? 1 : 0, now.millis])
        }
    }

    /// Queues the request once per notification, due at once.
    public func queueConsumptionRequest(_ request: NewConsumptionRequest) async throws -> Bool {
        try await write { db in
            try db.run(SQLiteWrites.queueConsumptionRequest, changing: .transaction(request.transactionId),
                arguments: [
                    request.notificationUUID, request.transactionId, request.environment, request.reason, request.requestedAt.millis,
                    request.requestedAt.millis,
                ])
            return db.changesCount == 1
        }
    }

    /// The pending requests due at `now`, oldest first.
    public func dueConsumptionRequests(now: Date, limit: Int) async throws -> [ConsumptionRequestRecord] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM consumption_requests WHERE status = 'pending' AND next_attempt_at <= ?
                    ORDER BY next_attempt_at, notification_uuid LIMIT ?
                    """,
                arguments: [now.millis, limit]
            ).map(ConsumptionRequestRecord.init(row:))
        }
    }

    /// The account holding the purchase, its consent and its consumption, in one snapshot.
    public func consumptionFacts(transactionId: String) async throws -> ConsumptionFacts? {
        try await read { db in
            guard
                let holder = try String.fetchOne(
                    db, sql: "SELECT user_id FROM ledger_entries WHERE kind = 'purchase' AND reference = ?", arguments: [transactionId])
            else { return nil }
            let mergedInto = try String.fetchOne(db, sql: "SELECT merged_into FROM users WHERE id = ?", arguments: [holder])
            let account = mergedInto ?? holder
            func entries(_ userId: String) throws -> [LedgerEntryRecord] {
                try Row.fetchAll(db, sql: "SELECT * FROM ledger_entries WHERE user_id = ? ORDER BY id", arguments: [userId])
                    .map(LedgerEntryRecord.init(row:))
            }
            var handovers: [String: PurchaseConsumption.Handover] = [:]
            for guest in try String.fetchAll(db, sql: "SELECT id FROM users WHERE merged_into = ?", arguments: [account]) {
                handovers[guest] = PurchaseConsumption(entries: try entries(guest)).handedOver
            }
            let consent = try Row.fetchOne(
                db, sql: "SELECT consented, changed_at FROM consumption_consents WHERE user_id = ?", arguments: [account])
            let consentedAt = consent.flatMap { row -> Date? in
                (row["consented"] as Int64) == 1 ? Date(millis: row["changed_at"]) : nil
            }
            return ConsumptionFacts(
                userId: account, consentedAt: consentedAt, accountDeleted: false,
                consumption: PurchaseConsumption(entries: try entries(account), mergedIn: handovers))
        }
    }

    /// Records an attempt's end: one more attempt, and the status, answer or next attempt it leaves.
    public func finishConsumptionAttempt(notificationUUID: String, _ result: ConsumptionAttemptResult, now: Date) async throws {
        let (status, answer, error, next): (ConsumptionRequestStatus, String?, String?, Date?) =
            switch result {
            case .sent(let answer): (.sent, answer, nil, nil)
            case .skipped(let reason): (.skipped, reason, nil, nil)
            case .failed(let error, let retryAt): (.pending, nil, error, retryAt)
            case .expired(let error): (.expired, nil, error, nil)
            }
        try await write { db in
            try db.run(SQLiteWrites.finishConsumptionAttempt, changing: .all,
                arguments: [status.rawValue, answer, error, next?.millis, status == .pending ? nil : now.millis, notificationUUID])
        }
    }

    /// Records Apple's decision on the requests of the transaction not yet decided.
    public func recordRefundDecision(transactionId: String, _ decision: RefundDecision, at: Date) async throws {
        try await write { db in
            try db.run(SQLiteWrites.recordRefundDecision, changing: .transaction(transactionId),
                arguments: [decision.rawValue, at.millis, transactionId])
        }
    }

    /// The requests about the transaction, oldest first.
    public func consumptionRequests(transactionId: String) async throws -> [ConsumptionRequestRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM consumption_requests WHERE transaction_id = ? ORDER BY requested_at, notification_uuid",
                arguments: [transactionId]
            ).map(ConsumptionRequestRecord.init(row:))
        }
    }
}

extension ConsumptionRequestRecord {
    /// A `consumption_requests` row.
    init(row: Row) {
        self.init(
            request: NewConsumptionRequest(
                notificationUUID: row["notification_uuid"], transactionId: row["transaction_id"], environment: row["environment"],
                reason: row["reason"], requestedAt: Date(millis: row["requested_at"])),
            status: ConsumptionRequestStatus(rawValue: row["status"]) ?? .pending, attempts: row["attempts"],
            nextAttemptAt: Date(millis: row["next_attempt_at"]), answer: row["answer"], lastError: row["last_error"],
            answeredAt: (row["answered_at"] as Int64?).map(Date.init(millis:)),
            decision: (row["decision"] as String?).flatMap(RefundDecision.init(rawValue:)),
            decidedAt: (row["decided_at"] as Int64?).map(Date.init(millis:)))
    }
}
