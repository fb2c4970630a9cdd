import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// Stores the challenge until it expires.
    public func issueAttestationChallenge(hash: String, expiresAt: Date) async throws {
        var statement = BoundStatement()
        let write = Writes.issueAttestationChallenge(hash: statement.bind(hash), expiresAt: statement.bind(expiresAt.millis))
        try await run(write, statement, changing: [.all])
    }

    /// Deletes the challenge in one statement; true when it was there and alive (once, whichever process asks).
    public func consumeAttestationChallenge(hash: String, now: Date) async throws -> Bool {
        var statement = BoundStatement()
        let write = Writes.consumeAttestationChallenge(hash: statement.bind(hash), now: statement.bind(now.millis))
        let deleted = try await run(write, statement, changing: [.all])
        return !deleted.isEmpty
    }

    /// Inserts the key unless its id exists.
    public func saveAttestedKey(_ key: AttestedKeyRecord) async throws -> Bool {
        var statement = BoundStatement()
        let write = Writes.saveAttestedKey(
            keyId: statement.bind(key.keyId), userId: statement.bind(key.userId), installation: statement.bind(key.installation),
            publicKey: statement.bind(ByteBuffer(bytes: key.publicKey)), counter: statement.bind(Int64(key.counter)),
            environment: statement.bind(key.environment), receipt: statement.bind(ByteBuffer(bytes: key.receipt)),
            attestedAt: statement.bind(key.attestedAt.millis))
        let inserted = try await run(write, statement, changing: [.user(key.userId)])
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
        var statement = BoundStatement()
        let write = Writes.advanceAssertionCounter(keyId: statement.bind(keyId), counter: statement.bind(Int64(counter)))
        let raised = try await run(write, statement, changing: [.all])
        return !raised.isEmpty
    }

    /// Counts the spend on the user's flag.
    public func recordUnattestedSpend(userId: String, reason: String, now: Date) async throws {
        var statement = BoundStatement()
        let write = Writes.recordUnattestedSpend(userId: statement.bind(userId), reason: statement.bind(reason), now: statement.bind(now.millis))
        try await run(write, statement, changing: [.user(userId)])
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
        var statement = BoundStatement()
        return try await run(Writes.purgeAttestationChallenges(now: statement.bind(now.millis)), statement, changing: [.all]).count
    }
}
