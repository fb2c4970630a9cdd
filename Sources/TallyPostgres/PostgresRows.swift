import Foundation
import Logging
import PostgresNIO
import TallyStore

/// A row read by column name: the names its statement gives (`AS` where two tables share a name), so a column
/// added or moved in a statement cannot shift what the others decode to.
///
/// A search that walks the row's cells on from the column read last (and starts over from the first when the
/// name is behind it): the decoders read in the statement's order, so a read costs about what reading by
/// position does — no per-row table, no hashing. A name the row does not have throws ``PostgresFailure`` (the
/// random-access subscript of PostgresNIO's `PostgresRandomAccessRow` traps, and building one copies the row's
/// cells into a new table: ~0.5 µs a row before any read).
///
/// Measured with -O on the 30 columns of an account read: walking the cells by position takes 2.0 µs (1.8 µs of
/// it PostgresNIO making the cells), this walk 2.3 µs; with the cursor's exclusivity checked at run time, as
/// for any class property, 3.0 µs. One `Columns` is read by one caller at a time, which never re-enters it.
final class Columns {
    private let row: PostgresRow
    @exclusivity(unchecked) private var cursor: PostgresRow.Iterator

    init(_ row: PostgresRow) {
        self.row = row
        cursor = row.makeIterator()
    }

    /// The column `name`, decoded as the type the caller names (`Optional` for a column that may be NULL).
    subscript<Value: PostgresDecodable>(_ name: String) -> Value {
        get throws {
            for pass in 0..<2 {
                if pass == 1 { cursor = row.makeIterator() }
                while let cell = cursor.next() {
                    if cell.columnName == name { return try cell.decode(Value.self) }
                }
            }
            throw PostgresFailure(kind: "no column \(name)")
        }
    }
}

extension PostgresStore {
    /// The one row a statement that must answer one returns (a count, a `RETURNING` of one row).
    static func single(_ rows: [PostgresRow], _ statement: String) throws -> Columns {
        guard let row = rows.first else { throw PostgresFailure(kind: "no row from \(statement)") }
        return Columns(row)
    }
}

/// Decoding of rows into the store's records, each from the columns its comment names.
extension UserRecord {
    /// ``columns(of:)``: `id, email, timezone, language, premium_until, created_at, email_verified_at,
    /// purchased_premium_until, apple_linked, merged_into`.
    init(_ row: Columns) throws {
        self.init(
            id: try row["id"], email: try row["email"], timezone: try row["timezone"], language: try row["language"],
            premiumUntil: (try row["premium_until"] as Int64?).map(Date.init(millis:)), createdAt: Date(millis: try row["created_at"]),
            emailVerifiedAt: (try row["email_verified_at"] as Int64?).map(Date.init(millis:)),
            purchasedPremiumUntil: (try row["purchased_premium_until"] as Int64?).map(Date.init(millis:)),
            hasAppleIdentity: try row["apple_linked"], mergedInto: try row["merged_into"])
    }

    /// The columns ``init(_:)`` reads, selected from the `users` row `alias` (unqualified without one); `apple_linked`
    /// says whether `apple_sub` is set, so the `sub` itself is read only where it is needed.
    static func columns(of alias: String? = nil) -> String {
        let p = alias.map { $0 + "." } ?? ""
        return "\(p)id, \(p)email, \(p)timezone, \(p)language, \(p)premium_until, \(p)created_at, \(p)email_verified_at, "
            + "\(p)purchased_premium_until, \(p)apple_sub IS NOT NULL AS apple_linked, \(p)merged_into"
    }

    /// The names of ``columns(of:)``, to select them again from a relation that selected them.
    static let columnNames =
        "id, email, timezone, language, premium_until, created_at, email_verified_at, purchased_premium_until, apple_linked, merged_into"
}

extension WalletState {
    /// `balance, held, version` of `wallets`.
    init(_ row: Columns) throws {
        self.init(balance: try row["balance"], held: try row["held"], version: try row["version"])
    }
}

