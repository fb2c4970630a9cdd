import Foundation
import PostgresNIO
import TallyStore

// Named prepared statements of a document write (``DocumentWriter``): every PUT, DELETE and push runs them, so
// each connection parses and plans them once. The texts of those that write are declared in ``Writes``
// (`PostgresWriteDeclarations+Documents.swift`), and ``DocumentWriter`` notes what they change. Planned on every call they cost PostgreSQL about twice their
// execution (1.5 ms of planning against 0.7 ms per write, `pg_stat_statements` under `tally bench-events`).
//
// Every parameter carries an explicit cast (see `PostgresActionStatements.swift`), and each per-address lookup
// is a `LIMIT 1` lateral subquery, so the generic plan stays an index probe per address whatever the planner
// guesses of `unnest`.

/// Locks the user's `sync_state` row, creating it on the user's first write: `WHERE false` updates nothing,
/// but the conflicting row is locked all the same. No row: the user does not exist.
struct SyncStateLockStatement: PostgresPreparedStatement {
    static let name = "tally_sync_state_lock_v1"
    static let sql = Writes.lockSyncState.sql
    typealias Row = PostgresRow

    var userId: String

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(userId)
        return bindings
    }
}

/// What a document write plans from, read under the sync state's lock: a `state` row (the user's version and
/// usage, and the sync client: claimed for the user now when new and within `clientIds`, or as stored), a
/// `document` row per document stored at the addresses, and a `count` row (its `collection`, and the live
/// documents in `version`) per collection a put may create a document in — one of the `puts` has no live
/// document — which saves a create the round trip of ``LiveDocumentCountStatement``. No `state` row: no sync
/// state, or a guest merged into an account.
struct DocumentWriterReadStatement: PostgresPreparedStatement {
    static let name = "tally_document_writer_read_v1"
    static let sql = Writes.documentWriterRead.sql
    typealias Row = PostgresRow

    var userId: String
    /// The sync client to claim or read (`nil`: a write without one).
    var clientId: String?
    var now: Date
    var clientIds: Int
    var addresses: [DocumentAddress]
    /// The addresses of the puts among them.
    var puts: [DocumentAddress]

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 9)
        bindings.append(userId)
        bindings.append(clientId ?? "")
        bindings.append(clientId != nil)
        bindings.append(now.millis)
        bindings.append(Int64(clientIds))
        bindings.append(addresses.map(\.collection))
        bindings.append(addresses.map(\.id))
        bindings.append(puts.map(\.collection))
        bindings.append(puts.map(\.id))
        return bindings
    }
}

/// A collection's live documents for one user, as stored.
struct LiveDocumentCountStatement: PostgresPreparedStatement {
    static let name = "tally_live_document_count_v1"
    static let sql = "SELECT count(*) AS live FROM documents WHERE user_id = $1::TEXT AND collection = $2::TEXT AND NOT deleted"
    typealias Row = PostgresRow

    var userId: String
    var collection: String

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(userId)
        bindings.append(collection)
        return bindings
    }
}

/// A document write's end, in one statement: every document's final state (a document already at a later
/// version is left alone), the user's new version and usage (only from the version read: `counted` is 0 if
/// something else moved it), and, when it moved, the client's last mutation id. One row: how many of each it
/// wrote.
struct DocumentWriterFinishStatement: PostgresPreparedStatement {
    static let name = "tally_document_writer_finish_v1"
    static let sql = Writes.documentWriterFinish.sql
    typealias Row = PostgresRow

    var userId: String
    var now: Date
    /// The documents' final states, in version order.
    var records: [DocumentRecord]
    /// The user's new version and usage.
    var version: Int64
    var usage: SyncUsage
    /// The user's version as read.
    var base: Int64
    var clientId: String?
    var lastMutationId: Int64
    var clientMoved: Bool

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 16)
        bindings.append(userId)
        bindings.append(now.millis)
        bindings.append(records.map(\.collection))
        bindings.append(records.map(\.id))
        bindings.append(records.map { String(decoding: $0.data, as: UTF8.self) })
        bindings.append(records.map { $0.rangeValue ?? "" })
        bindings.append(records.map { $0.rangeValue != nil })
        bindings.append(records.map(\.version))
        bindings.append(records.map(\.deleted))
        bindings.append(version)
        bindings.append(usage.documents)
        bindings.append(usage.bytes)
        bindings.append(base)
        bindings.append(lastMutationId)
        bindings.append(clientId ?? "")
        bindings.append(clientMoved)
        return bindings
    }
}
