import Foundation
import PostgresNIO
import TallyStore

// Named prepared statements of an optimistic action (see `PostgresStore+Actions.swift`); the reads of other
// hot paths are in `PostgresReadStatements.swift`. Each connection parses and plans a statement once, then
// every call is one Bind/Execute round trip.
//
// Every parameter carries an explicit cast: the statements are parsed without parameter types, so the
// server infers them from the SQL, and they must match what PostgresNIO encodes.

/// Reads everything an action plans from, in one statement and without a lock: the user, the wallet with
/// its row's `xmin` (the compare-and-set stamp: any write to the row makes a new row version with a new
/// `xmin`), every quota counter, whether an open hold has expired, the response stored under the
/// idempotency key, and (when asked and the key is unused) a new ledger entry id. No row: no such user.
struct ActionReadStatement: PostgresPreparedStatement {
    static let name = "tally_action_read_v1"
    static let sql = """
        SELECT u.id, u.email, u.timezone, u.language, u.premium_until, u.created_at,
               w.balance, w.held, w.version, w.xmin::text,
               c.quotas, c.used, c.window_ends,
               w.held > 0 AND EXISTS (
                 SELECT 1 FROM holds h WHERE h.user_id = u.id AND h.status = 'open' AND h.expires_at <= $2::BIGINT),
               k.fingerprint, k.status, k.body,
               CASE WHEN $3::BOOLEAN AND k.scope IS NULL THEN nextval('ledger_entries_id_seq') END
        FROM users u JOIN wallets w ON w.user_id = u.id
        LEFT JOIN LATERAL (
          SELECT array_agg(quota) AS quotas, array_agg(used) AS used, array_agg(window_end) AS window_ends
          FROM quota_counters WHERE user_id = u.id
        ) c ON true
        LEFT JOIN idempotency_keys k ON k.scope = $4::TEXT AND k.key = $5::TEXT
        WHERE u.id = $1::TEXT
        """
    typealias Row = PostgresRow

    var userId: String
    var now: Date
    var allocateEntryId: Bool
    var key: IdempotencyKey?

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(userId)
        bindings.append(now.millis)
        bindings.append(allocateEntryId)
        bindings.append(key?.scope)
        bindings.append(key?.key)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// Applies an action's plan in one statement, so atomically and in its own transaction: the wallet moves
/// from the state read only if its row is still that version (`xmin` and `version` unchanged; the update
/// waits for a concurrent writer and then re-checks the newest version), and every other write hangs on
/// that update: the ledger entry, the quota counter, the response under its key. A plan that writes
/// neither an entry nor a counter rewrites the wallet unchanged, which still checks and moves the stamp.
///
/// One row — the wallet's new stamp and, after an entry, the id of the account's next entry — or none
/// when the wallet moved meanwhile. A key stored meanwhile fails the statement (`idempotency_keys_pkey`),
/// which undoes it whole.
struct ActionWriteStatement: PostgresPreparedStatement {
    static let name = "tally_action_write_v1"
    static let sql = """
        WITH moved AS (
          UPDATE wallets SET balance = $4::BIGINT, held = $5::BIGINT, version = $6::BIGINT
          WHERE user_id = $1::TEXT AND version = $2::BIGINT AND xmin::text = $3::TEXT
          RETURNING xmin::text AS stamp
        ), appended AS (
          INSERT INTO ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
          OVERRIDING SYSTEM VALUE
          SELECT $7::BIGINT, $1::TEXT, $8::TEXT, $9::BIGINT, $10::BIGINT, $4::BIGINT, $5::BIGINT, $11::TEXT, $12::BIGINT
          FROM moved WHERE $7::BIGINT IS NOT NULL
        ), counted AS (
          INSERT INTO quota_counters (user_id, quota, used, window_end)
          SELECT $1::TEXT, $13::TEXT, $14::BIGINT, $15::BIGINT FROM moved WHERE $13::TEXT IS NOT NULL
          ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
        ), remembered AS (
          INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
          SELECT $16::TEXT, $17::TEXT, $18::TEXT, $19::BIGINT, $20::BYTEA, $12::BIGINT
          FROM moved WHERE $17::TEXT IS NOT NULL
        )
        SELECT stamp, CASE WHEN $7::BIGINT IS NOT NULL THEN nextval('ledger_entries_id_seq') END FROM moved
        """
    typealias Row = PostgresRow

    /// The account as read (its wallet is what the compare-and-set expects).
    var account: CachedAccount
    var plan: LedgerPlan
    var remembered: Remembered?
    var now: Date

    func makeBindings() throws -> PostgresBindings {
        let wallet = account.wallet
        let entry = plan.entry
        let after = entry.map { wallet.applying($0) } ?? wallet
        let counter = plan.counter
        var bindings = PostgresBindings(capacity: 20)
        bindings.append(account.user.id)
        bindings.append(wallet.version)
        bindings.append(account.stamp)
        bindings.append(after.balance)
        bindings.append(after.held)
        bindings.append(after.version)
        bindings.append(entry == nil ? nil : account.entryId)
        bindings.append(entry?.kind.rawValue)
        bindings.append(entry?.amount)
        bindings.append(entry?.heldChange)
        bindings.append(entry?.reason)
        bindings.append(now.millis)
        bindings.append(counter?.quota)
        bindings.append(counter.map { Int64($0.value.used) })
        bindings.append(counter?.value.windowEnd.millis)
        bindings.append(remembered?.key.scope)
        bindings.append(remembered?.key.key)
        bindings.append(remembered?.key.fingerprint)
        bindings.append(remembered.map { Int64($0.response.status) })
        try bindings.append(remembered.map { Data($0.response.body) })
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

extension PostgresStore {
    /// Runs a prepared statement on its own (committed when it returns) and collects its rows. No retry:
    /// the caller decides what a conflict means.
    ///
    /// Through `withConnection`, never `client.execute`: PostgresNIO 1.33 releases the pool lease of
    /// `client.execute`/`client.query` when the row stream finishes, and a statement that fails before its
    /// rows are consumed (a duplicate key, a serialization failure) never finishes it — each such failure
    /// leaked one pooled connection until none was left (measured: a server stuck with its 20 connections
    /// idle in PostgreSQL and leased in the pool). `withConnection` releases on return or throw.
    func prepared<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [PostgresRow]
    where Statement.Row == PostgresRow {
        try await client.withConnection { connection in
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger) {
                rows.append(row)
            }
            return rows
        }
    }
}
