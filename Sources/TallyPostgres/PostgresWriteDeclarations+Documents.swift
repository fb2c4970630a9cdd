import Foundation
import TallyStore

// The writes of documents and sync state (see ``Writes``); the statements of a document write are prepared
// (``DocumentWriterReadStatement``, ``DocumentWriterFinishStatement``), their texts declared here.
extension Writes {
    /// What a document write plans from, read under the sync state's lock, with the sync client claimed for the user
    /// when new (``DocumentWriterReadStatement``).
    static let documentWriterRead = PostgresWrite(
        StoreWrite(
            .syncClients,
            sql: """
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
                """), name: "documentWriterRead")

    /// A document write's end: every document's final state, the user's new version and usage, the client's last
    /// mutation id (``DocumentWriterFinishStatement``).
    static let documentWriterFinish = PostgresWrite(
        StoreWrite(
            .documents, .syncState, .syncClients,
            sql: """
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
                """), name: "documentWriterFinish")

    /// The oldest tombstones (up to `limit`) of the locked `users` deleted, each user's `purged_through` raised to the
    /// newest version deleted; returns how many.
    static func purgeTombstones(users: SQLParam, before: SQLParam, limit: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .documents, .syncState,
                sql: """
                    WITH purged AS (
                      DELETE FROM documents d
                      USING (
                        SELECT user_id, collection, id FROM documents
                        WHERE user_id = ANY(\(users)) AND deleted AND updated_at < \(before)
                        ORDER BY updated_at LIMIT \(limit)::BIGINT
                      ) t
                      WHERE d.user_id = t.user_id AND d.collection = t.collection AND d.id = t.id
                      RETURNING d.user_id, d.version
                    ), marked AS (
                      UPDATE sync_state s
                      SET purged_through = GREATEST(s.purged_through, p.version), stored_documents = s.stored_documents - p.count
                      FROM (SELECT user_id, max(version) AS version, count(*) AS count FROM purged GROUP BY user_id) p
                      WHERE s.user_id = p.user_id
                    )
                    SELECT count(*) AS purged FROM purged
                    """))
    }

    /// Up to `limit` sync clients idle since before `before` deleted, under their users' sync state locks.
    static func purgeClients(before: SQLParam, limit: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .syncClients,
                sql: """
                    WITH idle AS (
                      SELECT c.client_id FROM sync_clients c JOIN sync_state s ON s.user_id = c.user_id
                      WHERE c.updated_at < \(before)
                      ORDER BY c.updated_at LIMIT \(limit)
                      FOR UPDATE OF s SKIP LOCKED
                    ), purged AS (
                      DELETE FROM sync_clients c USING idle WHERE c.client_id = idle.client_id AND c.updated_at < \(before)
                      RETURNING 1
                    )
                    SELECT count(*) AS purged FROM purged
                    """))
    }
}
