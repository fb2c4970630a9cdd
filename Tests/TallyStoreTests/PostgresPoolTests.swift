import Foundation
import Logging
import NIOPosix
import PostgresNIO
import TallyPostgres
import Testing

/// The PostgreSQL pool against a real server: it starts, serves and stops without leaving anything
/// waiting, a statement never outlives its connection, and an unreachable database fails leases at once.
@Suite("PostgreSQL pool", .timeLimit(.minutes(2)))
struct PostgresPoolTests {
    static let logger: Logger = {
        var logger = Logger(label: "tally.pool-tests")
        logger.logLevel = .error
        return logger
    }()

    /// Runs a pool of `size` on `configuration` for the duration of `body`, then stops it.
    static func withPool<T: Sendable>(
        _ configuration: PostgresPool.Configuration, _ body: @Sendable (PostgresPool) async throws -> T
    ) async throws -> T {
        let pool = PostgresPool(configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await pool.run() }
            defer { group.cancelAll() }
            return try await body(pool)
        }
    }

    @Test("Pools that start, answer and stop at once, many at a time, all stop (nothing left waiting on a connection)")
    func shortLivedPools() async throws {
        let configuration = try PostgresStore.configuration(url: try postgresURL(), maximumConnections: 2)
        for _ in 0..<5 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        try await Self.withPool(configuration) { pool in
                            // Two statements racing for the connections while the pool stops right after.
                            async let first = pool.withConnection { try await $0.rows("SELECT 1", logger: Self.logger) }
                            async let second = pool.withConnection { try await $0.rows("SELECT pg_sleep(0.01)", logger: Self.logger) }
                            _ = try await (first, second)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test("A statement on a connection that closes under it fails at once instead of waiting forever")
    func statementOnClosedConnection() async throws {
        let configuration = try PostgresStore.configuration(url: try postgresURL(), maximumConnections: 1)
        try await Self.withPool(configuration) { pool in
            let clock = ContinuousClock()
            let start = clock.now
            await #expect(throws: (any Error).self) {
                try await pool.withConnection { connection in
                    try await connection.connection.close().get()
                    return try await connection.rows("SELECT 1", logger: Self.logger)
                }
            }
            // Not a timing test: without the fix the statement never returns. The bound stays under every timer
            // of the pool (acquire 10 s, lease 30 s) that could end a wait by itself, and well above what a
            // loaded machine takes (2.8 s once, with the whole suite running on two cores).
            #expect(clock.now - start < .seconds(8))
            // The slot connects again: the pool serves the next lease.
            let rows = try await pool.withConnection { try await $0.rows("SELECT 1", logger: Self.logger) }
            #expect(rows.count == 1)
        }
    }

    @Test("A database that cannot be reached fails leases at once, not after a timeout")
    func unreachableFailsFast() async throws {
        // A port nothing listens on: every connection attempt is refused.
        let listener = try await ServerBootstrapPort.free()
        var configuration = try PostgresStore.configuration(url: "postgres://tally@127.0.0.1:\(listener)/tally", maximumConnections: 2)
        configuration.acquireTimeout = .seconds(30)
        try await Self.withPool(configuration) { pool in
            // The first lease may wait for the first attempt to fail; after that none waits.
            _ = try? await pool.withConnection { try await $0.rows("SELECT 1", logger: Self.logger) }
            #expect(!pool.isReachable)
            let clock = ContinuousClock()
            for _ in 0..<20 {
                let start = clock.now
                await #expect(throws: (any Error).self) {
                    try await pool.withConnection { try await $0.rows("SELECT 1", logger: Self.logger) }
                }
                #expect(clock.now - start < .milliseconds(200))
            }
        }
    }
}

/// What a failed connect says when logged: its socket error, so an operator (or a CI log) can tell a refused connect
/// from a timed-out one.
@Suite("PostgreSQL connection failures name their cause", .timeLimit(.minutes(1)))
struct PostgresFailureCauseTests {
    @Test("A refused connect is a connectionError whose cause says refused; a failure without a cause prints as before")
    func refusedConnectNamesItsCause() async throws {
        let port = try await ServerBootstrapPort.free()
        let configuration = try PostgresStore.configuration(url: "postgres://tally@127.0.0.1:\(port)/tally", maximumConnections: 1)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration.connection, id: 1, logger: PostgresPoolTests.logger)
            try? await connection.close()
            Issue.record("a connect to \(port), where nothing listens, succeeded")
        } catch {
            let failure = PostgresFailure(error)
            #expect(failure.kind == "connectionError")
            #expect(failure.cause?.contains("refused") == true, "\(failure)")
            #expect(failure.description.contains("cause "), "\(failure)")
        }
        #expect(PostgresFailure(kind: "server", sqlState: "23505").description == "PostgresFailure(server, sqlstate 23505)")
    }
}

/// A loopback TCP port that nothing listens on (bound once to find it, then released).
enum ServerBootstrapPort {
    static func free() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 1
        try await channel.close()
        return port
    }
}
