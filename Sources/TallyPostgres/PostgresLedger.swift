import Foundation
import PostgresNIO
import TallyStore

// The ledger's one place on PostgreSQL. Every statement that moves a wallet and appends ledger entries composes
// ``Writes/append(from:carrying:)`` over rows built by ``LedgerRows`` (the only code that computes an entry's
// `balance_after`/`held_after`: `WalletState.applying`, the planner's own rule), and every statement that stores
// a response under its idempotency key composes ``Writes/remember(from:)`` over ``KeyRows``: the
// compare-and-set batch (`ActionBatchWriteStatement`, which the locking path runs too), a profile change,
// a response stored alone, a guest's sign-up grant and the release of expired holds. The fragments are SQL
// text over a relation; every value reaches it as a bound array parameter (``Unnest``).

/// Rows sent as one array per column and unnested into a relation: how every statement here carries values for
/// several rows as bound parameters (PostgresNIO's arrays carry no NULLs, so an absent value travels as a
/// sentinel the statement reads as absent).
protocol ColumnArrays {
    /// Each column in order: its name, the SQL type of its elements and its values.
    func forEachColumn(_ body: (_ name: String, _ type: String, _ values: any PostgresDynamicTypeEncodable) -> Void)
}

/// The relations of ``ColumnArrays``, and their parameters.
enum Unnest {
    /// `SELECT * FROM unnest($first::TYPE[], …) AS alias(name, …)`: the rows of `sets` side by side (all of the
    /// same length), their parameters numbered from `first` in the order ``bind(_:into:)`` appends them.
    static func relation(_ sets: [any ColumnArrays], as alias: String, from first: Int = 1) -> String {
        var parameters: [String] = []
        var names: [String] = []
        for set in sets {
            set.forEachColumn { name, type, _ in
                parameters.append("$\(first + parameters.count)::\(type)[]")
                names.append(name)
            }
        }
        return "SELECT * FROM unnest(\(parameters.joined(separator: ", "))) AS \(alias)(\(names.joined(separator: ", ")))"
    }

    /// Appends the arrays of `sets` to `bindings`, in the order of ``relation(_:as:from:)``.
    static func bind(_ sets: [any ColumnArrays], into bindings: inout PostgresBindings) {
        for set in sets { set.forEachColumn { _, _, values in bindings.append(values) } }
    }
}

/// A statement built from ``Unnest`` relations and single values, each a bound parameter numbered as it is added.
struct BoundStatement {
    private(set) var bindings = PostgresBindings()

    /// The relation `alias` of `sets` (``Unnest/relation(_:as:from:)``), its arrays bound.
    mutating func relation(_ sets: [any ColumnArrays], as alias: String) -> String {
        let sql = Unnest.relation(sets, as: alias, from: bindings.count + 1)
        Unnest.bind(sets, into: &bindings)
        return sql
    }

    /// A placeholder for `value` (NULL when `nil`).
    mutating func value<Value: PostgresDynamicTypeEncodable>(_ value: Value?) -> String {
        bindings.append(value)
        return "$\(bindings.count)"
    }

    /// The statement `sql`, with the values bound so far. Bind every value before: a placeholder added while `sql`
    /// is built in the call's own argument comes after this statement's bindings were read, and is left unbound.
    func query(_ sql: String) -> PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: bindings) }
}

/// The SQL fragments of the ledger, declared with the tables they change (see ``Writes``): two common table
/// expressions (and a third for keys) that a statement's `WITH` lists after its source relation, and names among its
/// fragments.
extension Writes {
    /// `moved` and `appended`: moves each wallet of `source` (``LedgerRows``' columns) to its row marked `moves`,
    /// only from the version it was read at (`version`; and, for a compare-and-set, the row's `xmin` as `stamp`),
    /// and appends the entries of every wallet that moved (rows whose `kind` is not ''), with their after-values,
    /// in their order. `moved` returns the wallet's `user_id` and new `stamp`, and the `carrying` columns of its
    /// source row, for the statement's other writes to hang on: a wallet that did not move writes nothing else.
    static func append(from source: String, carrying: [String] = []) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .wallets, .ledgerEntries,
                sql: """
                    moved AS (
                      UPDATE wallets w SET balance = s.balance, held = s.held, version = s.new_version
                      FROM \(source) s
                      WHERE s.moves AND w.user_id = s.user_id AND w.version = s.version AND (s.stamp = '' OR w.xmin::text = s.stamp)
                      RETURNING w.user_id, w.xmin::text AS stamp\(carrying.map { ", s.\($0)" }.joined())
                    ), appended AS (
                      INSERT INTO ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
                      OVERRIDING SYSTEM VALUE
                      SELECT CASE WHEN e.entry_id <> 0 THEN e.entry_id ELSE nextval('ledger_entries_id_seq') END, e.user_id, e.kind, e.amount,
                             e.held_change, e.balance, e.held, CASE WHEN e.has_reason THEN e.reason END, e.created_at,
                             CASE WHEN e.reference <> '' THEN e.reference END
                      FROM \(source) e
                      WHERE e.kind <> '' AND e.user_id IN (SELECT user_id FROM moved)
                      ORDER BY e.user_id, e.new_version
                    )
                    """))
    }

    /// `remembered`: stores each response of `source` (``KeyRows``' columns and `created_at`) whose `key` is not ''.
    /// A key stored meanwhile fails the statement (`idempotency_keys_pkey`), which undoes it whole; the store
    /// runs the command again, and its read finds the response.
    static func remember(from source: String) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .idempotencyKeys,
                sql: """
                    remembered AS (
                      INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
                      SELECT r.scope, r.key, r.fingerprint, r.status, r.body, r.created_at FROM \(source) r WHERE r.key <> ''
                      RETURNING 1
                    )
                    """))
    }
}

