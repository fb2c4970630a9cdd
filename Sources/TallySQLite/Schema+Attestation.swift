extension Schema {
    /// "v17": App Attest (`AttestationStore`). `attestation_challenges` holds each one-time challenge by its SHA-256
    /// until used or expired; `app_attest_keys` each attested key (once: its id is the primary key) with the counter of
    /// its last accepted assertion, which only rises; `unattested_spends` is `monitor` mode's flag on a user.
    static let attestation = """
        CREATE TABLE attestation_challenges (
          challenge_hash TEXT PRIMARY KEY NOT NULL,
          expires_at INTEGER NOT NULL
        );
        CREATE TABLE app_attest_keys (
          key_id TEXT PRIMARY KEY NOT NULL,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          installation TEXT,
          public_key BLOB NOT NULL CHECK (length(public_key) = 65),
          counter INTEGER NOT NULL CHECK (counter >= 0 AND counter <= 4294967295),
          environment TEXT NOT NULL CHECK (environment = 'production' OR environment = 'development'),
          receipt BLOB NOT NULL,
          attested_at INTEGER NOT NULL
        );
        CREATE INDEX app_attest_keys_user ON app_attest_keys(user_id);
        CREATE TABLE unattested_spends (
          user_id TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          count INTEGER NOT NULL CHECK (count > 0),
          last_reason TEXT NOT NULL,
          last_at INTEGER NOT NULL
        );
        """
}
