import GRDB
import TallyStore

/// Every statement of the hot paths is prepared once per connection and reused: preparing costs
/// more than running these one-row statements (parsing, and GRDB's authorizer that tracks regions).
extension Database {
    func fetchRow(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try Row.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    /// The first row, decoded where it lies (``fetchRow(sql:arguments:)`` copies every column out first).
    func fetchFirst<T>(sql: String, arguments: StatementArguments, _ decode: (Row) throws -> T) throws -> T? {
        let cursor = try Row.fetchCursor(cachedStatement(sql: sql), arguments: arguments)
        return try withExtendedLifetime(cursor) { try cursor.next().map(decode) }
    }

    /// Every row, each decoded where it lies.
    func forEachRow(sql: String, arguments: StatementArguments, _ body: (Row) throws -> Void) throws {
        let cursor = try Row.fetchCursor(cachedStatement(sql: sql), arguments: arguments)
        while let row = try cursor.next() { try body(row) }
    }

    func fetchRows(sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try Row.fetchAll(cachedStatement(sql: sql), arguments: arguments)
    }

    func fetchValue<Value: DatabaseValueConvertible & StatementColumnConvertible>(
        _ type: Value.Type, sql: String, arguments: StatementArguments = StatementArguments()
    ) throws -> Value? {
        try Value.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    func fetchValues<Value: DatabaseValueConvertible & StatementColumnConvertible>(
        _ type: Value.Type, sql: String, arguments: StatementArguments = StatementArguments()
    ) throws -> [Value] {
        try Value.fetchAll(cachedStatement(sql: sql), arguments: arguments)
    }

    func run(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    // MARK: Declared writes: the only way the store writes

    /// Runs the declared `write` (``SQLiteWrites``), noting in the writer's open transaction that it changed `rows`
    /// (``WriterChanges``: what the caches forget as the transaction commits).
    func run(_ write: StoreWrite, changing rows: ChangedRows, arguments: StatementArguments = StatementArguments()) throws {
        WriterChanges.note(write, rows)
        try cachedStatement(sql: write.sql).execute(arguments: arguments)
    }

    /// Runs the declared `write`, noting that it changed each of `rows` (the sessions an update by account revokes,
    /// both accounts of a merge).
    func run(_ write: StoreWrite, changing rows: [ChangedRows], arguments: StatementArguments = StatementArguments()) throws {
        WriterChanges.note(write, rows)
        try cachedStatement(sql: write.sql).execute(arguments: arguments)
    }

    /// Runs the declared `RETURNING` write, noting that it changed `rows`, and decodes its first row where it lies.
    func fetchFirst<T>(
        _ write: StoreWrite, changing rows: ChangedRows, arguments: StatementArguments, _ decode: (Row) throws -> T
    ) throws -> T? {
        WriterChanges.note(write, rows)
        return try fetchFirst(sql: write.sql, arguments: arguments, decode)
    }
}
