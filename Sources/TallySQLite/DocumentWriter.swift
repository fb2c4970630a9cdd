import Foundation
import GRDB
import TallyStore

/// The document writes of one call (a REST write or a whole push) in the writer's transaction.
///
/// Per mutation: the stored row, ``DocumentPlanner``'s plan, the collection's action when the plan creates a
/// document (through the ledger code of ``SQLiteStore/perform(_:known:now:_:)``), then the row at the user's
/// next version. What a push would otherwise read again per mutation stays in memory for the call: the user's
/// version and what their documents take of their ``SyncBudget`` (stored once, by ``finish()``), each
/// collection's live count (counted once, when a create needs it) and the account as the last charge left it.
struct DocumentWriter {
    private let store: SQLiteStore
    private let db: Database
    private let userId: String
    private let budget: SyncBudget
    private let now: Date
    /// `now` as the row stores it (whole milliseconds), so a record returned equals the record read back.
    private let updatedAt: Date
    /// The user's version as stored when the call began.
    private let storedVersion: Int64
    /// The user's version after this call's last write.
    private var version: Int64
    /// What the user's documents take of the budget after this call's last write.
    private var usage: SyncUsage
    /// Live documents per collection, for those a create needed counted.
    private var liveCounts: [String: Int] = [:]
    /// The account as this call's last charge (or refusal) found it.
    private var account: AccountState?
    /// The account after this call's last charge, if any.
    private(set) var charged: AccountState?

    /// Begins the user's writes within `budget`; throws `.userNotFound`.
    init(store: SQLiteStore, userId: String, budget: SyncBudget, now: Date, _ db: Database) throws {
        guard
            let (version, usage) = try db.fetchFirst(
                sql: """
                    SELECT s.version, s.stored_documents, s.stored_bytes FROM users u LEFT JOIN sync_state s ON s.user_id = u.id
                    WHERE u.id = ?
                    """,
                arguments: [userId],
                { row in (row[0] as Int64? ?? 0, SyncUsage(documents: row[1] as Int64? ?? 0, bytes: row[2] as Int64? ?? 0)) })
        else { throw StoreError(.userNotFound) }
        self.store = store
        self.db = db
        self.userId = userId
        self.budget = budget
        self.now = now
        updatedAt = Date(millis: now.millis)
        storedVersion = version
        self.version = version
        self.usage = usage
        // Whatever this transaction writes of the user's documents, their cached range pages go when it commits.
        store.forgets.documents(userId)
    }

    /// Takes one mutation: planned, its collection's action charged for a create, written at the user's next
    /// version. A conflict or a refusal writes nothing.
    mutating func take(_ mutation: DocumentMutation) throws -> TakenMutation {
        let collection = mutation.collection
        let existing = try db.fetchFirst(
            sql: DocumentRecord.selectOne, arguments: [userId, collection.name, mutation.docId], DocumentRecord.init(row:))
        // Only a create needs the count, and only a document that is not live can be created.
        let liveCount = try existing?.deleted == false ? 0 : count(collection.name)
        switch DocumentPlanner.plan(mutation, existing: existing, liveCount: liveCount, usage: usage, budget: budget) {
        case .conflict(let current):
            return .conflict(current: current)
        case .refused(let code):
            return .refused(StoreError(code))
        case .write(let data, let rangeValue, let deleted, let creates, let removes):
            if creates, let action = collection.action {
                let command = Command.performAction(userId: userId, action: action, quotaLimit: collection.quotaLimit)
                do {
                    account = try store.perform(command, known: account, now: now, db).state
                    charged = account
                } catch let error as StoreError where error.refusesPayment {
                    account = error.state
                    return .refused(error)
                }
            }
            version += 1
            let record = DocumentRecord(
                collection: collection.name, id: mutation.docId, data: data, rangeValue: rangeValue, version: version,
                updatedAt: updatedAt, deleted: deleted)
            try db.run(
                sql: """
                    INSERT INTO documents (user_id, collection, id, data, range_value, version, updated_at, deleted)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, collection, id) DO UPDATE SET data = excluded.data, range_value = excluded.range_value,
                      version = excluded.version, updated_at = excluded.updated_at, deleted = excluded.deleted
                    """,
                arguments: [
                    userId, collection.name, mutation.docId, deleted ? nil : String(decoding: data, as: UTF8.self), rangeValue,
                    version, updatedAt.millis, deleted,
                ])
            usage = usage.writing(data, over: existing)
            if creates { liveCounts[collection.name]? += 1 }
            if removes { liveCounts[collection.name]? -= 1 }
            return .applied(record, created: creates)
        }
    }

    /// Stores the user's version and usage, if this call changed them.
    func finish() throws {
        guard version != storedVersion else { return }
        try db.run(
            sql: """
                INSERT INTO sync_state (user_id, version, stored_documents, stored_bytes) VALUES (?, ?, ?, ?)
                ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, stored_documents = excluded.stored_documents,
                  stored_bytes = excluded.stored_bytes
                """,
            arguments: [userId, version, usage.documents, usage.bytes])
    }

    /// The live documents of the collection, counted the first time a create needs it.
    private mutating func count(_ collection: String) throws -> Int {
        if let count = liveCounts[collection] { return count }
        let count = try db.fetchValue(
            Int.self, sql: "SELECT count(*) FROM documents INDEXED BY documents_range WHERE user_id = ? AND collection = ? AND deleted = 0",
            arguments: [userId, collection]) ?? 0
        liveCounts[collection] = count
        return count
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
