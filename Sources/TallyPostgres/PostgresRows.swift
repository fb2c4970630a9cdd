import Foundation
import Logging
import PostgresNIO
import TallyStore

/// Reads a row's cells in column order, each into the type the caller names.
struct Cells {
    private var iterator: PostgresRow.Iterator

    init(_ row: PostgresRow) { iterator = row.makeIterator() }

    mutating func next<Value: PostgresDecodable>(_: Value.Type = Value.self) throws -> Value {
        guard let cell = iterator.next() else { throw PostgresFailure(kind: "missing column") }
        return try cell.decode(Value.self)
    }
}

/// Decoding of rows into the store's records. Each reads the columns in the order its comment gives.
extension UserRecord {
    /// `id, email, timezone, language, premium_until, created_at`
    init(_ cells: inout Cells) throws {
        let id: String = try cells.next()
        let email: String? = try cells.next()
        let timezone: String = try cells.next()
        let language: String? = try cells.next()
        let premiumUntil: Int64? = try cells.next()
        let createdAt: Int64 = try cells.next()
        self.init(
            id: id, email: email, timezone: timezone, language: language, premiumUntil: premiumUntil.map(Date.init(millis:)),
            createdAt: Date(millis: createdAt))
    }
}

extension WalletState {
    /// `balance, held, version`
    init(_ cells: inout Cells) throws {
        let balance: Int64 = try cells.next()
        let held: Int64 = try cells.next()
        let version: Int64 = try cells.next()
        self.init(balance: balance, held: held, version: version)
    }
}

extension HoldRecord {
    /// `id, user_id, amount, status, captured_amount, created_at, expires_at`; `nil` when `id` is NULL.
    static func read(_ cells: inout Cells) throws -> HoldRecord? {
        let id: String? = try cells.next()
        let userId: String? = try cells.next()
        let amount: Int64? = try cells.next()
        let status: String? = try cells.next()
        let capturedAmount: Int64? = try cells.next()
        let createdAt: Int64? = try cells.next()
        let expiresAt: Int64? = try cells.next()
        guard let id, let userId, let amount, let status, let createdAt, let expiresAt else { return nil }
        return HoldRecord(
            id: id, userId: userId, amount: amount, status: HoldStatus(rawValue: status) ?? .open,
            capturedAmount: capturedAmount, createdAt: Date(millis: createdAt), expiresAt: Date(millis: expiresAt))
    }
}

extension LedgerEntryRecord {
    /// `id, kind, amount, held_change, balance_after, reason, created_at`
    init(_ cells: inout Cells) throws {
        let id: Int64 = try cells.next()
        let kind: String = try cells.next()
        let amount: Int64 = try cells.next()
        let heldChange: Int64 = try cells.next()
        let balanceAfter: Int64 = try cells.next()
        let reason: String? = try cells.next()
        let createdAt: Int64 = try cells.next()
        self.init(
            id: id, kind: EntryKind(rawValue: kind) ?? .grant, amount: amount, heldChange: heldChange,
            balanceAfter: balanceAfter, reason: reason, createdAt: Date(millis: createdAt))
    }
}

extension DocumentRecord {
    /// `collection, id, data, range_value, version, updated_at, deleted` (`data` '' on a tombstone).
    init(_ cells: inout Cells) throws {
        let collection: String = try cells.next()
        let id: String = try cells.next()
        let data: ByteBuffer = try cells.next()
        let rangeValue: String? = try cells.next()
        let version: Int64 = try cells.next()
        let updatedAt: Int64 = try cells.next()
        let deleted: Bool = try cells.next()
        self.init(
            collection: collection, id: id, data: Array(data.readableBytesView), rangeValue: rangeValue, version: version,
            updatedAt: Date(millis: updatedAt), deleted: deleted)
    }
}

/// Quota counters aggregated as three parallel arrays (aggregated in one pass, so in the same order):
/// `quotas, used, window_ends` (NULL when none).
func readCounters(_ cells: inout Cells) throws -> [String: QuotaCounter] {
    let quotas: [String]? = try cells.next()
    let used: [Int64]? = try cells.next()
    let windowEnds: [Int64]? = try cells.next()
    guard let quotas, let used, let windowEnds, quotas.count == used.count, quotas.count == windowEnds.count else {
        return [:]
    }
    var counters: [String: QuotaCounter] = [:]
    for index in quotas.indices {
        counters[quotas[index]] = QuotaCounter(used: Int(used[index]), windowEnd: Date(millis: windowEnds[index]))
    }
    return counters
}

/// A guest's installation: `installation` (NULL for a linked account), then its counters as ``readCounters(_:)`` reads them.
func readInstallation(_ cells: inout Cells) throws -> InstallationCounters? {
    let id: String? = try cells.next()
    let counters = try readCounters(&cells)
    return id.map { InstallationCounters(id: $0, counters: counters) }
}
