import Foundation
import Logging
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import TallyAPI
import TallyStore

/// The scale-out store: PostgreSQL through PostgresNIO connections in a ``PostgresPool``. Several server
/// processes may share one database. A ledger command (an action, a grant, a hold) holds no lock while it
/// plans: it reads the account (or takes it as this process last wrote it), plans, and writes in one
/// statement that moves the wallet only if its row is still the version planned from, a compare-and-set
/// (``performOptimistically(_:idempotency:now:render:)``, `PostgresStore+CompareAndSet.swift`). Only a
/// command whose write loses after a fresh read (contention across processes), one with an expired hold to
/// release, and profile changes take the locking path, a transaction that queues on the wallet's row lock
/// (``executeLocked(_:idempotency:now:render:)``, `PostgresStore+Commands.swift`). Either way each command
/// is planned from the books exactly as the previous one left them.
///
/// The pool does nothing until it runs: run the store (it is a `Service`) in the server's `ServiceGroup`,
/// then call ``migrate()``. While the database is unreachable every call fails at once with
/// `StoreError(.unavailable)`, and the store recovers by itself when the database returns.
public final class PostgresStore: TallyStorage {
    /// The connection pool, run by ``run()``.
    public let pool: PostgresPool
    let logger: Logger
    /// The accounts this process wrote last: a hint that saves an action its read.
    let accounts = AccountCache()
    /// One optimistic action per account at a time in this process.
    let gate = AccountGate()
    /// Sends the optimistic actions' writes that wait at the same time as one statement.
    let ledgerWrites = StatementBatcher<ActionWrite, ActionWritten>()
    /// Sends the wallet reads that wait at the same time as one statement.
    let walletReads = StatementBatcher<WalletRead, WalletReadResult>()
    /// Sends the account reads (of commands and quota reads) that wait at the same time as one statement.
    let accountReads = StatementBatcher<AccountRead, AccountReadResult>()
    /// Sends the change-counter reads of range queries that wait at the same time as one statement.
    let documentVersionReads = StatementBatcher<String, Int64>()
    /// Sends the purchase replays (a consumable submitted again by its account) that wait at the same time as one statement.
    let purchaseReplays = StatementBatcher<ReplayRead, ReplayReadResult>()
    /// Range-query pages, stamped with the user's change counter they were read at (they read ``pageReads``, and
    /// need no forgetting: see there).
    let pages = DocumentPageCache()
    /// Sessions found live, trusted while the revocation feed is fresh; forgotten as this process's committed writes
    /// say (``forget(_:)``), and as the feed lists other processes' revocations.
    let sessions: LiveSessions
    /// How many times each declared write ran (``PostgresWrite``): what the property tests read.
    let declarationsRun = DeclarationCounter()
    /// What the revocation poller and the conflict backoff sleep on.
    let clock: any TallyClock
    /// Where migrations connect, when not through the pool (``directConnection``).
    let direct: PostgresConnection.Configuration?

    /// How far back each poll of the revocation feed reads, on the database's clock: far longer than any
    /// revoking transaction takes to commit, so none is missed.
    static let revocationWindow: Duration = .seconds(60)
    /// How long revocation-feed rows are kept before ``purge(idempotencyBefore:signupsBefore:)`` deletes them.
    static let revocationRetentionMillis: Int64 = 3_600_000
    /// How often the revocation feed is polled (``LiveSessions/staleness`` is three of these).
    static let revocationPollInterval: TimeInterval = 1

    /// The pool size of a store opened directly with ``init(url:maximumConnections:statements:directURL:logger:)`` (tests, tools). A
    /// server's pool is `TALLY_POSTGRES_POOL`, ``PostgresPool/Configuration/defaultSize`` (8) unless set.
    public static let defaultMaximumConnections = 20

    /// How many times a unit of work runs before a deadlock or a conflict is reported as `.unavailable`.
    static let maxAttempts = 5

