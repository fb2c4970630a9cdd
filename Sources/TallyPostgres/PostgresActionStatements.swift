import Foundation
import PostgresNIO
import TallyAPI
import TallyStore

// Named prepared statements of an optimistic action (see `PostgresStore+CompareAndSet.swift`); the reads of other
// hot paths are in `PostgresReadStatements.swift`. The batch write's text is declared in ``Writes``
// (``Writes/actionBatch(source:carried:holds:installations:holdCheck:)``). Each connection parses and plans a statement once, then
// every call is one Bind/Execute round trip.
//
// Every parameter carries an explicit cast: the statements are parsed without parameter types, so the
// server infers them from the SQL, and they must match what PostgresNIO encodes.

/// One optimistic action's write: the account as read (its wallet is what the compare-and-set expects),
/// the plan, the response to keep under the key, and the moment it happens.
struct ActionWrite: Sendable {
    var account: CachedAccount
    /// The hold the plan settles, as read.
    var hold: HoldRecord?
    var plan: LedgerPlan
    var remembered: Remembered?
    var now: Date
}

/// What a write that went through left: the wallet row's new stamp and, after an entry, an id for the
/// account's next entry.
struct ActionWritten: Sendable {
    var stamp: String
    var nextEntryId: Int64?
}

/// Applies the plans of several commands (of distinct accounts) in one statement, so in one transaction
/// and one commit (see ``StatementBatcher``). Each wallet moves from the state read only if its row is still
/// that version (`version` and, on the compare-and-set path, `xmin` unchanged; the update waits for a concurrent
/// writer and then re-checks the newest version), and every other write of that command hangs on its wallet's
/// update (``Writes/append(from:carrying:)``: the update returns the command's columns, so the later writes
/// read its rows alone): the ledger entry, the quota counter (and a guest's installation counter), the response
/// under its key (``Writes/remember(from:)``), a new hold or the settled one. A plan that writes neither an
/// entry nor a counter rewrites the wallet unchanged, which still checks and moves the stamp. The locking path
/// runs it too, for one command, under the wallet's row lock (no stamp to compare).
///
/// One row per wallet that moved — its `user_id`, new `stamp` and, after an entry, the `next_entry_id` of the
/// account; a write whose wallet moved meanwhile has no row. A key stored meanwhile fails the statement
/// (`idempotency_keys_pkey`), which undoes it whole. Absent optional values travel as sentinels that no real
/// value takes (empty quota name, key, hold id or installation), because arrays carry no `NULL`s here.
struct ActionBatchWriteStatement<Shape: BatchShape>: PostgresPreparedStatement {
    static var name: String { Shape.name }
    static var sql: String { Shape.write.sql }
    typealias Row = PostgresRow

    var writes: [ActionWrite]

    func makeBindings() throws -> PostgresBindings {
        var ledger = LedgerRows(), keys = KeyRows(), actions = ActionRows(Shape.self)
        // In user order, so that two processes' batches lock shared wallets in the same order (no deadlock).
        for write in writes.sorted(by: { $0.account.state.user.id < $1.account.state.user.id }) {
            let entries = write.plan.entry.map { [(id: write.account.entryId, entry: $0)] } ?? []
            let stamp = write.account.stamp.isEmpty ? nil : write.account.stamp
            ledger.move(userId: write.account.state.user.id, from: write.account.state.wallet, stamp: stamp, entries: entries, now: write.now)
            keys.append(write.remembered)
            actions.append(write)
        }
        var bindings = PostgresBindings(capacity: Shape.columnCount)
        Unnest.bind([ledger, keys, actions], into: &bindings)
        return bindings
    }

    /// Each write's result, in the order of ``writes``: `nil` for a write whose wallet moved.
    func results(_ rows: [PostgresRow]) throws -> [ActionWritten?] {
        var byUser: [String: ActionWritten] = [:]
        for row in rows {
            let row = Columns(row)
            byUser[try row["user_id"]] = ActionWritten(stamp: try row["stamp"], nextEntryId: try row["next_entry_id"])
        }
        return writes.map { byUser[$0.account.state.user.id] }
    }
}

