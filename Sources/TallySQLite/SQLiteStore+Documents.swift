import Foundation
import GRDB
import TallyStore

extension SQLiteStore: DocumentStore {
    /// One REST write in the writer's next batch (see ``DocumentStore/writeDocument(_:userId:idempotency:now:render:)``),
    /// with the idempotency of ``execute(_:idempotency:now:render:)``.
    public func writeDocument(
        _ mutation: DocumentMutation, userId: String, budget: SyncBudget, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (DocumentWriteOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        try await queued { db in
            try self.idempotent(idempotency, now: now, db) {
                var writer = try DocumentWriter(store: self, userId: userId, budget: budget, now: now, db)
                switch try writer.take(mutation) {
                case .applied(let document, let created):
                    try writer.finish()
                    return try render(DocumentWriteOutcome(document: document, created: created, charged: writer.charged))
                case .conflict(let current):
                    throw StoreError(.versionConflict, current: current)
                case .refused(let error):
                    throw error
                }
            }
        }
    }

    /// A push in one write transaction (see ``DocumentStore/push(userId:clientId:mutations:budget:now:)``).
    public func push(userId: String, clientId: String, mutations: [ClientMutation], budget: SyncBudget, now: Date) async throws
        -> PushOutcome
    {
        try await write { db in
            let client = try db.fetchFirst(
                sql: "SELECT user_id, last_mutation_id FROM sync_clients WHERE client_id = ?", arguments: [clientId],
                { row in (userId: row[0] as String, lastMutationId: row[1] as Int64) })
            if let client, client.userId != userId { throw StoreError(.clientIdInUse) }
            var writer = try DocumentWriter(store: self, userId: userId, budget: budget, now: now, db)
            if client == nil {
                let owned = try db.fetchValue(Int.self, sql: "SELECT count(*) FROM sync_clients WHERE user_id = ?", arguments: [userId]) ?? 0
                if owned >= budget.clientIds { throw StoreError(.storageFull) }
            }
            let previous = client?.lastMutationId ?? 0
            var taking = PushTaking(after: previous, count: mutations.count)
            for pushed in mutations where taking.isNew(pushed) {
                taking.record(try writer.take(pushed.mutation))
            }
            try writer.finish()
            let last = taking.lastMutationId
            if client == nil || last != previous {
                try db.run(SQLiteWrites.storeSyncClient, changing: .user(userId), arguments: [clientId, userId, last, now.millis])
            }
            return taking.outcome(charged: writer.charged)
        }
    }

    /// The stored record, from a reader.
    public func document(userId: String, collection: String, id: String) async throws -> DocumentRecord? {
        try await read { db in
            try db.fetchFirst(sql: DocumentRecord.selectOne, arguments: [userId, collection, id], DocumentRecord.init(row:))
        }
    }

    /// A keyset page of live documents: from memory when this process read it since the user's last document
    /// write (``DocumentPageCache``), else one statement on a reader (the statement for each shape of query is
    /// cached).
    public func documents(userId: String, query: DocumentRangeQuery) async throws -> RangePage {
        if let page = pages.page(userId: userId, query: query) { return page }
        let epoch = pages.epoch
        let page = try await read { db in
            let (sql, arguments) = Self.rangeStatement(userId: userId, query)
            let (documents, hasMore) = try Self.page(query.bound, sql: sql, arguments: arguments, db)
            return RangePage(documents: documents, hasMore: hasMore)
        }
        pages.store(page, userId: userId, query: query, readAt: epoch)
        return page
    }

    /// The statement of a range query: the predicate of ``DocumentRangeBounds`` (TallyStore's, which keeps only the
    /// tighter of the bound that paging moves and the keyset position, so that SQLite starts the index scan there),
    /// in SQL.
    static func rangeStatement(userId: String, _ query: DocumentRangeQuery) -> (String, StatementArguments) {
        var sql = "SELECT \(DocumentRecord.columns) FROM documents WHERE user_id = ? AND collection = ? AND deleted = 0"
        var arguments: StatementArguments = [userId, query.collection]
        let bounds = query.bounds
        let beyond = bounds.descending ? "<" : ">"
        switch bounds.keyset {
        case .after(let rangeValue, let id)?:
            sql += " AND (range_value, id) \(beyond) (?, ?)"
            arguments += [rangeValue, id]
        case .afterId(let id)?:
            sql += " AND range_value IS NULL AND id \(beyond) ?"
            arguments += [id]
        case nil:
            break
        }
        if let lower = bounds.lower {
            sql += lower.inclusive ? " AND range_value >= ?" : " AND range_value > ?"
            arguments += [lower.value]
        }
        if let upper = bounds.upper {
            sql += upper.inclusive ? " AND range_value <= ?" : " AND range_value < ?"
            arguments += [upper.value]
        }
        sql += bounds.descending ? " ORDER BY range_value DESC, id DESC LIMIT ?" : " ORDER BY range_value, id LIMIT ?"
        arguments += [query.bound.limit + 1]
        return (sql, arguments)
    }

    /// The page `bound` takes of the rows of `sql` (which reads `limit + 1` rows in page order), and whether
    /// more follow: rows are read one at a time and reading stops at the first the page cannot take, so a
    /// page of large documents never loads more than one document past its bound.
    static func page(_ bound: PageBound, sql: String, arguments: StatementArguments, _ db: Database) throws
        -> (documents: [DocumentRecord], hasMore: Bool)
    {
        var page = bound.filling()
        var documents: [DocumentRecord] = []
        documents.reserveCapacity(min(bound.limit, 1_024))
        let cursor = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
        return try withExtendedLifetime(cursor) {
            while let row = try cursor.next() {
                let record = try DocumentRecord(row: row)
                guard page.take(record) else { return (documents, true) }
                documents.append(record)
            }
            return (documents, false)
        }
    }

    /// Live documents changed after a version, in version order (a pull without a cursor).
    static let liveAfter =
        "SELECT \(DocumentRecord.columns) FROM documents WHERE user_id = ? AND version > ? AND deleted = 0 ORDER BY version LIMIT ?"
    /// Documents and tombstones changed after a version, in version order.
    static let changedAfter = "SELECT \(DocumentRecord.columns) FROM documents WHERE user_id = ? AND version > ? ORDER BY version LIMIT ?"

    /// A page of changes read in one snapshot (see ``DocumentStore/changes(userId:after:limit:maxBytes:)``; the
    /// page's rule is ``ChangePaging``'s).
    public func changes(userId: String, after: Int64?, limit: Int, maxBytes: Int) async throws -> ChangePage {
        let paging = ChangePaging(after: after, limit: limit, maxBytes: maxBytes)
        return try await read { db in
            let (version, purgedThrough) = try db.fetchFirst(
                sql: "SELECT version, purged_through FROM sync_state WHERE user_id = ?", arguments: [userId],
                { row in (row[0] as Int64, row[1] as Int64) }) ?? (0, 0)
            // A cursor to refuse reads nothing more.
            try paging.check(version: version, purgedThrough: purgedThrough)
            let taken = try Self.page(
                paging.bound, sql: paging.includesTombstones ? Self.changedAfter : Self.liveAfter,
                arguments: [userId, paging.since, paging.readLimit], db)
            var lastMutationIds: [String: Int64] = [:]
            try db.forEachRow(sql: "SELECT client_id, last_mutation_id FROM sync_clients WHERE user_id = ?", arguments: [userId]) { row in
                lastMutationIds[row[0]] = row[1]
            }
            return try paging.page(taken, version: version, purgedThrough: purgedThrough, lastMutationIds: lastMutationIds)
        }
    }

    /// Deletes the oldest tombstones before `before` (up to `limit`) in one write transaction, raising each
    /// owner's `purged_through` to the newest version it deleted and taking the rows off their stored documents.
    public func purgeTombstones(before: Date, limit: Int) async throws -> Int {
        try await write { db in
            let tombstones = try db.fetchRows(
                sql: """
                    SELECT user_id, collection, id, version FROM documents
                    WHERE deleted = 1 AND updated_at < ? ORDER BY updated_at LIMIT ?
                    """,
                arguments: [before.millis, max(limit, 0)])
            var purged: [String: (newest: Int64, count: Int)] = [:]
            for row in tombstones {
                try db.run(
                    SQLiteWrites.purgeTombstone, changing: .user(row[0]), arguments: [row[0] as String, row[1] as String, row[2] as String])
                let user = purged[row[0], default: (0, 0)]
                purged[row[0]] = (max(user.newest, row[3]), user.count + 1)
            }
            for (userId, (version, count)) in purged {
                try db.run(SQLiteWrites.notePurgedTombstones, changing: .user(userId), arguments: [version, count, userId])
            }
            return tombstones.count
        }
    }

    /// Deletes the sync clients idle longest before `before` (up to `limit`) in one write transaction.
    public func purgeClients(before: Date, limit: Int) async throws -> Int {
        try await write { db in
            try db.run(SQLiteWrites.purgeSyncClients, changing: .all, arguments: [before.millis, max(limit, 0)])
            return db.changesCount
        }
    }
}
