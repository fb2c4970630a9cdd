import Foundation
import Logging
import PostgresNIO
import TallyStore

// The reads of ``DocumentStore`` (each one statement, so one snapshot) and the tombstone purge; the writes
// are in `PostgresStore+Documents.swift`.
extension PostgresStore {
    /// The stored record of a document (a tombstone included), or `nil`.
    public func document(userId: String, collection: String, id: String) async throws -> DocumentRecord? {
        let rows = try await rows(
            """
            SELECT \(unescaped: DocumentRecord.columns) FROM documents
            WHERE user_id = \(userId) AND collection = \(collection) AND id = \(id)
            """)
        return try rows.first.map { try DocumentRecord(Columns($0)) }
    }

    /// Live documents of a collection, in (range value, id) order or the reverse, from the index `documents_live`:
    /// the statement names only the bounds ``DocumentRangeBounds`` keeps, so each is a bound of the index scan and a page
    /// costs its length wherever it starts. After a position without a range value (a collection without a
    /// range key, whose values are all NULL), the keyset is the id alone.
    public func documents(userId: String, query: DocumentRangeQuery) async throws -> RangePage {
        // The user's change counter (one statement with the other reads waiting): while it has not moved, a page
        // read after it was at that value is still the page (``DocumentPageCache``).
        let version = try await retrying {
            try await documentVersionReads.submitOrSendAlone(userId) { userIds in
                let statement = DocumentVersionBatchReadStatement(userIds: userIds)
                return try statement.results(try await prepared(statement))
            }
        }
        guard let version else { return try await readDocuments(userId: userId, query: query) }
        if let page = pages.page(userId: userId, query: query, stamp: version) { return page }
        let page = try await readDocuments(userId: userId, query: query)
        pages.store(page, userId: userId, query: query, stamp: version, readAt: nil)
        return page
    }

    /// A keyset page of live documents, from the database: the statement returns the rows the page takes and the
    /// first it refuses (``byteBounded(_:order:maxBytes:)``), ``PageBound`` cuts them.
    private func readDocuments(userId: String, query: DocumentRangeQuery) async throws -> RangePage {
        var statement = BoundStatement()
        func bind(_ value: some PostgresDynamicTypeEncodable) -> String { statement.value(value) }
        // The predicate is ``DocumentRangeBounds``' (TallyStore's, SQLite's too), in SQL.
        let bounds = query.bounds
        let (order, beyond) = bounds.descending ? ("DESC", "<") : ("ASC", ">")
        var sql = """
            SELECT \(DocumentRecord.columns) FROM documents
            WHERE user_id = \(bind(userId)) AND collection = \(bind(query.collection)) AND NOT deleted
            """
        if let lower = bounds.lower { sql += " AND range_value \(lower.inclusive ? ">=" : ">") \(bind(lower.value))" }
        if let upper = bounds.upper { sql += " AND range_value \(upper.inclusive ? "<=" : "<") \(bind(upper.value))" }
        switch bounds.keyset {
        case .after(let rangeValue, let id)?:
            sql += " AND (range_value, id) \(beyond) (\(bind(rangeValue)), \(bind(id)))"
        case .afterId(let id)?:
            sql += " AND range_value IS NULL AND id \(beyond) \(bind(id))"
        case nil:
            break
        }
        let ordering = "range_value \(order), id \(order)"
        sql += " ORDER BY \(ordering) LIMIT \(bind(Int64(query.bound.limit + 1)))"
        sql = Self.byteBounded(sql, order: ordering, maxBytes: bind(Int64(query.maxBytes)))
        let records = try await rows(statement.query(sql)).map { try DocumentRecord(Columns($0)) }
        let (documents, hasMore) = query.bound.cut(records)
        return RangePage(documents: documents, hasMore: hasMore)
    }

    /// `pageSQL` (``DocumentRecord/columns``, `limit + 1` rows in `order`) less the rows a ``PageBound`` of
    /// `maxBytes` could not reach: after the first two, a row is kept only while the data of the rows before it are
    /// at most `maxBytes`. That keeps every row the bound takes and the first it refuses (which tells that more
    /// follow), and leaves the rest, however large, in the database.
    static func byteBounded(_ pageSQL: String, order: String, maxBytes: String) -> String {
        """
        SELECT \(DocumentRecord.columns) FROM (
          SELECT p.*, row_number() OVER w AS page_row, sum(octet_length(p.data)) OVER w - octet_length(p.data) AS bytes_before
          FROM (\(pageSQL)) p
          WINDOW w AS (ORDER BY \(order) ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        ) b
        WHERE page_row <= 2 OR bytes_before <= \(maxBytes)
        ORDER BY page_row
        """
    }

