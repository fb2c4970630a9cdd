extension PostgresSchema {
    /// Version 17: refund defense (`ConsumptionStore`), as SQLite's "v16": the durable queue of Apple's consumption
    /// requests, one row per notification, and each user's consent.
    static let consumptionRequests: [String] = [
        """
        CREATE TABLE consumption_requests (
          notification_uuid TEXT PRIMARY KEY,
          transaction_id TEXT NOT NULL,
          environment TEXT NOT NULL,
          reason TEXT,
          requested_at BIGINT NOT NULL,
          status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'skipped', 'expired')),
          attempts INT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
          next_attempt_at BIGINT NOT NULL,
          answer TEXT,
          last_error TEXT,
          answered_at BIGINT,
          decision TEXT CHECK (decision IN ('REFUND', 'REFUND_DECLINED')),
          decided_at BIGINT,
          CHECK ((status = 'pending') = (answered_at IS NULL)),
          CHECK (status <> 'sent' OR answer IS NOT NULL),
          CHECK ((decision IS NULL) = (decided_at IS NULL))
        )
        """,
        "CREATE INDEX consumption_requests_due ON consumption_requests(next_attempt_at) WHERE status = 'pending'",
        "CREATE INDEX consumption_requests_transaction ON consumption_requests(transaction_id, requested_at)",
        """
        CREATE TABLE consumption_consents (
          user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
          consented BOOLEAN NOT NULL,
          changed_at BIGINT NOT NULL
        )
        """,
    ]
}