    /// Creates a store on `configuration` (``configuration(url:maximumConnections:)`` parses a URL).
    /// `clock` paces the revocation poller and the pause before a transaction runs again after a conflict
    /// (its `now` is not read: every command is given its time). `direct`, when given, is where migrations
    /// connect instead of the pool (a URL that reaches PostgreSQL itself or a pooler in session mode, while the
    /// pool goes through a transaction pooler); see ``directConnection``.
    public convenience init(
        configuration: PostgresPool.Configuration, direct: PostgresConnection.Configuration? = nil, logger: Logger,
        clock: any TallyClock = SystemClock()
    ) {
        self.init(configuration: configuration, direct: direct, logger: logger, sessionStaleness: .seconds(3), clock: clock)
    }

    /// Creates a store whose live sessions are trusted `sessionStaleness` after the last successful poll
    /// (tests make it long, so that their assertions do not depend on how fast a loaded machine runs them).
    init(
        configuration: PostgresPool.Configuration, direct: PostgresConnection.Configuration? = nil, logger: Logger,
        sessionStaleness: Duration, clock: any TallyClock = SystemClock()
    ) {
        self.logger = Self.driverLogger(logger)
        self.clock = clock
        // No start-up parameter beyond PostgreSQL's own: a pooler refuses the ones it does not know
        // (PgBouncer: "unsupported startup parameter"). The generic plans the hot statements need are the role's
        // setting instead, made by ``migrate()`` (``preferGenericPlans(on:)``).
        self.pool = PostgresPool(configuration: configuration, logger: self.logger)
        self.direct = direct
        self.sessions = LiveSessions(staleness: sessionStaleness)
    }

    /// Creates a store from a `postgres://user:password@host:port/database` URL (see
    /// ``configuration(url:maximumConnections:)``) with a pool of `maximumConnections` that sends its named
    /// statements as `statements` says; migrations connect to `directURL` when given (see ``directConnection``).
    public convenience init(
        url: String, maximumConnections: Int = PostgresStore.defaultMaximumConnections, statements: PostgresStatements = .prepared,
        directURL: String? = nil, logger: Logger
    ) throws {
        var configuration = try Self.configuration(url: url, maximumConnections: maximumConnections)
        configuration.statements = statements
        let direct = try directURL.map { try Self.configuration(url: $0, maximumConnections: 1).connection }
        self.init(configuration: configuration, direct: direct, logger: logger)
    }

    /// Where a connection that needs a session of its own connects — migrations here, the event listener's
    /// `LISTEN` (``PostgresNotifications``) —: the direct configuration given at creation, else the pool's.
    public var directConnection: PostgresConnection.Configuration { direct ?? pool.configuration.connection }