    /// One statement, so one snapshot: a `state` row (the user's version and purge mark, their clients' last
    /// mutation ids; none before the user's first write) and a `document` row for each document ``ChangePaging``
    /// reads (its rule makes the page): those after `after` by version that its ``PageBound`` takes, plus the first
    /// it refuses. A writer commits its documents and the version together, so the page never has a gap below the
    /// version.
    public func changes(userId: String, after: Int64?, limit: Int, maxBytes: Int) async throws -> ChangePage {
        let paging = ChangePaging(after: after, limit: limit, maxBytes: maxBytes)
        var statement = BoundStatement()
        let user = statement.value(userId)
        let page = """
            SELECT \(DocumentRecord.columns) FROM documents
            WHERE user_id = \(user) AND version > \(statement.value(paging.since))
              AND (\(statement.value(paging.includesTombstones)) OR NOT deleted)
            ORDER BY version LIMIT \(statement.value(Int64(paging.readLimit)))
            """
        let documents = Self.byteBounded(page, order: "version", maxBytes: statement.value(Int64(paging.bound.maxBytes)))
        // Every value bound before the statement is made.
        let rows = try await rows(
            statement.query(
                """
                SELECT 'state' AS part, s.version AS user_version, s.purged_through, c.client_ids, c.last_mutation_ids,
                       NULL::TEXT AS collection, NULL::TEXT AS id, NULL::TEXT AS data, NULL::TEXT AS range_value,
                       NULL::BIGINT AS version, NULL::BIGINT AS updated_at, NULL::BOOLEAN AS deleted
                FROM sync_state s
                CROSS JOIN LATERAL (
                  SELECT array_agg(client_id) AS client_ids, array_agg(last_mutation_id) AS last_mutation_ids
                  FROM sync_clients WHERE user_id = s.user_id
                ) c
                WHERE s.user_id = \(user)
                UNION ALL
                SELECT 'document', NULL, NULL, NULL, NULL, * FROM (\(documents)) d
                """))
        var (version, purgedThrough): (Int64, Int64) = (0, 0)
        var lastMutationIds: [String: Int64] = [:]
        var changes: [DocumentRecord] = []
        changes.reserveCapacity(min(rows.count, paging.readLimit))
        for row in rows.map(Columns.init) {
            guard try row["part"] as String == "state" else {
                changes.append(try DocumentRecord(row))
                continue
            }
            (version, purgedThrough) = (try row["user_version"], try row["purged_through"])
            let clients: [String]? = try row["client_ids"], last: [Int64]? = try row["last_mutation_ids"]
            for (client, id) in zip(clients ?? [], last ?? []) { lastMutationIds[client] = id }
        }
        // UNION ALL keeps no order.
        changes.sort { $0.version < $1.version }
        return try paging.page(
            paging.bound.cut(changes), version: version, purgedThrough: purgedThrough, lastMutationIds: lastMutationIds)
    }

    /// Locks the sync state of up to `limit` users owning tombstones older than `before`, skipping users whose
    /// writes hold it (their tombstones wait for the next run, and never stop the others'), then deletes those
    /// users' oldest tombstones (up to `limit` in all) and raises each user's `purged_through` to the newest
    /// version deleted, in one statement. Writers lock the sync state before the documents too, so the two never
    /// deadlock.
    public func purgeTombstones(before: Date, limit: Int) async throws -> Int {
        let limit: Int? = limit < 0 ? nil : limit
        return try await transaction { connection in
            let locked = try await connection.rows(
                """
                SELECT s.user_id FROM sync_state s
                WHERE s.user_id IN (SELECT user_id FROM documents WHERE deleted AND updated_at < \(before.millis))
                LIMIT \(limit)::BIGINT
                FOR UPDATE OF s SKIP LOCKED
                """, logger: logger)
            guard !locked.isEmpty else { return 0 }
            let users: [String] = try locked.map { try Columns($0)["user_id"] }
            // A new statement, so a fresh snapshot: it sees every write committed before the locks were taken.
            var statement = BoundStatement()
            let write = Writes.purgeTombstones(
                users: statement.bind(users), before: statement.bind(before.millis), limit: statement.bind(limit))
            let rows = try await run(write, statement, changing: users.map(ChangedRows.user), on: connection)
            return Int(try Self.single(rows, "the tombstone purge")["purged"] as Int64)
        }
    }

    /// Deletes up to `limit` sync clients idle since before `before`, in one statement under their users' sync
    /// state locks (a push of one of them, which reads the client under that lock, waits or is waited for;
    /// users whose writes hold the lock keep their clients until the next run).
    public func purgeClients(before: Date, limit: Int) async throws -> Int {
        var statement = BoundStatement()
        let write = Writes.purgeClients(before: statement.bind(before.millis), limit: statement.bind(Int64(max(limit, 0))))
        let rows = try await run(write, statement, changing: [.all])
        return Int(try Self.single(rows, "the purge of idle sync clients")["purged"] as Int64)
    }
}
