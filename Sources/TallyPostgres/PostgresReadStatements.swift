import Foundation
import PostgresNIO
import TallyAPI
import TallyStore

// Named prepared statements of the hottest reads besides the action's own (see
// `PostgresActionStatements.swift`): parsed and planned once per connection.

/// The wallet reads of `GET /v1/wallet` that wait at the same time, as one statement: for each read (by its
/// `position`, from 1), the wallet's balance, held, version, and whether an open hold has expired by that
/// read's own `now`. A user without a wallet has no row.
///
/// The `LIMIT 1` keeps the wallet lookup a subquery run once per read, through the primary key: joined
/// instead, the planner may guess a hundred rows from `unnest` and scan every wallet.
struct WalletBatchReadStatement: PostgresPreparedStatement {
    static let name = "tally_wallet_batch_read_v2"
    static let sql = """
        SELECT r.position, w.balance, w.held, w.version,
               w.held > 0 AND EXISTS (
                 SELECT 1 FROM holds h WHERE h.user_id = r.user_id AND h.status = 'open' AND h.expires_at <= r.now
               ) AS has_expired_holds
        FROM unnest($1::TEXT[], $2::BIGINT[]) WITH ORDINALITY AS r(user_id, now, position),
        LATERAL (SELECT balance, held, version FROM wallets WHERE user_id = r.user_id LIMIT 1) w
        """
    typealias Row = PostgresRow

    var reads: [WalletRead]

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(reads.map(\.userId))
        bindings.append(reads.map(\.now.millis))
        return bindings
    }

    /// Each read's wallet and whether it has an expired hold, by the reads' positions (`nil`: no wallet).
    func results(_ rows: [PostgresRow]) throws -> [WalletReadResult?] {
        try byPosition(rows, count: reads.count) { row in
            WalletReadResult(wallet: try WalletState(row), hasExpiredHolds: try row["has_expired_holds"])
        }
    }
}

/// The change counters of the users whose range queries wait at the same time, as one statement: a user who never
/// wrote a document (or no longer exists) has no row.
struct DocumentVersionBatchReadStatement: PostgresPreparedStatement {
    static let name = "tally_document_version_batch_read_v2"
    static let sql = """
        SELECT r.position, s.version
        FROM unnest($1::TEXT[]) WITH ORDINALITY AS r(user_id, position),
        LATERAL (SELECT version FROM sync_state WHERE user_id = r.user_id LIMIT 1) s
        """
    typealias Row = PostgresRow

    var userIds: [String]

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(userIds)
        return bindings
    }

    /// Each user's counter, by position (`nil`: no sync state).
    func results(_ rows: [PostgresRow]) throws -> [Int64?] {
        try byPosition(rows, count: userIds.count) { row in try row["version"] }
    }
}

/// One wallet read waiting to be sent (``WalletBatchReadStatement``).
struct WalletRead: Sendable {
    var userId: String
    var now: Date
}

/// What one wallet read found.
struct WalletReadResult: Sendable {
    var wallet: WalletState
    /// An open hold has expired: the wallet must be read again after releasing it.
    var hasExpiredHolds: Bool
}

/// The session check behind every authenticated request (every 5 s per token): the user of a live session.
struct SessionUserStatement: PostgresPreparedStatement {
    static let name = "tally_session_user_v1"
    static let sql = "SELECT user_id FROM sessions WHERE id = $1::TEXT AND revoked_at IS NULL"
    typealias Row = PostgresRow

    var sessionId: String

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(sessionId)
        return bindings
    }
}