    /// Parses `postgres://` or `postgresql://` URLs: user, password, host, port (5432) and database
    /// (default: the user), into a pool that keeps `maximumConnections` open. As in libpq, a `host` query
    /// parameter that is a directory (`postgres://tally@/tally?host=/run/postgresql`) connects through the
    /// Unix socket `<directory>/.s.PGSQL.<port>` instead of TCP. TLS is not used: `sslmode` may be absent,
    /// `disable`, `allow` or `prefer`.
    public static func configuration(
        url: String, maximumConnections: Int = PostgresStore.defaultMaximumConnections
    ) throws -> PostgresPool.Configuration {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql"
        else { throw PostgresURLError("expected postgres://user:password@host:port/database") }
        let queryItems = components.queryItems ?? []
        let socketDirectory = queryItems.last { $0.name == "host" }?.value
        if let socketDirectory, !socketDirectory.hasPrefix("/") {
            throw PostgresURLError("the host parameter must be an absolute socket directory")
        }
        var host = components.host ?? ""
        guard !host.isEmpty || socketDirectory != nil else { throw PostgresURLError("the URL has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard let username = components.user, !username.isEmpty else { throw PostgresURLError("the URL has no user") }
        let port = components.port ?? 5432
        guard (1...65_535).contains(port) else { throw PostgresURLError("the port is out of range") }
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        guard !database.contains("/") else { throw PostgresURLError("the database name contains '/'") }
        for item in queryItems where item.name == "sslmode" {
            switch item.value ?? "" {
            case "disable", "allow", "prefer": break
            default: throw PostgresURLError("sslmode '\(item.value ?? "")' is not supported: TLS is disabled")
            }
        }
        guard maximumConnections >= 1 else { throw PostgresURLError("maximumConnections must be at least 1") }
        let name = database.isEmpty ? username : database
        var connection =
            if let socketDirectory {
                PostgresConnection.Configuration(
                    unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: username,
                    password: components.password, database: name)
            } else {
                PostgresConnection.Configuration(
                    host: host, port: port, username: username, password: components.password, database: name,
                    tls: .disable)
            }
        // A database that does not answer a connect is down: give up on the attempt soon (the slot tries again).
        connection.options.connectTimeout = .seconds(3)
        // The pool opens all its connections at start and keeps them, and sends no keep-alive queries and
        // sets no per-lease timers (PostgresNIO's pool's timers were 4 % of the server's CPU, benchmarks/postgres-levers.md,
        // "2026-11-23, the pool's timers"). A connection the network drops silently is found at its next use.
        return PostgresPool.Configuration(connection: connection, size: maximumConnections)
    }

    /// `logger` for PostgresNIO, which at `trace` writes every message it sends and receives: bound
    /// parameters and data rows, i.e. password hashes, emails and token hashes. It never logs below `debug`
    /// here, whatever `LOG_LEVEL` says (its debug lines carry no values: its errors describe themselves redacted).
    static func driverLogger(_ logger: Logger) -> Logger {
        var logger = logger
        if logger.logLevel < .debug { logger.logLevel = .debug }
        return logger
    }

    // MARK: Running queries

    /// Runs `body` in one transaction on a pooled connection; runs it again (up to ``maxAttempts``) after a
    /// deadlock, a serialization failure or a ``RetryTransaction``, and maps errors to ``StoreError``. The declared
    /// writes `body` runs note their changes in the transaction (``TransactionChanges``); once it commits, this
    /// process's caches forget what they say (``forget(_:)``), and after a rollback nothing.
    func transaction<T: Sendable>(_ body: (PooledConnection) async throws -> T) async throws -> T {
        try await retrying {
            try await pool.withTransaction(logger: logger, committed: { self.forget($0) }) { connection in try await body(connection) }
        }
    }

    /// Runs `body` in one transaction for a migration: on a connection of its own to ``directConnection`` when
    /// the store was given one (a transaction pooler may sit in front of the pool), else like ``transaction(_:)``.
    func migrationTransaction<T: Sendable>(_ body: (PooledConnection) async throws -> T) async throws -> T {
        guard let direct else { return try await transaction(body) }
        return try await retrying {
            let connected = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: direct, id: 0, logger: logger
            ).get()
            let connection = PooledConnection(connection: connected, watch: ConnectionWatch())
            connected.closeFuture.whenComplete { _ in connection.watch.closed() }
            defer { connected.close().whenComplete { _ in } }
            return try await connection.transaction(logger: logger, committed: { self.forget($0) }, body)
        }
    }

    /// Makes the role's new sessions plan the store's statements generically, once: called in the migration's
    /// transaction (under its lock). Returns whether the pool's connections must be replaced
    /// (``PostgresPool/retireConnections()``): when the setting was made now, and also when the migration's own
    /// session already starts with it — another process may have made it a moment ago, after this pool's other
    /// connections were opened (they would plan as `auto` for their whole life). At start-up that is a connection
    /// or two opened again, once.
    ///
    /// The hot statements are prepared once per connection. Left to choose (`plan_cache_mode = auto`), PostgreSQL
    /// plans them afresh on every call as long as a plan for the actual values looks cheaper than the generic
    /// one — and for the action read (a NULL key or hold lets it drop a join) it always does: planning then cost
    /// three times the statement's execution. Their generic plans are the same index lookups
    /// (benchmarks/postgres-levers.md, "2026-11-23 morning"). This was a start-up parameter, which poolers
    /// refuse; a role may set its own defaults (`ALTER ROLE CURRENT_USER SET`), which apply to every session it
    /// starts afterwards, through a pooler too. A setting other than `auto` (an operator's choice) is left alone,
    /// and a role that may not change it is logged and served with PostgreSQL's default.
    func preferGenericPlans(on connection: PooledConnection) async throws -> Bool {
        let mode: String = try await connection.rows("SELECT current_setting('plan_cache_mode') AS mode", logger: logger)
            .first.map { try Columns($0)["mode"] } ?? "auto"
        guard mode == "auto" else { return mode == "force_generic_plan" }
        try await connection.rows("SAVEPOINT tally_plan_cache_mode", logger: logger)
        do {
            try await connection.rows("ALTER ROLE CURRENT_USER SET plan_cache_mode = force_generic_plan", logger: logger)
        } catch {
            try await connection.rows("ROLLBACK TO SAVEPOINT tally_plan_cache_mode", logger: logger)
            // Two processes (or stores) setting it at once: the second's ALTER ROLE fails (XX000, "tuple concurrently
            // updated") once the first commits. The setting is there then, and this pool's sessions predate it.
            if try await Self.roleSetsGenericPlans(connection, logger: logger) { return true }
            logger.warning(
                "postgres: could not set the role's plan_cache_mode to force_generic_plan (each call of a hot statement is planned again: about 40 % more database CPU)",
                metadata: ["error": "\(PostgresFailure(error))"])
            return false
        }
        try await connection.rows("RELEASE SAVEPOINT tally_plan_cache_mode", logger: logger)
        logger.notice("postgres: the role's new sessions plan statements generically (plan_cache_mode = force_generic_plan); reopening the pool's connections")
        return true
    }

    /// Whether the role's own defaults (for every database) include `plan_cache_mode = force_generic_plan`, as
    /// committed now (each statement of a READ COMMITTED transaction sees the latest commits).
    private static func roleSetsGenericPlans(_ connection: PooledConnection, logger: Logger) async throws -> Bool {
        let rows = try await connection.rows(
            """
            SELECT count(*) AS found FROM pg_db_role_setting
            WHERE setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND setdatabase = 0
              AND 'plan_cache_mode=force_generic_plan' = ANY(setconfig)
            """, logger: logger)
        let found: Int64 = try rows.first.map { try Columns($0)["found"] } ?? 0
        return found > 0
    }

    /// Runs one statement on its own (committed when it returns) and collects its rows.
    @discardableResult
    public func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await retrying { try await pool.withConnection { try await $0.rows(query, logger: logger) } }
    }

