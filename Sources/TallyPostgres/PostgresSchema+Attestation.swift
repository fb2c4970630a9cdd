extension PostgresSchema {
    /// Version 18: App Attest (`AttestationStore`), as SQLite's "v17": one-time challenges, attested keys with the
    /// counter of their last accepted assertion, and `monitor` mode's flag on a user.
    static let attestation: [String] = [
        """
        CREATE TABLE attestation_challenges (
          challenge_hash TEXT PRIMARY KEY,
          expires_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE app_attest_keys (
          key_id TEXT PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          installation TEXT,
          public_key BYTEA NOT NULL CHECK (length(public_key) = 65),
          counter BIGINT NOT NULL CHECK (counter BETWEEN 0 AND 4294967295),
          environment TEXT NOT NULL CHECK (environment IN ('production', 'development')),
          receipt BYTEA NOT NULL,
          attested_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX app_attest_keys_user ON app_attest_keys(user_id)",
        """
        CREATE TABLE unattested_spends (
          user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
          count BIGINT NOT NULL CHECK (count > 0),
          last_reason TEXT NOT NULL,
          last_at BIGINT NOT NULL
        )
        """,
    ]
}