/// The account reads that wait at the same time, as one statement (like ``WalletBatchReadStatement``):
/// everything an optimistic command plans from, without a lock — the user, the wallet with its row's `xmin`
/// (the compare-and-set stamp: any write to the row makes a new row version with a new `xmin`), every
/// quota counter, a guest's installation with its counters (one more index probe, none for a linked
/// account), whether an open hold has expired by the read's `now`, the response stored under the
/// idempotency key, (when asked and the key is unused) a new ledger entry id, and the named hold of the
/// account. A read of a user that does not exist has no row. `GET /v1/quotas` reads the same way, without
/// key, entry id or hold.
///
/// The hold needs no lock either: every change to a hold moves `held`, so its wallet row, and the write's
/// compare-and-set on that row covers the hold as read. Absent keys and holds travel as empty strings,
/// which no key or hold id is. Each lookup is a `LIMIT 1` lateral subquery, so that the plan stays one
/// index probe per read whatever the planner guesses of `unnest`.
struct AccountBatchReadStatement: PostgresPreparedStatement {
    static let name = "tally_account_batch_read_v6"
    static let sql = """
        SELECT r.position, a.id, a.email, a.timezone, a.language, a.premium_until, a.created_at, a.email_verified_at, a.purchased_premium_until,
               a.apple_linked, a.merged_into,
               a.balance, a.held, a.version, a.stamp,
               c.quotas, c.used, c.window_ends,
               a.installation, i.installation_quotas, i.installation_used, i.installation_window_ends,
               a.held > 0 AND EXISTS (
                 SELECT 1 FROM holds x WHERE x.user_id = a.id AND x.status = 'open' AND x.expires_at <= r.now
               ) AS has_expired_holds,
               k.fingerprint, k.status, k.body,
               CASE WHEN r.allocate AND k.fingerprint IS NULL THEN nextval('ledger_entries_id_seq') END AS entry_id,
               \(HoldRecord.columns(of: "h"))
        FROM unnest($1::TEXT[], $2::BIGINT[], $3::BOOLEAN[], $4::TEXT[], $5::TEXT[], $6::TEXT[])
             WITH ORDINALITY AS r(user_id, now, allocate, scope, key, hold_id, position)
        CROSS JOIN LATERAL (
          SELECT \(UserRecord.columns(of: "u")),
                 w.balance, w.held, w.version, w.xmin::text AS stamp, u.installation
          FROM users u JOIN wallets w ON w.user_id = u.id WHERE u.id = r.user_id LIMIT 1
        ) a
        \(counterJoins(user: "a"))
        LEFT JOIN LATERAL (
          SELECT fingerprint, status, body FROM idempotency_keys WHERE scope = r.scope AND key = r.key LIMIT 1
        ) k ON true
        LEFT JOIN LATERAL (
          SELECT id, user_id, amount, status, captured_amount, created_at, expires_at
          FROM holds WHERE id = r.hold_id AND user_id = a.id LIMIT 1
        ) h ON true
        """
    typealias Row = PostgresRow

    var reads: [AccountRead]

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 6)
        bindings.append(reads.map(\.userId))
        bindings.append(reads.map(\.now.millis))
        bindings.append(reads.map(\.allocateEntryId))
        bindings.append(reads.map { $0.key?.scope ?? "" })
        bindings.append(reads.map { $0.key?.key ?? "" })
        bindings.append(reads.map { $0.holdId ?? "" })
        return bindings
    }

    /// What each read found, by the reads' positions (`nil`: no such user).
    func results(_ rows: [PostgresRow]) throws -> [AccountReadResult?] {
        try byPosition(rows, count: reads.count) { row in try AccountReadResult(row) }
    }
}

/// One account read waiting to be sent (``AccountBatchReadStatement``).
struct AccountRead: Sendable {
    var userId: String
    var now: Date
    /// Take a ledger entry id for the command's entry (unless the key was used already).
    var allocateEntryId: Bool
    var key: IdempotencyKey?
    var holdId: String?
}

/// What one account read found.
struct AccountReadResult: Sendable {
    /// The account as read (its `entryId` taken when asked and the key unused).
    var account: CachedAccount
    /// An open hold has expired: it must be released before the account is planned from.
    var hasExpiredHolds: Bool
    /// The response stored under the key, with the request's fingerprint.
    var stored: (fingerprint: String, response: StoredResponse)?
    /// The named hold, when it is the account's.
    var hold: HoldRecord?

    /// The columns of ``AccountBatchReadStatement``.
    init(_ row: Columns) throws {
        // In the statement's order (``Columns`` finds the next column first).
        let (user, wallet, stamp) = (try UserRecord(row), try WalletState(row), try row["stamp"] as String)
        let (counters, installation) = (try readCounters(row), try readInstallation(row))
        hasExpiredHolds = try row["has_expired_holds"]
        let fingerprint: String? = try row["fingerprint"]
        let status: Int64? = try row["status"]
        let body: Data? = try row["body"]
        let entryId: Int64? = try row["entry_id"]
        hold = try HoldRecord.read(row)
        account = CachedAccount(
            state: AccountState(user: user, wallet: wallet, counters: counters, installation: installation), stamp: stamp, entryId: entryId)
        if let fingerprint, let status, let body {
            stored = (fingerprint, StoredResponse(status: Int(status), body: [UInt8](body)))
        }
    }
}

/// The rows of a batched read, each with its read's `position` (from 1), decoded: one answer per read, `nil`
/// where no row came back.
func byPosition<Result>(
    _ rows: [PostgresRow], count: Int, decode: (Columns) throws -> Result
) throws -> [Result?] {
    var results = [Result?](repeating: nil, count: count)
    for row in rows.map(Columns.init) {
        let position = Int(try row["position"] as Int64) - 1
        guard results.indices.contains(position) else { throw PostgresFailure(kind: "batched read out of range") }
        results[position] = try decode(row)
    }
    return results
}
