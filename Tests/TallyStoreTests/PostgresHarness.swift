import Foundation
import Logging
import PostgresNIO
import TallyAPI
import TallyStore
import Testing

@testable import TallyPostgres

/// Limits how many PostgreSQL fixtures are open at once, so parallel tests stay under the server's
/// `max_connections` (each fixture has its own small pool).
private actor FixtureGate {
    private var available: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { available = count }

    func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty { available += 1 } else { waiters.removeFirst().resume() }
    }
}

private let gate = FixtureGate(4)

/// How a PostgreSQL store under test reaches the database.
enum PostgresRoute: String, Sendable {
    /// PostgreSQL itself (`TALLY_TEST_DATABASE_URL`), named statements prepared once per connection.
    case direct
    /// Through the PgBouncer `scripts/with-pgbouncer` starts in `pool_mode=transaction` (`TALLY_TEST_PGBOUNCER_URL`),
    /// as README's "Managed PostgreSQL and connection poolers" sets Tally up behind one: statements unnamed
    /// (`TALLY_POSTGRES_STATEMENTS=unnamed`), migrations on PostgreSQL itself (`TALLY_LISTEN_DATABASE_URL`).
    case pgbouncer

    /// The routes each PostgreSQL conformance case runs through: directly, then through PgBouncer when
    /// `TALLY_TEST_PGBOUNCER_URL` is set or `TALLY_REQUIRE_POSTGRES=1` (`scripts/test`: then a missing PgBouncer fails
    /// the case, see ``pgbouncerURL(sourceLocation:)``); elsewhere without PgBouncer that pass is left out.
    static var conformancePasses: [PostgresRoute] {
        let environment = ProcessInfo.processInfo.environment
        let provided = !(environment["TALLY_TEST_PGBOUNCER_URL"] ?? "").isEmpty
        return provided || environment["TALLY_REQUIRE_POSTGRES"] == "1" ? [.direct, .pgbouncer] : [.direct]
    }
}

/// Opens the PostgreSQL store named by `TALLY_TEST_DATABASE_URL` (``postgresURL(sourceLocation:)``: without it the
/// case is skipped, or fails under TALLY_REQUIRE_POSTGRES=1), runs it for the duration of `body` (cancelled at the
/// end), migrates (unless `migrated` is false), and runs `body` with it. Tests share that database, so each creates
/// its own accounts; with `isolated`, the store works in a fresh schema (its `search_path`), dropped afterwards.
/// `clock` is the store's (its revocation poller and conflict pauses sleep on it). With `route` ``PostgresRoute/pgbouncer``
/// the store's pool goes through PgBouncer in transaction mode instead, on a database of its own shared by that pass
/// (``PoolerPassDatabase``; an isolated store gets a scratch database: PgBouncer refuses a `search_path` start-up
/// parameter), and a store error `body` throws says so.
func withPostgresStore(
    isolated: Bool, migrated: Bool = true, clock: any TallyClock = SystemClock(), route: PostgresRoute = .direct,
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (PostgresStore) async throws -> Void
) async throws {
    let url = try postgresURL(sourceLocation: sourceLocation)
    switch route {
    case .direct:
        var configuration = try PostgresStore.configuration(url: url, maximumConnections: 5)
        let schema = isolated ? "tally_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "") : nil
        if let schema { configuration.connection.options.additionalStartupParameters.append(("search_path", schema)) }
        try await runPostgresStore(configuration, direct: nil, schema: schema, migrated: migrated, clock: clock, body)
    case .pgbouncer:
        _ = try pgbouncerURL(sourceLocation: sourceLocation)  // the rule for a missing PgBouncer
        if isolated {
            try await ScratchDatabase.with(baseURL: url) { direct in
                try await runThroughPgBouncer(try throughPgBouncer(direct), direct: direct, migrated: migrated, clock: clock, body)
            }
        } else {
            let direct = try await PoolerPassDatabase.shared.url(base: url)
            try await runThroughPgBouncer(try throughPgBouncer(direct), direct: direct, migrated: migrated, clock: clock, body)
        }
    }
}