    /// Runs `work` again (up to ``maxAttempts``, after a short random pause: ``backoffDelay(attempt:first:maximum:unit:)``
    /// from 8 ms) when it failed on a conflict.
    func retrying<T>(_ work: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await work()
            } catch {
                switch ErrorDisposition.classify(error) {
                case .fail(let error):
                    throw error
                case .retry(let error):
                    guard attempt < Self.maxAttempts else { throw error }
                    logger.debug("postgres: running a transaction again after a conflict", metadata: ["attempt": "\(attempt)"])
                    try await clock.sleep(for: backoffDelay(attempt: attempt, first: 0.008, maximum: 0.064, unit: .random(in: 0..<1)))
                    attempt += 1
                }
            }
        }
    }
}

extension PostgresStore: Service {
    /// Runs the connection pool and, beside it, polls the revocation feed, until the task is cancelled or
    /// the service group shuts down gracefully.
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.pool.run() }
            group.addTask { await self.followRevocations() }
        }
    }

    /// Polls the revocation feed every ``revocationPollInterval``. A failed poll (the schema not migrated
    /// yet, the database down) only leaves the cache stale, so lookups go to the database.
    func followRevocations() async {
        await clock.repeatPolling(every: Self.revocationPollInterval, logger: logger, warning: "postgres: the revocation feed keeps failing") {
            try await pollRevocations()
        }
    }
}

/// A database URL that cannot be used. The description never contains the password.
public struct PostgresURLError: Error, Sendable, CustomStringConvertible {
    /// What is wrong with the URL.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = "invalid database URL: " + description }
}
