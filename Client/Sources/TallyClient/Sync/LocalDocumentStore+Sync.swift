import Foundation
import GRDB
import TallyAPI

/// Applying the server's answers. Each runs in one transaction, recomputes the visible state of exactly the
/// documents it touched (base with their remaining outbox mutations on top) and then tells observers.
extension LocalDocumentStore {
    /// Takes a push's answer: drops the outbox rows it covers (ids ≤ `lastMutationId`), moves applied changes into
    /// the base (so the app sees no flicker before the next pull, which stays authoritative), takes a conflict's
    /// `current` as the base, and rolls a refused mutation back. Returns the conflicts and rejections, for the app.
    ///
    /// A `duplicate` (its answer was lost earlier) leaves the base alone: its outcome is unknown here, and the pull
    /// that follows a push brings the document if it changed.
    @discardableResult
    func apply(push response: SyncPushResponse) throws -> [PushRefusal] {
        let now = clock.now
        let (touched, refusals) = try writing { db -> (Set<DocumentKey>, [PushRefusal]) in
            let covered = try Row.fetchAll(
                db, sql: "SELECT id, op, collection, doc_id, data, if_version FROM outbox WHERE id <= ? ORDER BY id",
                arguments: [response.lastMutationId]
            ).map(Self.mutation)
            var byId: [Int64: SyncMutation] = [:]
            for mutation in covered { byId[mutation.id] = mutation }
            var refusals: [PushRefusal] = []
            for result in response.results {
                // Another process sharing the file may have taken this answer already.
                guard let mutation = byId[result.id] else { continue }
                let key = DocumentKey(collection: mutation.collection, id: mutation.docId)
                switch result.status {
                case .applied:
                    guard let version = result.version else { continue }
                    try applyToBase(db, mutation, key: key, version: version, at: now)
                case .conflict:
                    if let current = result.current {
                        try storeBase(db, current)
                    } else {
                        try db.execute(sql: "DELETE FROM base WHERE collection = ? AND id = ?", arguments: [key.collection, key.id])
                    }
                    refusals.append(PushRefusal(mutation: mutation, reason: .conflict(current: result.current)))
                case .rejected:
                    let error = result.error ?? ErrorDetail(code: ErrorCode(rawValue: "rejected"), message: "refused by the server")
                    refusals.append(PushRefusal(mutation: mutation, reason: .rejected(error)))
                case .duplicate:
                    break
                }
            }
            try db.execute(sql: "DELETE FROM outbox WHERE id <= ?", arguments: [response.lastMutationId])
            try db.execute(sql: "UPDATE meta SET last_sync_at = ?", arguments: [now.timeIntervalSince1970])
            let touched = Set(covered.map { DocumentKey(collection: $0.collection, id: $0.docId) })
            try recomputeVisible(db, touched)
            return (touched, refusals)
        }
        notify(.documents(touched))
        return refusals
    }

