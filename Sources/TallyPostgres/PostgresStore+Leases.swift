import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// The response stored under `key`, if any (another fingerprint: `.idempotencyMismatch`).
    public func storedResponse(for key: IdempotencyKey) async throws -> StoredResponse? {
        guard let row = try await rows(
            "SELECT fingerprint, status, body FROM idempotency_keys WHERE scope = \(key.scope) AND key = \(key.key)"
        ).first.map(Columns.init) else { return nil }
        let fingerprint: String = try row["fingerprint"]
        let status: Int64 = try row["status"]
        let body: ByteBuffer = try row["body"]
        return try key.replay(
            StoredResponse(status: Int(status), body: Array(body.readableBytesView)), storedFingerprint: fingerprint)
    }

    /// The responses stored in `scope` under keys beginning with `keyPrefix`, newest first (within the scope's range of
    /// the primary key).
    public func storedResponses(scope: String, keyPrefix: String, limit: Int) async throws -> [StoredResponse] {
        try await rows("""
            SELECT status, body FROM idempotency_keys WHERE scope = \(scope) AND starts_with(key, \(keyPrefix))
            ORDER BY created_at DESC, key DESC LIMIT \(limit)
            """).map { row in
            let row = Columns(row)
            let (status, body): (Int64, ByteBuffer) = (try row["status"], try row["body"])
            return StoredResponse(status: Int(status), body: Array(body.readableBytesView))
        }
    }

    /// Takes the lease unless another holder's runs past `now`: one statement, so two processes cannot both take it.
    public func takeLease(_ name: String, holder: String, until: Date, now: Date) async throws -> Bool {
        var statement = BoundStatement()
        let write = Writes.takeLease(
            name: statement.bind(name), holder: statement.bind(holder), until: statement.bind(until.millis), now: statement.bind(now.millis))
        let taken = try await run(write, statement, changing: [.all])
        return !taken.isEmpty
    }

    /// Ends `holder`'s lease.
    public func releaseLease(_ name: String, holder: String) async throws {
        var statement = BoundStatement()
        try await run(Writes.releaseLease(name: statement.bind(name), holder: statement.bind(holder)), statement, changing: [.all])
    }
}
