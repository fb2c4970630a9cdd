extension Schema {
    /// "v16": refund defense (`ConsumptionStore`). `consumption_requests` is the durable queue of Apple's consumption
    /// requests, one row per notification (its primary key), `pending` until answered (`sent`), skipped on purpose
    /// (`skipped`) or past its deadline (`expired`); Apple's decision is recorded beside it. `consumption_consents` is
    /// each user's consent to sharing their consumption with Apple, and when they gave or withdrew it.
    static let consumptionRequests = """
        CREATE TABLE consumption_requests (
          notification_uuid TEXT PRIMARY KEY NOT NULL,
          transaction_id TEXT NOT NULL,
          environment TEXT NOT NULL,
          reason TEXT,
          requested_at INTEGER NOT NULL,
          status TEXT NOT NULL CHECK (status = 'pending' OR status = 'sent' OR status = 'skipped' OR status = 'expired'),
          attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
          next_attempt_at INTEGER NOT NULL,
          answer TEXT,
          last_error TEXT,
          answered_at INTEGER,
          decision TEXT CHECK (decision = 'REFUND' OR decision = 'REFUND_DECLINED'),
          decided_at INTEGER,
          CHECK ((status = 'pending') = (answered_at IS NULL)),
          CHECK (status <> 'sent' OR answer IS NOT NULL),
          CHECK ((decision IS NULL) = (decided_at IS NULL))
        );
        CREATE INDEX consumption_requests_due ON consumption_requests(next_attempt_at) WHERE status = 'pending';
        CREATE INDEX consumption_requests_transaction ON consumption_requests(transaction_id, requested_at);
        CREATE TABLE consumption_consents (
          user_id TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          consented INTEGER NOT NULL CHECK (consented = 0 OR consented = 1),
          changed_at INTEGER NOT NULL
        );
        """
}