extension HoldRecord {
    /// `hold_id, hold_user_id, hold_amount, hold_status, hold_captured_amount, hold_created_at, hold_expires_at`
    /// (the columns of `holds`, named apart from the account's); `nil` when `hold_id` is NULL (no such hold).
    static func read(_ row: Columns) throws -> HoldRecord? {
        // In the columns' order (``Columns`` finds the next one first).
        let id: String? = try row["hold_id"], userId: String? = try row["hold_user_id"], amount: Int64? = try row["hold_amount"]
        let status: String? = try row["hold_status"], captured: Int64? = try row["hold_captured_amount"]
        let createdAt: Int64? = try row["hold_created_at"], expiresAt: Int64? = try row["hold_expires_at"]
        guard let id, let userId, let amount, let status, let createdAt, let expiresAt else { return nil }
        return HoldRecord(
            id: id, userId: userId, amount: amount, status: HoldStatus(rawValue: status) ?? .open, capturedAmount: captured,
            createdAt: Date(millis: createdAt), expiresAt: Date(millis: expiresAt))
    }

    /// The columns ``read(_:)`` reads, from the `holds` row `alias`.
    static func columns(of alias: String) -> String {
        """
        \(alias).id AS hold_id, \(alias).user_id AS hold_user_id, \(alias).amount AS hold_amount, \(alias).status AS hold_status,
        \(alias).captured_amount AS hold_captured_amount, \(alias).created_at AS hold_created_at, \(alias).expires_at AS hold_expires_at
        """
    }
}

extension LedgerEntryRecord {
    /// `id, kind, amount, held_change, balance_after, reason, created_at, reference` of `ledger_entries`.
    init(_ row: Columns) throws {
        let kind: String = try row["kind"]
        self.init(
            id: try row["id"], kind: EntryKind(rawValue: kind) ?? .grant, amount: try row["amount"], heldChange: try row["held_change"],
            balanceAfter: try row["balance_after"], reason: try row["reason"], createdAt: Date(millis: try row["created_at"]),
            reference: try row["reference"])
    }
}

extension DocumentRecord {
    /// The columns of `documents` a record has, as the statements select them.
    static let columns = "collection, id, data, range_value, version, updated_at, deleted"

    /// ``columns`` (`data` '' on a tombstone).
    init(_ row: Columns) throws {
        let data: ByteBuffer = try row["data"]
        self.init(
            collection: try row["collection"], id: try row["id"], data: Array(data.readableBytesView), rangeValue: try row["range_value"],
            version: try row["version"], updatedAt: Date(millis: try row["updated_at"]), deleted: try row["deleted"])
    }
}

/// Quota counters aggregated as three parallel arrays (aggregated in one pass, so in the same order), each
/// NULL when there is none: `quotas, used, window_ends`, or with `prefix` (`installation_quotas`, …).
func readCounters(_ row: Columns, prefix: String = "") throws -> [String: QuotaCounter] {
    let quotas: [String]? = try row[prefix + "quotas"]
    let used: [Int64]? = try row[prefix + "used"]
    let windowEnds: [Int64]? = try row[prefix + "window_ends"]
    guard let quotas, let used, let windowEnds, quotas.count == used.count, quotas.count == windowEnds.count else {
        return [:]
    }
    var counters: [String: QuotaCounter] = [:]
    for index in quotas.indices {
        counters[quotas[index]] = QuotaCounter(used: Int(used[index]), windowEnd: Date(millis: windowEnds[index]))
    }
    return counters
}

/// A guest's installation: `installation` (NULL for a linked account), with its counters as ``readCounters(_:prefix:)``
/// reads them under the prefix `installation_`.
func readInstallation(_ row: Columns) throws -> InstallationCounters? {
    guard let id: String = try row["installation"] else { return nil }
    return InstallationCounters(id: id, counters: try readCounters(row, prefix: "installation_"))
}

/// The counters of the `users` row `alias` (`c`) and of its installation (`i`), aggregated for
/// ``readCounters(_:prefix:)`` and ``readInstallation(_:)``, as lateral subqueries.
func counterJoins(user alias: String) -> String {
    """
    LEFT JOIN LATERAL (
      SELECT array_agg(quota) AS quotas, array_agg(used) AS used, array_agg(window_end) AS window_ends
      FROM quota_counters WHERE user_id = \(alias).id
    ) c ON true
    LEFT JOIN LATERAL (
      SELECT array_agg(quota) AS installation_quotas, array_agg(used) AS installation_used,
             array_agg(window_end) AS installation_window_ends
      FROM installation_quota_counters WHERE installation = \(alias).installation
    ) i ON true
    """
}
