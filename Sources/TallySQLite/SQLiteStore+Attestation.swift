import Foundation
import GRDB
import TallyStore

extension SQLiteStore: AttestationStore {
    /// Stores the challenge until it expires.
    public func issueAttestationChallenge(hash: String, expiresAt: Date) async throws {
        try await write { db in
            try db.run(SQLiteWrites.issueChallenge, changing: .all,
                arguments: [hash, expiresAt.millis])
        }
    }

    /// Deletes the challenge; true when it was there and alive.
    public func consumeAttestationChallenge(hash: String, now: Date) async throws -> Bool {
        try await write { db in
            try db.run(SQLiteWrites.consumeChallenge, changing: .all, arguments: [hash, now.millis])
            return db.changesCount == 1
        }
    }

    /// Inserts the key unless its id exists.
    public func saveAttestedKey(_ key: AttestedKeyRecord) async throws -> Bool {
        try await write { db in
            try db.run(SQLiteWrites.saveAttestedKey, changing: .user(key.userId),
                arguments: [
                    key.keyId, key.userId, key.installation, Data(key.publicKey), Int64(key.counter), key.environment,
                    Data(key.receipt), key.attestedAt.millis,
                ])
            return db.changesCount == 1
        }
    }

    /// The key with the account its user is merged into, if any.
    public func attestedKey(keyId: String) async throws -> AttestedKeyRecord? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT k.*, coalesce(u.merged_into, k.user_id) AS account_id FROM app_attest_keys k
                    JOIN users u ON u.id = k.user_id WHERE k.key_id = ?
                    """,
                arguments: [keyId]
            ).map { row in
                var record = AttestedKeyRecord(
                    keyId: row["key_id"], userId: row["user_id"], installation: row["installation"],
                    publicKey: Array(row["public_key"] as Data), counter: UInt32(clamping: row["counter"] as Int64),
                    environment: row["environment"], receipt: Array(row["receipt"] as Data), attestedAt: Date(millis: row["attested_at"]))
                record.accountId = row["account_id"]
                return record
            }
        }
    }

    /// Whether the user or a guest merged into it has a key.
    public func hasAttestedKey(userId: String) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM app_attest_keys k JOIN users u ON u.id = k.user_id
                                   WHERE k.user_id = ? OR u.merged_into = ?)
                    """,
                arguments: [userId, userId]) ?? false
        }
    }

    /// Raises the counter when below: one statement on the single writer.
    public func advanceAssertionCounter(keyId: String, to counter: UInt32) async throws -> Bool {
        try await write { db in
            try db.run(SQLiteWrites.advanceAssertionCounter, changing: .all,
                arguments: [Int64(counter), keyId, Int64(counter)])
            return db.changesCount == 1
        }
    }

    /// Counts the spend on the user's flag.
    public func recordUnattestedSpend(userId: String, reason: String, now: Date) async throws {
        try await write { db in
            try db.run(SQLiteWrites.countUnattestedSpend, changing: .user(userId),
                arguments: [userId, reason, now.millis])
        }
    }

    /// The user's flag.
    public func unattestedSpends(userId: String) async throws -> UnattestedSpends? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM unattested_spends WHERE user_id = ?", arguments: [userId]).map {
                UnattestedSpends(count: $0["count"], lastReason: $0["last_reason"], lastAt: Date(millis: $0["last_at"]))
            }
        }
    }

    /// Deletes expired challenges.
    public func purgeAttestationChallenges(now: Date) async throws -> Int {
        try await write { db in
            try db.run(SQLiteWrites.purgeChallenges, changing: .all, arguments: [now.millis])
            return db.changesCount
        }
    }
}
