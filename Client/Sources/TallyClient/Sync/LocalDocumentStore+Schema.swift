import GRDB

extension LocalDocumentStore {
    /// The store's tables. Invariants live here: an outbox id is never reused (AUTOINCREMENT), a delete carries no
    /// data and everything else does, meta has exactly one row with a 32-character clientId.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // The server's state. Tombstones stay (deleted = 1) so a late, older pulled state cannot resurrect a
            // document: a row only moves to a newer or equal version.
            try db.execute(sql: """
                CREATE TABLE base (
                    collection TEXT NOT NULL,
                    id TEXT NOT NULL,
                    data BLOB NOT NULL,
                    version INTEGER NOT NULL CHECK (version > 0),
                    updated_at REAL NOT NULL,
                    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
                    PRIMARY KEY (collection, id)
                ) WITHOUT ROWID;
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    op TEXT NOT NULL CHECK (op IN ('put', 'patch', 'delete')),
                    collection TEXT NOT NULL,
                    doc_id TEXT NOT NULL,
                    data BLOB,
                    if_version INTEGER CHECK (if_version >= 0),
                    created REAL NOT NULL,
                    CHECK ((op = 'delete') = (data IS NULL))
                );
                CREATE INDEX outbox_document ON outbox (collection, doc_id, id);
                CREATE TABLE visible (
                    collection TEXT NOT NULL,
                    id TEXT NOT NULL,
                    data BLOB NOT NULL,
                    version INTEGER NOT NULL CHECK (version >= 0),
                    updated_at REAL,
                    range_value TEXT,
                    pending INTEGER NOT NULL CHECK (pending IN (0, 1)),
                    PRIMARY KEY (collection, id)
                ) WITHOUT ROWID;
                CREATE INDEX visible_range ON visible (collection, range_value, id);
                CREATE TABLE meta (
                    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                    client_id TEXT NOT NULL CHECK (length(client_id) = 32),
                    cursor TEXT,
                    last_sync_at REAL,
                    resyncing INTEGER NOT NULL DEFAULT 0 CHECK (resyncing IN (0, 1))
                );
                CREATE TABLE resync_seen (
                    collection TEXT NOT NULL,
                    id TEXT NOT NULL,
                    PRIMARY KEY (collection, id)
                ) WITHOUT ROWID;
                """)
            try db.execute(sql: "INSERT INTO meta (singleton, client_id) VALUES (1, ?)", arguments: [newClientId()])
        }
        return migrator
    }

    /// 32 random URL-safe characters: the installation's id for the server's exactly-once bookkeeping.
    static func newClientId() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var generator = SystemRandomNumberGenerator()
        return String(decoding: (0..<32).map { _ in alphabet[Int(generator.next(upperBound: UInt8(64)))] }, as: UTF8.self)
    }
}
