import Foundation
import PostgresNIO
import TallyStore

// Named prepared statements of the hottest reads besides the action's own (see
// `PostgresActionStatements.swift`): parsed and planned once per connection.

/// The wallet read of `GET /v1/wallet`: balance, held, version, and whether an open hold has expired.
struct WalletReadStatement: PostgresPreparedStatement {
    static let name = "tally_wallet_read_v1"
    static let sql = """
        SELECT balance, held, version,
               held > 0 AND EXISTS (
                 SELECT 1 FROM holds WHERE user_id = $1::TEXT AND status = 'open' AND expires_at <= $2::BIGINT)
        FROM wallets WHERE user_id = $1::TEXT
        """
    typealias Row = PostgresRow

    var userId: String
    var now: Date

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(userId)
        bindings.append(now.millis)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// The session check behind every authenticated request (every 5 s per token): the user of a live session.
struct SessionUserStatement: PostgresPreparedStatement {
    static let name = "tally_session_user_v1"
    static let sql = "SELECT user_id FROM sessions WHERE id = $1::TEXT AND revoked_at IS NULL"
    typealias Row = PostgresRow

    var sessionId: String

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(sessionId)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}
