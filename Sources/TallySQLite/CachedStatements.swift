import GRDB

/// Every statement of the hot paths is prepared once per connection and reused: preparing costs
/// more than running these one-row statements (parsing, and GRDB's authorizer that tracks regions).
extension Database {
    func fetchRow(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try Row.fetchOne(cachedStatement(sql: sql), arguments: arguments)
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
}
