import Foundation
import PostgresNIO
import TallyStore

// Named prepared statements of the hottest reads besides the action's own (see
// `PostgresActionStatements.swift`): parsed and planned once per connection.

/// The wallet reads of `GET /v1/wallet` that wait at the same time, as one statement: for each read (by its
/// position, from 1), the wallet's balance, held, version, and whether an open hold has expired by that
/// read's own `now`. A user without a wallet has no row.
///
/// The `LIMIT 1` keeps the wallet lookup a subquery run once per read, through the primary key: joined
/// instead, the planner may guess a hundred rows from `unnest` and scan every wallet.
struct WalletBatchReadStatement: PostgresPreparedStatement {
    static let name = "tally_wallet_batch_read_v1"
    static let sql = """
        SELECT r.i, w.balance, w.held, w.version,
               w.held > 0 AND EXISTS (
                 SELECT 1 FROM holds h WHERE h.user_id = r.user_id AND h.status = 'open' AND h.expires_at <= r.now)
        FROM unnest($1::TEXT[], $2::BIGINT[]) WITH ORDINALITY AS r(user_id, now, i),
        LATERAL (SELECT balance, held, version FROM wallets WHERE user_id = r.user_id LIMIT 1) w
        """
    typealias Row = PostgresRow

    var reads: [WalletRead]

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(reads.map(\.userId))
        bindings.append(reads.map(\.now.millis))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// Each read's wallet and whether it has an expired hold, by the reads' positions (`nil`: no wallet).
    func results(_ rows: [PostgresRow]) throws -> [WalletReadResult?] {
        var results = [WalletReadResult?](repeating: nil, count: reads.count)
        for row in rows {
            var cells = Cells(row)
            let position = Int(try cells.next(Int64.self)) - 1
            guard results.indices.contains(position) else { throw PostgresFailure(kind: "wallet read out of range") }
            let wallet = try WalletState(&cells)
            results[position] = WalletReadResult(wallet: wallet, hasExpiredHolds: try cells.next(Bool.self))
        }
        return results
    }
}

/// One wallet read waiting to be sent (``WalletBatchReadStatement``).
struct WalletRead: Sendable {
    var userId: String
    var now: Date
}

/// What one wallet read found.
struct WalletReadResult: Sendable {
    var wallet: WalletState
    /// An open hold has expired: the wallet must be read again after releasing it.
    var hasExpiredHolds: Bool
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
