import NIOCore
import NIOPosix
import PostgresNIO
import TallyStore

/// What went wrong in PostgreSQL, without the values involved: the `underlying` error of a ``StoreError``
/// from ``PostgresStore``. Server messages and details are left out on purpose (they quote emails,
/// hashes and tokens), so this is safe to log.
public struct PostgresFailure: Error, Sendable, CustomStringConvertible {
    /// The kind of failure: a PostgresNIO error code (`server`, `connectionError`, ...) or the store's own.
    public var kind: String
    /// The SQLSTATE the server reported, for server errors.
    public var sqlState: String?
    /// The violated constraint, for constraint violations.
    public var constraint: String?
    /// The table involved, when the server named one.
    public var table: String?
    /// Why a connection failed or broke (`connectionError`): the socket's error — a refused or timed-out connect,
    /// a reset — which names no value.
    public var cause: String?

    /// Creates a failure.
    public init(kind: String, sqlState: String? = nil, constraint: String? = nil, table: String? = nil, cause: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.constraint = constraint
        self.table = table
        self.cause = cause
    }

    /// Any error met while talking to PostgreSQL, without its values: a server error's SQLSTATE, a
    /// PostgresNIO error's code, or the error's type.
    public init(_ error: any Error) {
        switch error {
        case let error as PSQLError:
            let info = error.serverInfo
            let cause = error.code == .connectionError ? error.underlying.map(Self.cause) : nil
            self.init(
                kind: "\(error.code)", sqlState: info?[.sqlState], constraint: info?[.constraintName], table: info?[.tableName],
                cause: cause)
        case let error as PostgresFailure:
            self = error
        default:
            self.init(kind: "\(type(of: error))")
        }
    }

    /// The failure without values: kind, SQLSTATE, table and constraint names.
    public var description: String {
        var parts = ["PostgresFailure(\(kind)"]
        if let sqlState { parts.append("sqlstate \(sqlState)") }
        if let table { parts.append("table \(table)") }
        if let constraint { parts.append("constraint \(constraint)") }
        if let cause { parts.append("cause \(cause)") }
        return parts.joined(separator: ", ") + ")"
    }

    /// A connection's failure as the socket layer reports it (an errno or a timeout; of a failed connect, each
    /// address's error without the address); any other error by its type alone.
    static func cause(_ error: any Error) -> String {
        switch error {
        case let error as IOError: return "\(error)"
        case let error as ChannelError: return "\(error)"
        case let error as NIOConnectionError: return error.connectionErrors.map { "\($0.error)" }.joined(separator: "; ")
        default: return "\(type(of: error))"
        }
    }
}

/// Internal signal: the transaction read something that changed under it (an idempotency key committed
/// by another instance, a wallet moved); rolling back and running it again gives the right answer.
struct RetryTransaction: Error {}

/// Internal wrapper for an error thrown by the caller's `render`: passed through as is, never mapped.
struct CallerError: Error {
    let error: any Error
}

/// How the store reacts to an error thrown while talking to PostgreSQL.
enum ErrorDisposition {
    /// Report this error (already a ``StoreError`` or the caller's own error).
    case fail(any Error)
    /// Roll back and run the whole unit again (serialization failure, deadlock, a key stored meanwhile, ``RetryTransaction``).
    case retry(any Error)
}

extension ErrorDisposition {
    /// Maps anything PostgresNIO or the store's closures threw.
    static func classify(_ error: any Error) -> ErrorDisposition {
        switch error {
        case let error as StoreError:
            return .fail(error)
        case let error as CallerError:
            return .fail(error.error)
        case is CancellationError:
            return .fail(error)
        case is RetryTransaction:
            return .retry(StoreError(.unavailable, underlying: PostgresFailure(kind: "conflict")))
        case let error as PostgresTransactionError:
            // The closure's error first: a failed ROLLBACK after it changes nothing for the caller.
            if let inner = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError {
                return classify(inner)
            }
            return .fail(StoreError(.unavailable, underlying: PostgresFailure(kind: "transaction")))
        case let error as PSQLError:
            return classify(error)
        case let error as PostgresDecodingError:
            return .fail(StoreError(.unavailable, underlying: PostgresFailure(kind: "decoding \(error.code)")))
        case let error as PostgresFailure:
            return .fail(StoreError(.unavailable, underlying: error))
        case let error as PoolFailure:
            // The database is down, or no connection freed up in time: 503, retry later.
            return .fail(StoreError(.unavailable, underlying: PostgresFailure(kind: "pool \(error)")))
        default:
            // Pool and channel errors: the database cannot be reached.
            return .fail(StoreError(.unavailable, underlying: PostgresFailure(kind: "\(type(of: error))")))
        }
    }

    private static func classify(_ error: PSQLError) -> ErrorDisposition {
        guard error.code == .server, let info = error.serverInfo, let sqlState = info[.sqlState] else {
            return .fail(StoreError(.unavailable, underlying: PostgresFailure(kind: "\(error.code)")))
        }
        let failure = PostgresFailure(
            kind: "server", sqlState: sqlState, constraint: info[.constraintName], table: info[.tableName])
        switch sqlState {
        case "40001", "40P01":
            // serialization_failure, deadlock_detected: the transaction can simply run again.
            return .retry(StoreError(.unavailable, underlying: failure))
        case "26000", "42P05":
            // A named statement missing from the server session, or there already (a transaction pooler): the
            // statement never ran, and its connection is replaced (``PooledConnection/execute(_:logger:)``), so
            // the unit runs again on another.
            return .retry(StoreError(.unavailable, underlying: failure))
        case "23505" where failure.constraint == "idempotency_keys_pkey":
            // Another instance stored the key meanwhile (``Writes/remember(from:)``): run again, and the read
            // that claims the key finds its response.
            return .retry(StoreError(.unavailable, underlying: failure))
        case "23505" where failure.constraint.map(Self.purchaseOnce.contains) == true:
            // A transaction credited, refunded or reversed meanwhile (the purchase lock makes this a backstop): run
            // again, and the plan reads it done.
            return .retry(StoreError(.unavailable, underlying: failure))
        case _ where sqlState.hasPrefix("23"), _ where sqlState.hasPrefix("22"):
            // Integrity constraint violations, and data exceptions (a NUL byte in text, a number out of range):
            // the input was refused.
            return .fail(StoreError(.invalidInput, underlying: failure))
        default:
            return .fail(StoreError(.unavailable, underlying: failure))
        }
    }
}

extension ErrorDisposition {
    /// The unique indexes that hold a transaction to one credit, one refund and one reversal.
    static let purchaseOnce: Set<String> = ["ledger_entries_purchase_once", "ledger_entries_refund_once", "ledger_entries_reversal_once"]
}

extension StoreError {
    /// Whether this is the refusal of a value by the named constraint.
    func violates(_ constraint: String) -> Bool {
        code == .invalidInput && (underlying as? PostgresFailure)?.constraint == constraint
    }
}
