import Foundation
import PostgresNIO
import TallyStore

// Named prepared statements of an optimistic action (see `PostgresStore+CompareAndSet.swift`); the reads of other
// hot paths are in `PostgresReadStatements.swift`. Each connection parses and plans a statement once, then
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
/// that version (`xmin` and `version` unchanged; the update waits for a concurrent writer and then
/// re-checks the newest version), and every other write of that command hangs on its wallet's update (the
/// update returns the command's columns, so the later writes read its rows alone): the ledger entry, the
/// quota counter (and a guest's installation counter), the response under its key, a new hold or the
/// settled one. A plan that
/// writes neither an entry nor a counter rewrites the wallet unchanged, which still checks and moves the
/// stamp.
///
/// One row per wallet that moved — its user, new stamp and, after an entry, the id of the account's next
/// entry; a write whose wallet moved meanwhile has no row. A key stored meanwhile fails the statement
/// (`idempotency_keys_pkey`), which undoes it whole. Absent optional values travel as sentinels that no
/// real value takes (entry id 0, empty quota name, key, hold id or installation), because arrays carry no
/// `NULL`s here.
struct ActionBatchWriteStatement<Shape: BatchShape>: PostgresPreparedStatement {
    static var name: String { Shape.name }
    static var sql: String { Shape.sql }
    typealias Row = PostgresRow

    var writes: [ActionWrite]