/// What a command writes besides the ledger and its key, in the columns of the batch statement's shape: the quota
/// counter (quota '' for none); with ``BatchShape/movesHolds``, the new hold and the settled one (id '' for
/// none); with ``BatchShape/countsInstallations``, the installation's counter (installation '' for none).
private struct ActionRows: ColumnArrays {
    let movesHolds: Bool
    let countsInstallations: Bool
    private var quota: [String] = [], used: [Int64] = [], windowEnd: [Int64] = []
    private var newHold: [String] = [], newHoldAmount: [Int64] = [], newHoldExpires: [Int64] = []
    private var settledHold: [String] = [], settledStatus: [String] = [], captured: [Int64] = [], hasCaptured: [Bool] = []
    private var installation: [String] = [], installationUsed: [Int64] = [], installationWindowEnd: [Int64] = []

    init(_ shape: (some BatchShape).Type) {
        (movesHolds, countsInstallations) = (shape.movesHolds, shape.countsInstallations)
    }

    mutating func append(_ write: ActionWrite) {
        quota.append(write.plan.counter?.quota ?? "")
        used.append(write.plan.counter.map { Int64($0.value.used) } ?? 0)
        windowEnd.append(write.plan.counter?.value.windowEnd.millis ?? 0)
        let hold = write.plan.newHold
        newHold.append(hold?.id ?? "")
        newHoldAmount.append(hold?.amount ?? 0)
        newHoldExpires.append(hold?.expiresAt.millis ?? 0)
        let settle = write.plan.settleHold
        settledHold.append(settle == nil ? "" : write.hold?.id ?? "")
        settledStatus.append(settle?.status.rawValue ?? "")
        captured.append(settle?.capturedAmount ?? 0)
        hasCaptured.append(settle?.capturedAmount != nil)
        let counted = write.plan.installationCounter
        installation.append(counted?.installation ?? "")
        installationUsed.append(counted.map { Int64($0.value.used) } ?? 0)
        installationWindowEnd.append(counted?.value.windowEnd.millis ?? 0)
    }

    func forEachColumn(_ body: (String, String, any PostgresDynamicTypeEncodable) -> Void) {
        body("quota", "TEXT", quota)
        body("used", "BIGINT", used)
        body("window_end", "BIGINT", windowEnd)
        if movesHolds {
            body("new_hold", "TEXT", newHold)
            body("new_hold_amount", "BIGINT", newHoldAmount)
            body("new_hold_expires", "BIGINT", newHoldExpires)
            body("settled_hold", "TEXT", settledHold)
            body("settled_status", "TEXT", settledStatus)
            body("captured", "BIGINT", captured)
            body("has_captured", "BOOLEAN", hasCaptured)
        }
        if countsInstallations {
            body("installation", "TEXT", installation)
            body("installation_used", "BIGINT", installationUsed)
            body("installation_window_end", "BIGINT", installationWindowEnd)
        }
    }

    /// The names of ``forEachColumn(_:)``'s columns.
    var names: [String] {
        var names: [String] = []
        forEachColumn { name, _, _ in names.append(name) }
        return names
    }
}

/// Which of the four batch statements: the ones for batches that create or settle a hold have two more
/// writes, which cost every batch (measured: about a tenth of the action rate) when carried needlessly, and
/// the ones for batches with a guest's free use one more (the installation's counter).
protocol BatchShape {
    static var movesHolds: Bool { get }
    static var countsInstallations: Bool { get }
    /// The prepared statement's name.
    static var name: String { get }
    /// The statement's declaration (``batchWrite(_:)``).
    static var write: PostgresWrite { get }
    /// How many parameters it has.
    static var columnCount: Int { get }
}

/// The batch statement of `shape` (``Writes/actionBatch(source:carried:holds:installations:holdCheck:)``): with or
/// without the hold writes, and with or without the installation counters.
private func batchWrite(_ shape: (some BatchShape).Type) -> PostgresWrite {
    let actions = ActionRows(shape)
    // A hold read open cannot have been settled under an unmoved wallet; if it was, fail (a cast that
    // cannot succeed, evaluated per row, not folded at planning) and so undo everything.
    let holdCheck = shape.movesHolds ? """
        CASE WHEN m.settled_hold <> '' AND NOT EXISTS (SELECT 1 FROM settled s WHERE s.user_id = m.user_id)
             THEN ('hold ' || m.settled_hold || ' was not open')::BIGINT END
        """ : "NULL::BIGINT"
    let carried = ["kind", "created_at", "scope", "key", "fingerprint", "status", "body"] + actions.names
    return Writes.actionBatch(
        source: Unnest.relation([LedgerRows(), KeyRows(), actions], as: "b"), carried: carried,
        holds: shape.movesHolds ? Writes.batchHolds : nil, installations: shape.countsInstallations ? Writes.batchInstallationCounts : nil,
        holdCheck: holdCheck)
}