/// The database the pooler pass shares, created on first use next to the provisioned one (and removed with the
/// cluster): not the direct pass's, since a case that uses fixed names (client ids) finds them taken by its own
/// direct pass in that database.
private actor PoolerPassDatabase {
    static let shared = PoolerPassDatabase()
    private var created: String?

    /// Its URL, the database created now if it was not yet.
    func url(base: String) async throws -> String {
        if let created { return created }
        let name = "tally_pooler_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        var logger = Logger(label: "tally.store-tests")
        logger.logLevel = .error
        let configuration = try PostgresStore.configuration(url: base, maximumConnections: 1).connection
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
        guard var components = URLComponents(string: base) else { throw HarnessError("bad database URL") }
        components.path = "/" + name
        guard let url = components.string else { throw HarnessError("bad database URL") }
        created = url
        return url
    }
}

/// Runs a store whose pool goes to `pooled` through PgBouncer, statements unnamed, migrations on `direct`; a store
/// error `body` throws names the pooler.
private func runThroughPgBouncer(
    _ pooled: String, direct: String, migrated: Bool, clock: any TallyClock, _ body: (PostgresStore) async throws -> Void
) async throws {
    var configuration = try PostgresStore.configuration(url: pooled, maximumConnections: 5)
    configuration.statements = .unnamed
    let directConnection = try PostgresStore.configuration(url: direct, maximumConnections: 1).connection
    do {
        try await runPostgresStore(configuration, direct: directConnection, schema: nil, migrated: migrated, clock: clock, body)
    } catch let error as StoreError {
        throw HarnessError("[postgres through PgBouncer, transaction mode, unnamed statements] \(error)")
    }
}

/// Runs a store on `configuration` (migrations on `direct` when given) for the duration of `body`, within the
/// fixture gate; in `schema`, created first and dropped after, when given.
private func runPostgresStore(
    _ configuration: PostgresPool.Configuration, direct: PostgresConnection.Configuration?, schema: String?, migrated: Bool,
    clock: any TallyClock, _ body: (PostgresStore) async throws -> Void
) async throws {
    var logger = Logger(label: "tally.store-tests")
    logger.logLevel = .warning
    // The conformance cases race dozens of commands on a pool of five; on two loaded cores a lease may wait longer
    // than the server's 5 s default, which is no finding of theirs (the lease timeout has tests of its own).
    var configuration = configuration
    configuration.acquireTimeout = .seconds(60)
    let store = PostgresStore(configuration: configuration, direct: direct, logger: logger, clock: clock)

    await gate.acquire()
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            do {
                if let schema { try await store.rows(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)")) }
                if migrated { try await store.migrate() }
                try await body(store)
            } catch {
                if let schema { _ = try? await store.rows(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE")) }
                group.cancelAll()
                throw error
            }
            if let schema { try await store.rows(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE")) }
            group.cancelAll()
        }
    } catch {
        await gate.release()
        throw error
    }
    await gate.release()
}

/// Runs two `PostgresStore`s on the database of ``postgresURL(sourceLocation:)``, as two server processes: each has
/// its own pool (of 4), account cache and account gate, so only the database stands between their writes.
func withTwoPostgresStores(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (PostgresStore, PostgresStore) async throws -> Void
) async throws {
    let url = try postgresURL(sourceLocation: sourceLocation)
    var logger = Logger(label: "tally.two-stores-tests")
    logger.logLevel = .warning
    // Live sessions trusted for an hour after a poll: the revocation test must not depend on how fast a
    // loaded machine gets from a poll to its assertions (the three-second bound has its own unit test).
    let first = PostgresStore(
        configuration: try PostgresStore.configuration(url: url, maximumConnections: 4), logger: logger,
        sessionStaleness: .seconds(3600))
    let second = PostgresStore(
        configuration: try PostgresStore.configuration(url: url, maximumConnections: 4), logger: logger,
        sessionStaleness: .seconds(3600))
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await first.run() }
        group.addTask { try await second.run() }
        do {
            try await first.migrate()
            try await body(first, second)
        } catch {
            group.cancelAll()
            throw error
        }
        group.cancelAll()
    }
}

/// A new guest of `store` holding `tokens` (its sign-up grant).
func newPostgresUser(_ store: PostgresStore, tokens: Int64, now: Date) async throws -> String {
    let grant = try await store.signInGuest(
        deviceHash: randomId("device-"), ipHash: randomId("ip-"), signupsPerHour: 1_000_000, signupGrant: tokens,
        sessionId: randomId("session-"), refresh: NewRefreshToken(hash: randomId("refresh-"), expiresAt: now.addingTimeInterval(3600)),
        sessionsPerUser: 50, now: now)
    return grant.user.id
}
