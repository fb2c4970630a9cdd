import Foundation
import GRDB
import TallyAPI
import TallyStore

/// The document writes of one call (a REST write or a whole push) in the writer's transaction.
///
/// Per mutation, the steps of ``DocumentTaking``: the stored row read, the collection counted when a create may
/// need it, the plan (within the user's ``SyncBudget``), the collection's action for a create (through the ledger
/// code of ``SQLiteStore/perform(_:known:now:_:)``), then the row written at the user's next version. What a push
/// would otherwise read again per mutation stays in memory for the call: the user's version and what their
/// documents take of the budget (stored once, by ``finish()``), each collection's live count (counted once) and
/// the account as the last charge left it. Why this differs from PostgreSQL's writer (one writer here, many processes
/// there): `TallyStore/DocumentTaking.swift`.
struct DocumentWriter {
    private let store: SQLiteStore
    private let db: Database
    private let userId: String
    private let now: Date
    /// The user's version as stored when the call began.
    private let storedVersion: Int64
    /// The rules of the call's writes, and the version and counts they moved.
    private var taking: DocumentTaking
    /// The account as this call's last charge (or refusal) found it.
    private var account: AccountState?
    /// The account after this call's last charge, if any.
    private(set) var charged: AccountState?

    /// Begins the user's writes within `budget`; throws `.userNotFound` (also for a guest merged into an account: its
    /// documents are the account's now).
    init(store: SQLiteStore, userId: String, budget: SyncBudget, now: Date, _ db: Database) throws {
        guard
            let (version, usage) = try db.fetchFirst(
                sql: """
                    SELECT s.version, s.stored_documents, s.stored_bytes FROM users u LEFT JOIN sync_state s ON s.user_id = u.id
                    WHERE u.id = ? AND u.merged_into IS NULL
                    """,
                arguments: [userId],
                { row in (row[0] as Int64? ?? 0, SyncUsage(documents: row[1] as Int64? ?? 0, bytes: row[2] as Int64? ?? 0)) })
        else { throw StoreError(.userNotFound) }
        self.store = store
        self.db = db
        self.userId = userId
        self.now = now
        storedVersion = version
        taking = DocumentTaking(version: version, usage: usage, budget: budget, now: now)
    }

    /// Takes one mutation: planned, its collection's action charged for a create, written at the user's next
    /// version. A conflict or a refusal writes nothing.
    mutating func take(_ mutation: DocumentMutation) throws -> TakenMutation {
        let collection = mutation.collection.name
        let existing = try db.fetchFirst(
            sql: DocumentRecord.selectOne, arguments: [userId, collection, mutation.docId], DocumentRecord.init(row:))
        if taking.needsCount(mutation, existing: existing) {
            // Each record is written as it is taken, so the count includes them.
            taking.counted(collection, try count(collection), includesWritesTaken: true)
        }
        let write: DocumentTaking.Write
        switch taking.plan(mutation, existing: existing) {
        case .answered(let taken): return taken
        case .write(let planned): write = planned
        }
        if let command = write.charge(userId: userId) {
            do {
                account = try store.perform(command, known: account, now: now, db).state
                charged = account
            } catch {
                guard let refused = TakenMutation.chargeFailed(error) else { throw error }
                account = (error as? StoreError)?.state
                return refused
            }
        }
        let record = taking.take(write)
        try db.run(
            SQLiteWrites.writeDocument, changing: .user(userId),
            arguments: [
                userId, collection, record.id, record.deleted ? nil : String(decoding: record.data, as: UTF8.self), record.rangeValue,
                record.version, record.updatedAt.millis, record.deleted,
            ])
        return .applied(record, created: write.creates)
    }

    /// Stores the user's version and usage, if this call changed them.
    func finish() throws {
        guard taking.version != storedVersion else { return }
        try db.run(SQLiteWrites.storeSyncState, changing: .user(userId), arguments: [userId, taking.version, taking.usage.documents, taking.usage.bytes])
    }

    /// The live documents of the collection, as stored now.
    private func count(_ collection: String) throws -> Int {
        try db.fetchValue(
            Int.self, sql: "SELECT count(*) FROM documents INDEXED BY documents_range WHERE user_id = ? AND collection = ? AND deleted = 0",
            arguments: [userId, collection]) ?? 0
    }
}

extension DocumentRecord {
    /// The columns, in the order ``init(row:)`` reads them.
    static let columns = "collection, id, data, range_value, version, updated_at, deleted"
    /// One document of a user by collection and id.
    static let selectOne = "SELECT \(columns) FROM documents WHERE user_id = ? AND collection = ? AND id = ?"

    /// From the columns of ``columns``, by position.
    init(row: Row) throws {
        self.init(
            collection: row[0], id: row[1], data: try row.withUnsafeData(atIndex: 2) { $0.map { [UInt8]($0) } ?? [] }, rangeValue: row[3],
            version: row[4], updatedAt: Date(millis: row[5]), deleted: row[6])
    }
}
