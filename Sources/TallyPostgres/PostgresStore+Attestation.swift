import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// Stores the challenge until it expires.
    public func issueAttestationChallenge(hash: String, expiresAt: Date) async throws {
        _ = try await rows("INSERT INTO attestation_challenges (challenge_hash, expires_at) VALUES (\(hash), \(expiresAt.millis))")
    }

    /// Deletes the challenge in one statement; true when it was there and alive (once, whichever process asks).
    public func consumeAttestationChallenge(hash: String, now: Date) async throws -> Bool {
        let deleted = try await rows(
            """
            DELETE FROM attestation_challenges WHERE challenge_hash = \(hash) AND expires_at > \(now.millis)
            RETURNING challenge_hash
            """)
        return !deleted.isEmpty
    }

    /// Inserts the key unless its id exists.
    public func saveAttestedKey(_ key: AttestedKeyRecord) async throws -> Bool {
        let inserted = try await rows(
            """
            INSERT INTO app_attest_keys (key_id, user_id, installation, public_key, counter, environment, receipt, attested_at)
            VALUES (\(key.keyId), \(key.userId), \(key.installation), \(Data(key.publicKey)), \(Int64(key.counter)),
                    \(key.environment), \(Data(key.receipt)), \(key.attestedAt.millis))
            ON CONFLICT (key_id) DO NOTHING RETURNING key_id
            """)
        return !inserted.isEmpty
    }

    /// The key with the account its user is merged into, if any.
    public func attestedKey(keyId: String) async throws -> AttestedKeyRecord? {
        let found = try await rows(
            """
            SELECT k.key_id, k.user_id, k.installation, k.public_key, k.counter, k.environment, k.receipt, k.attested_at,
                   coalesce(u.merged_into, k.user_id) AS account_id
            FROM app_attest_keys k JOIN users u ON u.id = k.user_id WHERE k.key_id = \(keyId)
            """)
        guard let row = found.first.map(Columns.init) else { return nil }
        let publicKey: Data = try row["public_key"]
        let counter: Int64 = try row["counter"]
        let receipt: Data = try row["receipt"]
        let attestedAt: Int64 = try row["attested_at"]
        var record = AttestedKeyRecord(
            keyId: try row["key_id"], userId: try row["user_id"], installation: try row["installation"], publicKey: Array(publicKey),
            counter: UInt32(clamping: counter), environment: try row["environment"], receipt: Array(receipt),
            attestedAt: Date(millis: attestedAt))
        record.accountId = try row["account_id"]
        return record
    }

    /// Whether the user or a guest merged into it has a key.
    public func hasAttestedKey(userId: String) async throws -> Bool {
        let found = try await rows(
            """
            SELECT 1 AS found FROM app_attest_keys k JOIN users u ON u.id = k.user_id
            WHERE k.user_id = \(userId) OR u.merged_into = \(userId) LIMIT 1
            """)
        return !found.isEmpty
    }

    /// Raises the counter when below, in one statement: of two processes raising it to the same value, one sees true.
    public func advanceAssertionCounter(keyId: String, to counter: UInt32) async throws -> Bool {
        let raised = try await rows(
            """
            UPDATE app_attest_keys SET counter = \(Int64(counter)) WHERE key_id = \(keyId) AND counter < \(Int64(counter))
            RETURNING key_id
            """)
        return !raised.isEmpty
    }

    /// Counts the spend on the user's flag.
    public func recordUnattestedSpend(userId: String, reason: String, now: Date) async throws {
        _ = try await rows(
            """
            INSERT INTO unattested_spends (user_id, count, last_reason, last_at) VALUES (\(userId), 1, \(reason), \(now.millis))
            ON CONFLICT (user_id) DO UPDATE SET count = unattested_spends.count + 1, last_reason = excluded.last_reason,
              last_at = excluded.last_at
            """)
    }

    /// The user's flag.
    public func unattestedSpends(userId: String) async throws -> UnattestedSpends? {
        let found = try await rows("SELECT count, last_reason, last_at FROM unattested_spends WHERE user_id = \(userId)")
        guard let row = found.first.map(Columns.init) else { return nil }
        let lastAt: Int64 = try row["last_at"]
        return UnattestedSpends(count: try row["count"], lastReason: try row["last_reason"], lastAt: Date(millis: lastAt))
    }

    /// Deletes expired challenges.
    public func purgeAttestationChallenges(now: Date) async throws -> Int {
        try await rows("DELETE FROM attestation_challenges WHERE expires_at <= \(now.millis) RETURNING 1 AS gone").count
    }
}