/// The wallet moves and ledger entries of one statement, as ``Writes/append(from:carrying:)`` reads them: one
/// row per entry (a move without an entry: one row of kind ''), each with the wallet after it; the last row of a
/// wallet `moves` it, from the version it was read at.
struct LedgerRows: ColumnArrays {
    private var userId: [String] = [], version: [Int64] = [], stamp: [String] = [], balance: [Int64] = [], held: [Int64] = []
    private var newVersion: [Int64] = [], moves: [Bool] = [], entryId: [Int64] = [], kind: [String] = [], amount: [Int64] = []
    private var heldChange: [Int64] = [], reason: [String] = [], hasReason: [Bool] = [], createdAt: [Int64] = []
    private var reference: [String] = []

    /// The rows so far.
    var count: Int { userId.count }

    /// Moves the wallet of `userId`, read as `wallet` (with its row's `stamp` for a compare-and-set, else `nil`:
    /// the caller holds the row's lock), by `entries` in order, each appended with its id (`nil`: the next of the
    /// sequence) and stamped `now`; without entries the row is rewritten unchanged (which still moves its `xmin`).
    /// Returns the wallet after them. One call per wallet and statement.
    @discardableResult
    mutating func move(
        userId: String, from wallet: WalletState, stamp: String? = nil, entries: [(id: Int64?, entry: PlannedEntry)] = [], now: Date
    ) -> WalletState {
        var after = wallet
        for (index, (id, entry)) in entries.enumerated() {
            after = after.applying(entry)
            row(userId, wallet, stamp, after, moves: index == entries.count - 1, id: id, entry: entry, now: now)
        }
        if entries.isEmpty { row(userId, wallet, stamp, after, moves: true, id: nil, entry: nil, now: now) }
        return after
    }

    private mutating func row(
        _ user: String, _ wallet: WalletState, _ rowStamp: String?, _ after: WalletState, moves: Bool, id: Int64?, entry: PlannedEntry?,
        now: Date
    ) {
        userId.append(user)
        version.append(wallet.version)
        stamp.append(rowStamp ?? "")
        balance.append(after.balance)
        held.append(after.held)
        newVersion.append(after.version)
        self.moves.append(moves)
        entryId.append(id ?? 0)
        kind.append(entry?.kind.rawValue ?? "")
        amount.append(entry?.amount ?? 0)
        heldChange.append(entry?.heldChange ?? 0)
        reason.append(entry?.reason ?? "")
        hasReason.append(entry?.reason != nil)
        createdAt.append(now.millis)
        reference.append(entry?.reference ?? "")
    }

    func forEachColumn(_ body: (String, String, any PostgresDynamicTypeEncodable) -> Void) {
        body("user_id", "TEXT", userId)
        body("version", "BIGINT", version)
        body("stamp", "TEXT", stamp)
        body("balance", "BIGINT", balance)
        body("held", "BIGINT", held)
        body("new_version", "BIGINT", newVersion)
        body("moves", "BOOLEAN", moves)
        body("entry_id", "BIGINT", entryId)
        body("kind", "TEXT", kind)
        body("amount", "BIGINT", amount)
        body("held_change", "BIGINT", heldChange)
        body("reason", "TEXT", reason)
        body("has_reason", "BOOLEAN", hasReason)
        body("created_at", "BIGINT", createdAt)
        body("reference", "TEXT", reference)
    }
}

/// Responses to store under their idempotency keys, as ``Writes/remember(from:)`` reads them (beside a
/// `created_at` column): one row per command, key '' for a command without one.
struct KeyRows: ColumnArrays {
    private var scope: [String] = [], key: [String] = [], fingerprint: [String] = [], status: [Int64] = [], body: [ByteBuffer] = []

    /// Adds the response of one command (`nil`: it has no key).
    mutating func append(_ remembered: Remembered?) {
        scope.append(remembered?.key.scope ?? "")
        key.append(remembered?.key.key ?? "")
        fingerprint.append(remembered?.key.fingerprint ?? "")
        status.append(Int64(remembered?.response.status ?? 0))
        body.append(ByteBuffer(bytes: remembered?.response.body ?? []))
    }

    func forEachColumn(_ body: (String, String, any PostgresDynamicTypeEncodable) -> Void) {
        body("scope", "TEXT", scope)
        body("key", "TEXT", key)
        body("fingerprint", "TEXT", fingerprint)
        body("status", "BIGINT", status)
        body("body", "BYTEA", self.body)
    }
}

/// One `created_at` column, for a relation of ``KeyRows`` alone.
struct MomentRows: ColumnArrays {
    var createdAt: [Int64] = []

    func forEachColumn(_ body: (String, String, any PostgresDynamicTypeEncodable) -> Void) {
        body("created_at", "BIGINT", createdAt)
    }
}
