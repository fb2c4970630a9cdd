import Foundation
import Logging
import PostgresNIO
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

/// Opens the PostgreSQL store named by `TALLY_TEST_DATABASE_URL` (``postgresURL(sourceLocation:)``: without it the
/// case is skipped, or fails under TALLY_REQUIRE_POSTGRES=1), runs it for the duration of `body` (cancelled at the
/// end), migrates (unless `migrated` is false), and runs `body` with it. Tests share that database, so each creates
/// its own accounts; with `isolated`, the store works in a fresh schema (its `search_path`), dropped afterwards.
/// `clock` is the store's (its revocation poller and conflict pauses sleep on it).
func withPostgresStore(
    isolated: Bool, migrated: Bool = true, clock: any WallClock = SystemClock(), sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (PostgresStore) async throws -> Void
) async throws {
    let url = try postgresURL(sourceLocation: sourceLocation)
    var logger = Logger(label: "tally.store-tests")
    logger.logLevel = .warning
    var configuration = try PostgresStore.configuration(url: url, maximumConnections: 5)
    let schema = isolated ? "tally_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "") : nil
    if let schema { configuration.connection.options.additionalStartupParameters.append(("search_path", schema)) }
    let store = PostgresStore(configuration: configuration, logger: logger, clock: clock)

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