/// How many parameters the batch statement of `shape` has.
private func batchColumnCount(_ shape: (some BatchShape).Type) -> Int {
    var count = 0
    for set: any ColumnArrays in [LedgerRows(), KeyRows(), ActionRows(shape)] { set.forEachColumn { _, _, _ in count += 1 } }
    return count
}

/// Batches whose writes touch no hold and no installation.
enum LedgerWrites: BatchShape {
    static let movesHolds = false
    static let countsInstallations = false
    static let name = "tally_batch_write_v4"
    static let write = batchWrite(Self.self)
    static let columnCount = batchColumnCount(Self.self)
}

/// Batches with at least one write that creates or settles a hold, and none that counts an installation.
enum HoldWrites: BatchShape {
    static let movesHolds = true
    static let countsInstallations = false
    static let name = "tally_batch_write_holds_v4"
    static let write = batchWrite(Self.self)
    static let columnCount = batchColumnCount(Self.self)
}

/// Batches with at least one guest's free use (which counts the installation too), and no hold moved.
enum InstallationWrites: BatchShape {
    static let movesHolds = false
    static let countsInstallations = true
    static let name = "tally_batch_write_installations_v3"
    static let write = batchWrite(Self.self)
    static let columnCount = batchColumnCount(Self.self)
}

/// Batches with both a hold moved and a guest's free use.
enum HoldAndInstallationWrites: BatchShape {
    static let movesHolds = true
    static let countsInstallations = true
    static let name = "tally_batch_write_holds_installations_v3"
    static let write = batchWrite(Self.self)
    static let columnCount = batchColumnCount(Self.self)
}

extension PostgresStore {
    /// Sends `writes` (of distinct accounts) as one ``ActionBatchWriteStatement`` of the smallest shape that carries
    /// them, on its own connection (committed when it returns: this process's caches forget the accounts then, before
    /// the compare-and-set path stores them as written) or in the transaction of `connection` (forgotten at its commit).
    func writeActions(_ writes: [ActionWrite], on connection: PooledConnection? = nil) async throws -> [ActionWritten?] {
        func send<Shape: BatchShape>(_: Shape.Type) async throws -> [ActionWritten?] {
            let statement = ActionBatchWriteStatement<Shape>(writes: writes)
            let rows = if let connection { try await connection.execute(statement, logger: logger) } else { try await prepared(statement) }
            note(Shape.write, writes.map { .user($0.account.state.user.id) }, on: connection)
            return try statement.results(rows)
        }
        let movesHolds = writes.contains { $0.plan.newHold != nil || $0.plan.settleHold != nil }
        let countsInstallations = writes.contains { $0.plan.installationCounter != nil }
        switch (movesHolds, countsInstallations) {
        case (false, false): return try await send(LedgerWrites.self)
        case (true, false): return try await send(HoldWrites.self)
        case (false, true): return try await send(InstallationWrites.self)
        case (true, true): return try await send(HoldAndInstallationWrites.self)
        }
    }

    /// Runs a named statement on its own (committed when it returns) and collects its rows, on a connection
    /// leased for just that. No retry on a conflict (the caller decides what it means); only once, on another
    /// connection, when the statement was lost on this one (26000, 42P05: the connection is then replaced, and the
    /// statement never ran, since the server refused its Bind or Parse).
    func prepared<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [PostgresRow]
    where Statement.Row == PostgresRow {
        do {
            return try await pool.withConnection { try await $0.execute(statement, logger: logger) }
        } catch where PostgresStatements.lostStatement(error) != nil {
            return try await pool.withConnection { try await $0.execute(statement, logger: logger) }
        }
    }
}
