import Foundation
import GRDB
import TallyStore

extension SQLiteStore: LeaseStore {
    /// The response stored under `key`, if any (another fingerprint: `.idempotencyMismatch`).
    public func storedResponse(for key: IdempotencyKey) async throws -> StoredResponse? {
        let stored = try await read { db -> (fingerprint: String, response: StoredResponse)? in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT fingerprint, status, body FROM idempotency_keys WHERE scope = ? AND key = ?",
                arguments: [key.scope, key.key])
            else { return nil }
            let body: Data = row["body"]
            return (row["fingerprint"], StoredResponse(status: row["status"], body: Array(body)))
        }
        guard let stored else { return nil }
        return try key.replay(stored.response, storedFingerprint: stored.fingerprint)
    }

    /// The responses stored in `scope` under keys beginning with `keyPrefix`, newest first (within the scope's range
    /// of the primary key).
    public func storedResponses(scope: String, keyPrefix: String, limit: Int) async throws -> [StoredResponse] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT status, body FROM idempotency_keys WHERE scope = ? AND substr(key, 1, length(?)) = ?
                    ORDER BY created_at DESC, key DESC LIMIT ?
                    """,
                arguments: [scope, keyPrefix, keyPrefix, limit]
            ).map { row in
                let body: Data = row["body"]
                return StoredResponse(status: row["status"], body: Array(body))
            }
        }
    }

    /// Takes the lease unless another holder's runs past `now`.
    public func takeLease(_ name: String, holder: String, until: Date, now: Date) async throws -> Bool {
        try await write { db in
            try db.run(
                SQLiteWrites.takeLease, changing: .all,
                arguments: [name, holder, until.millis, now.millis])
            return db.changesCount > 0
        }
    }

    /// Ends `holder`'s lease.
    public func releaseLease(_ name: String, holder: String) async throws {
        try await write { db in
            try db.run(SQLiteWrites.releaseLease, changing: .all, arguments: [name, holder])
        }
    }
}
