import Foundation
import PostgresNIO
import TallyStore

// Named prepared statements of a document write (``DocumentWriter``): every PUT, DELETE and push runs them, so
// each connection parses and plans them once. Planned on every call they cost PostgreSQL about twice their
// execution (1.5 ms of planning against 0.7 ms per write, `pg_stat_statements` under `tally bench-events`).
//
// Every parameter carries an explicit cast (see `PostgresActionStatements.swift`), and each per-address lookup
// is a `LIMIT 1` lateral subquery, so the generic plan stays an index probe per address whatever the planner
// guesses of `unnest`.

/// Locks the user's `sync_state` row, creating it on the user's first write: `WHERE false` updates nothing,
/// but the conflicting row is locked all the same. No row: the user does not exist.
struct SyncStateLockStatement: PostgresPreparedStatement {
    static let name = "tally_sync_state_lock_v1"
    static let sql = """
        INSERT INTO sync_state (user_id, version, purged_through) SELECT id, 0, 0 FROM users WHERE id = $1::TEXT
        ON CONFLICT (user_id) DO UPDATE SET version = sync_state.version WHERE false
        """
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
    static let sql = """
        WITH claimed AS (
          INSERT INTO sync_clients (client_id, user_id, last_mutation_id, updated_at)
          SELECT $2::TEXT, user_id, 0, $4::BIGINT FROM sync_state WHERE user_id = $1::TEXT AND $3::BOOLEAN
            AND (SELECT count(*) FROM sync_clients WHERE user_id = $1::TEXT) < $5::BIGINT
          ON CONFLICT (client_id) DO NOTHING
          RETURNING user_id, last_mutation_id
        )
        SELECT 'state'::TEXT AS part, s.version AS user_version, s.stored_documents, s.stored_bytes,
               c.user_id AS client_user_id, c.last_mutation_id AS client_last_mutation_id,
               NULL::TEXT AS collection, NULL::TEXT AS id, NULL::TEXT AS data, NULL::TEXT AS range_value,
               NULL::BIGINT AS version, NULL::BIGINT AS updated_at, NULL::BOOLEAN AS deleted
        FROM sync_state s
        LEFT JOIN LATERAL (
          SELECT user_id, last_mutation_id FROM claimed
          UNION ALL
          SELECT user_id, last_mutation_id FROM sync_clients WHERE client_id = $2::TEXT AND $3::BOOLEAN
          LIMIT 1
        ) c ON true
        WHERE s.user_id = $1::TEXT AND NOT EXISTS (SELECT 1 FROM users m WHERE m.id = $1::TEXT AND m.merged_into IS NOT NULL)
        UNION ALL
        SELECT 'document'::TEXT, NULL, NULL, NULL, NULL, NULL, d.collection, d.id, d.data, d.range_value, d.version,
               d.updated_at, d.deleted
        FROM unnest($6::TEXT[], $7::TEXT[]) AS k(collection, id)
        CROSS JOIN LATERAL (
          SELECT collection, id, data, range_value, version, updated_at, deleted FROM documents
          WHERE user_id = $1::TEXT AND collection = k.collection AND id = k.id LIMIT 1
        ) d
        UNION ALL
        SELECT 'count'::TEXT, NULL, NULL, NULL, NULL, NULL, c.collection, NULL, NULL, NULL, n.live, NULL, NULL
        FROM (
          SELECT DISTINCT p.collection FROM unnest($8::TEXT[], $9::TEXT[]) AS p(collection, id)
          WHERE NOT EXISTS (
            SELECT 1 FROM documents WHERE user_id = $1::TEXT AND collection = p.collection AND id = p.id AND NOT deleted
          )
        ) c
        CROSS JOIN LATERAL (
          SELECT count(*) AS live FROM documents WHERE user_id = $1::TEXT AND collection = c.collection AND NOT deleted
        ) n
        """
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
    static let sql = """
        WITH b AS (
          SELECT * FROM unnest($3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::BOOLEAN[], $8::BIGINT[], $9::BOOLEAN[])
            AS b(collection, id, data, range_value, has_range, version, deleted)
        ), written AS (
          INSERT INTO documents AS d (user_id, collection, id, data, range_value, version, updated_at, deleted)
          SELECT $1::TEXT, b.collection, b.id, b.data, CASE WHEN b.has_range THEN b.range_value END, b.version,
                 $2::BIGINT, b.deleted
          FROM b
          ON CONFLICT (user_id, collection, id) DO UPDATE
          SET data = excluded.data, range_value = excluded.range_value, version = excluded.version,
              updated_at = excluded.updated_at, deleted = excluded.deleted
          WHERE d.version < excluded.version
          RETURNING 1
        ), counted AS (
          UPDATE sync_state SET version = $10::BIGINT, stored_documents = $11::BIGINT, stored_bytes = $12::BIGINT
          WHERE user_id = $1::TEXT AND version = $13::BIGINT RETURNING 1
        ), client AS (
          UPDATE sync_clients SET last_mutation_id = $14::BIGINT, updated_at = $2::BIGINT
          WHERE client_id = $15::TEXT AND user_id = $1::TEXT AND $16::BOOLEAN
          RETURNING 1
        )
        SELECT (SELECT count(*) FROM written) AS written, (SELECT count(*) FROM counted) AS counted,
               (SELECT count(*) FROM client) AS client
        """
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