    /// Takes one page of a pull from ``LocalSyncState/cursor``: upserts its changes into the base (tombstones
    /// included), stores its cursor, and recomputes those documents with their pending mutations still on top: a
    /// pulled state never undoes a local write the server has not acknowledged.
    ///
    /// A pull from no cursor (first sync, after ``resetForResync()``) is the whole live state over pages; when its
    /// last page arrives, base documents no page contained are removed (their pending writes stay). On the last
    /// page, outbox rows at or below the server's `lastMutationIds[clientId]` are dropped: the pull already shows them.
    @discardableResult
    func apply(pull response: SyncPullResponse) throws -> Set<DocumentKey> {
        let now = clock.now
        let touched = try writing { db -> Set<DocumentKey> in
            let meta = try Self.meta(db, "cursor, resyncing")
            let startsResync = (meta[0] as String?) == nil
            let resyncing = startsResync || meta[1] as Bool
            if startsResync { try db.execute(sql: "DELETE FROM resync_seen") }
            var touched: Set<DocumentKey> = []
            for document in response.changes {
                try storeBase(db, document)
                let key = DocumentKey(collection: document.collection, id: document.id)
                touched.insert(key)
                if resyncing {
                    try db.cachedStatement(sql: "INSERT OR IGNORE INTO resync_seen (collection, id) VALUES (?, ?)")
                        .execute(arguments: [key.collection, key.id])
                }
            }
            if !response.hasMore {
                if let acknowledged = response.lastMutationIds[clientId] {
                    touched.formUnion(try Self.keys(db, "SELECT DISTINCT collection, doc_id FROM outbox WHERE id <= ?", [acknowledged]))
                    try db.execute(sql: "DELETE FROM outbox WHERE id <= ?", arguments: [acknowledged])
                }
                if resyncing {
                    let unseen = """
                        FROM base WHERE NOT EXISTS (
                            SELECT 1 FROM resync_seen s WHERE s.collection = base.collection AND s.id = base.id)
                        """
                    touched.formUnion(try Self.keys(db, "SELECT collection, id \(unseen)", []))
                    try db.execute(sql: "DELETE \(unseen)")
                    try db.execute(sql: "DELETE FROM resync_seen")
                }
            }
            let syncedAt: Double? = response.hasMore ? nil : now.timeIntervalSince1970
            try db.execute(
                sql: "UPDATE meta SET cursor = ?, resyncing = ?, last_sync_at = coalesce(?, last_sync_at)",
                arguments: [response.cursor, resyncing && response.hasMore, syncedAt])
            try recomputeVisible(db, touched)
            return touched
        }
        notify(.documents(touched))
        return touched
    }

    /// Forgets the cursor after a `410 resync_required`: the next pull starts from nothing and replaces the base.
    /// The outbox and the visible state stay.
    func resetForResync() throws {
        try writing { db in try db.execute(sql: "UPDATE meta SET cursor = NULL, resyncing = 0") }
    }

    // MARK: Base and visible

    /// Upserts the server's `document` into the base unless the base already holds a newer version of it.
    private func storeBase(_ db: Database, _ document: Document) throws {
        try db.cachedStatement(sql: """
            INSERT INTO base (collection, id, data, version, updated_at, deleted) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (collection, id) DO UPDATE SET data = excluded.data, version = excluded.version,
                updated_at = excluded.updated_at, deleted = excluded.deleted
            WHERE excluded.version >= base.version
            """).execute(arguments: [document.collection, document.id, Data(document.data.bytes), document.version,
                                     document.updatedAt.timeIntervalSince1970, document.deleted])
    }

    /// Folds an applied mutation into the base at the server's `version`. A patch of a document the base lacks is
    /// left to the next pull (its other fields are unknown here).
    private func applyToBase(_ db: Database, _ mutation: SyncMutation, key: DocumentKey, version: Int64, at now: Date) throws {
        let current = try liveBase(db, key)
        if mutation.op == .patch, current == nil { return }
        let data = PendingFold.apply(mutation.op, mutation.data, to: current?.data)
        try storeBase(db, Document(id: key.id, collection: key.collection, data: data ?? .object([:]), version: version,
                                   updatedAt: now, deleted: data == nil))
    }

    /// Recomputes the visible row of each of `keys`: its live base with its outbox mutations applied in id order.
    func recomputeVisible(_ db: Database, _ keys: Set<DocumentKey>) throws {
        let pendingStatement = try db.cachedStatement(sql: "SELECT op, data FROM outbox WHERE collection = ? AND doc_id = ? ORDER BY id")
        for key in keys {
            let base = try liveBase(db, key)
            var data = base?.data
            var pending = false
            let rows = try Row.fetchCursor(pendingStatement, arguments: [key.collection, key.id])
            while let row = try rows.next() {
                pending = true
                guard let op = SyncOperation(rawValue: row[0]) else { continue }
                data = PendingFold.apply(op, try (row[1] as Data?).map(Self.json), to: data)
            }
            try storeVisible(db, key, data.map {
                LocalDocument(key: key, data: $0, version: base?.version ?? 0, updatedAt: base?.updatedAt, pending: pending)
            })
        }
    }

    private static func keys(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> [DocumentKey] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).map { DocumentKey(collection: $0[0], id: $0[1]) }
    }
}