    func makeBindings() throws -> PostgresBindings {
        var userId: [String] = [], version: [Int64] = [], stamp: [String] = []
        var balance: [Int64] = [], held: [Int64] = [], newVersion: [Int64] = []
        var entryId: [Int64] = [], kind: [String] = [], amount: [Int64] = [], heldChange: [Int64] = []
        var reason: [String] = [], hasReason: [Bool] = [], createdAt: [Int64] = []
        var quota: [String] = [], used: [Int64] = [], windowEnd: [Int64] = []
        var scope: [String] = [], key: [String] = [], fingerprint: [String] = [], status: [Int64] = []
        var body: [ByteBuffer] = []
        var newHold: [String] = [], newHoldAmount: [Int64] = [], newHoldExpires: [Int64] = []
        var settledHold: [String] = [], settledStatus: [String] = [], captured: [Int64] = [], hasCaptured: [Bool] = []
        var installation: [String] = [], installationUsed: [Int64] = [], installationWindowEnd: [Int64] = []
        // In user order, so that two processes' batches lock shared wallets in the same order (no deadlock).
        for write in writes.sorted(by: { $0.account.user.id < $1.account.user.id }) {
            let wallet = write.account.wallet
            let entry = write.plan.entry
            let after = entry.map { wallet.applying($0) } ?? wallet
            userId.append(write.account.user.id)
            version.append(wallet.version)
            stamp.append(write.account.stamp)
            balance.append(after.balance)
            held.append(after.held)
            newVersion.append(after.version)
            entryId.append(entry == nil ? 0 : write.account.entryId ?? 0)
            kind.append(entry?.kind.rawValue ?? "")
            amount.append(entry?.amount ?? 0)
            heldChange.append(entry?.heldChange ?? 0)
            reason.append(entry?.reason ?? "")
            hasReason.append(entry?.reason != nil)
            createdAt.append(write.now.millis)
            quota.append(write.plan.counter?.quota ?? "")
            used.append(write.plan.counter.map { Int64($0.value.used) } ?? 0)
            windowEnd.append(write.plan.counter?.value.windowEnd.millis ?? 0)
            scope.append(write.remembered?.key.scope ?? "")
            key.append(write.remembered?.key.key ?? "")
            fingerprint.append(write.remembered?.key.fingerprint ?? "")
            status.append(Int64(write.remembered?.response.status ?? 0))
            body.append(ByteBuffer(bytes: write.remembered?.response.body ?? []))
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
        var bindings = PostgresBindings(capacity: 21 + (Shape.movesHolds ? 7 : 0) + (Shape.countsInstallations ? 3 : 0))
        bindings.append(userId)
        bindings.append(version)
        bindings.append(stamp)
        bindings.append(balance)
        bindings.append(held)
        bindings.append(newVersion)
        bindings.append(entryId)
        bindings.append(kind)
        bindings.append(amount)
        bindings.append(heldChange)
        bindings.append(reason)
        bindings.append(hasReason)
        bindings.append(createdAt)
        bindings.append(quota)
        bindings.append(used)
        bindings.append(windowEnd)
        bindings.append(scope)
        bindings.append(key)
        bindings.append(fingerprint)
        bindings.append(status)
        bindings.append(body)
        if Shape.movesHolds {
            bindings.append(newHold)
            bindings.append(newHoldAmount)
            bindings.append(newHoldExpires)
            bindings.append(settledHold)
            bindings.append(settledStatus)
            bindings.append(captured)
            bindings.append(hasCaptured)
        }
        if Shape.countsInstallations {
            bindings.append(installation)
            bindings.append(installationUsed)
            bindings.append(installationWindowEnd)
        }
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// Each write's result, in the order of ``writes``: `nil` for a write whose wallet moved.
    func results(_ rows: [PostgresRow]) throws -> [ActionWritten?] {
        var byUser: [String: ActionWritten] = [:]
        for row in rows {
            var cells = Cells(row)
            let userId: String = try cells.next()
            byUser[userId] = ActionWritten(stamp: try cells.next(), nextEntryId: try cells.next())
        }
        return writes.map { byUser[$0.account.user.id] }
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
    /// The statement's text (``batchSQL(movesHolds:countsInstallations:)``).
    static var sql: String { get }
}

/// The batch statement, with or without the hold writes, and with or without the installation counters.
private func batchSQL(movesHolds: Bool, countsInstallations: Bool) -> String {
    let holdColumns = movesHolds ? ",\n    $22::TEXT[], $23::BIGINT[], $24::BIGINT[], $25::TEXT[], $26::TEXT[], $27::BIGINT[], $28::BOOLEAN[]" : ""
    let holdNames = movesHolds ? ",\n    new_hold, new_hold_amount, new_hold_expires, settled_hold, settled_status, captured, has_captured" : ""
    let holdReturning = movesHolds ? ",\n    b.new_hold, b.new_hold_amount, b.new_hold_expires, b.settled_hold, b.settled_status, b.captured, b.has_captured" : ""
    let first = movesHolds ? 29 : 22
    let installationColumns = countsInstallations ? ",\n    $\(first)::TEXT[], $\(first + 1)::BIGINT[], $\(first + 2)::BIGINT[]" : ""
    let installationNames = countsInstallations ? ",\n    installation, installation_used, installation_window_end" : ""
    let installationReturning = countsInstallations ? ",\n    b.installation, b.installation_used, b.installation_window_end" : ""
    let installationWrites = countsInstallations ? """
        , counted_installations AS (
          INSERT INTO installation_quota_counters (installation, quota, used, window_end)
          SELECT m.installation, m.quota, m.installation_used, m.installation_window_end FROM moved m WHERE m.installation <> ''
          ON CONFLICT (installation, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
        )
        """ : ""
    let holdWrites = movesHolds ? """
        , opened AS (
          INSERT INTO holds (id, user_id, amount, status, created_at, expires_at)
          SELECT m.new_hold, m.user_id, m.new_hold_amount, 'open', m.created_at, m.new_hold_expires
          FROM moved m WHERE m.new_hold <> ''
        ), settled AS (
          UPDATE holds h SET status = m.settled_status, captured_amount = CASE WHEN m.has_captured THEN m.captured END,
                 settled_at = m.created_at
          FROM moved m
          WHERE m.settled_hold <> '' AND h.id = m.settled_hold AND h.user_id = m.user_id AND h.status = 'open'
          RETURNING h.user_id
        )
        """ : ""
    // A hold read open cannot have been settled under an unmoved wallet; if it was, fail (a cast that
    // cannot succeed, evaluated per row, not folded at planning) and so undo everything.
    let holdCheck = movesHolds ? """
        CASE WHEN m.settled_hold <> '' AND NOT EXISTS (SELECT 1 FROM settled s WHERE s.user_id = m.user_id)
             THEN ('hold ' || m.settled_hold || ' was not open')::BIGINT END
        """ : "NULL::BIGINT"
    return """
        WITH b AS MATERIALIZED (
          SELECT * FROM unnest(
            $1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[],
            $7::BIGINT[], $8::TEXT[], $9::BIGINT[], $10::BIGINT[], $11::TEXT[], $12::BOOLEAN[], $13::BIGINT[],
            $14::TEXT[], $15::BIGINT[], $16::BIGINT[],
            $17::TEXT[], $18::TEXT[], $19::TEXT[], $20::BIGINT[], $21::BYTEA[]\(holdColumns)\(installationColumns)
          ) AS b(user_id, version, stamp, balance, held, new_version,
                 entry_id, kind, amount, held_change, reason, has_reason, created_at,
                 quota, used, window_end,
                 scope, key, fingerprint, status, body\(holdNames)\(installationNames))
        ), moved AS (
          UPDATE wallets w SET balance = b.balance, held = b.held, version = b.new_version
          FROM b WHERE w.user_id = b.user_id AND w.version = b.version AND w.xmin::text = b.stamp
          RETURNING w.user_id, w.xmin::text AS stamp, b.entry_id, b.kind, b.amount, b.held_change, b.balance, b.held,
                    b.reason, b.has_reason, b.created_at, b.quota, b.used, b.window_end,
                    b.scope, b.key, b.fingerprint, b.status, b.body\(holdReturning)\(installationReturning)
        ), appended AS (
          INSERT INTO ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
          OVERRIDING SYSTEM VALUE
          SELECT m.entry_id, m.user_id, m.kind, m.amount, m.held_change, m.balance, m.held,
                 CASE WHEN m.has_reason THEN m.reason END, m.created_at
          FROM moved m WHERE m.entry_id <> 0
        ), counted AS (
          INSERT INTO quota_counters (user_id, quota, used, window_end)
          SELECT m.user_id, m.quota, m.used, m.window_end FROM moved m WHERE m.quota <> ''
          ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
        ), remembered AS (
          INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
          SELECT m.scope, m.key, m.fingerprint, m.status, m.body, m.created_at
          FROM moved m WHERE m.key <> ''
        )\(holdWrites)\(installationWrites)
        SELECT m.user_id, m.stamp, CASE WHEN m.entry_id <> 0 THEN nextval('ledger_entries_id_seq') END,
               \(holdCheck)
        FROM moved m
        """
}

/// Batches whose writes touch no hold and no installation.
enum LedgerWrites: BatchShape {
    static let movesHolds = false
    static let countsInstallations = false
    static let name = "tally_batch_write_v2"
    static let sql = batchSQL(movesHolds: false, countsInstallations: false)
}

/// Batches with at least one write that creates or settles a hold, and none that counts an installation.
enum HoldWrites: BatchShape {
    static let movesHolds = true
    static let countsInstallations = false
    static let name = "tally_batch_write_holds_v2"
    static let sql = batchSQL(movesHolds: true, countsInstallations: false)
}

/// Batches with at least one guest's free use (which counts the installation too), and no hold moved.
enum InstallationWrites: BatchShape {
    static let movesHolds = false
    static let countsInstallations = true
    static let name = "tally_batch_write_installations_v1"
    static let sql = batchSQL(movesHolds: false, countsInstallations: true)
}

/// Batches with both a hold moved and a guest's free use.
enum HoldAndInstallationWrites: BatchShape {
    static let movesHolds = true
    static let countsInstallations = true
    static let name = "tally_batch_write_holds_installations_v1"
    static let sql = batchSQL(movesHolds: true, countsInstallations: true)
}

extension PostgresStore {
    /// Runs a prepared statement on its own (committed when it returns) and collects its rows, on a
    /// connection leased for just that. No retry: the caller decides what a conflict means.
    func prepared<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [PostgresRow]
    where Statement.Row == PostgresRow {
        try await pool.withConnection { try await $0.execute(statement, logger: logger) }
    }
}
