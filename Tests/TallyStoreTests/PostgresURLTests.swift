import Foundation
import Logging
import PostgresNIO
import TallyPostgres
import Testing

/// `DATABASE_URL` parsing (pure), and a store reached through the Unix socket of the test cluster.
@Suite("PostgreSQL URLs", .timeLimit(.minutes(10)))
struct PostgresURLTests {
    @Test("A TCP URL gives host, port, user, password and database, and a pool of the given size")
    func tcp() throws {
        let pool = try PostgresStore.configuration(url: "postgres://app:s3cret@db.internal:6543/ledger", maximumConnections: 7)
        let configuration = pool.connection
        #expect(configuration.host == "db.internal")
        #expect(configuration.port == 6543)
        #expect(configuration.unixSocketPath == nil)
        #expect(configuration.username == "app")
        #expect(configuration.password == "s3cret")
        #expect(configuration.database == "ledger")
        #expect(pool.size == 7)
    }

    @Test("Defaults: port 5432, the database named after the user; IPv6 hosts lose their brackets")
    func defaults() throws {
        let configuration = try PostgresStore.configuration(url: "postgresql://app@[::1]").connection
        #expect(configuration.host == "::1")
        #expect(configuration.port == 5432)
        #expect(configuration.database == "app")
        #expect(configuration.password == nil)
    }

    @Test("A host parameter that is a directory connects through the socket for the URL's port (libpq's form)")
    func socket() throws {
        let configuration = try PostgresStore.configuration(url: "postgres://app:pw@localhost:5433/ledger?host=/run/postgresql").connection
        #expect(configuration.unixSocketPath == "/run/postgresql/.s.PGSQL.5433")
        #expect(configuration.host == nil)
        #expect(configuration.database == "ledger")
        let noHost = try PostgresStore.configuration(url: "postgres://app@/ledger?host=/tmp&sslmode=disable").connection
        #expect(noHost.unixSocketPath == "/tmp/.s.PGSQL.5432")
    }

    @Test(
        "Malformed URLs are refused with a reason",
        arguments: [
            "mysql://app@db/ledger", "postgres:///ledger", "postgres://db/ledger", "postgres://app@db:0/ledger",
            "postgres://app@db/a/b", "postgres://app@db/ledger?sslmode=require", "postgres://app@/ledger?host=relative/dir",
            "postgres://app@db/ledger?host=",
        ])
    func refused(url: String) {
        #expect(throws: (any Error).self) { try PostgresStore.configuration(url: url) }
    }

    @Test("A pool of zero connections is refused")
    func emptyPool() {
        #expect(throws: (any Error).self) { try PostgresStore.configuration(url: "postgres://app@db/ledger", maximumConnections: 0) }
    }

    @Test("The store migrates and answers through the test cluster's Unix socket", .timeLimit(.minutes(1)))
    func throughSocket() async throws {
        // scripts/with-postgres always sets it (in a short directory of its own when TMPDIR's path is too long).
        let url = try postgresSocketURL()
        var logger = Logger(label: "tally.url-tests")
        logger.logLevel = .warning
        let configuration = try PostgresStore.configuration(url: url, maximumConnections: 1)
        #expect(configuration.connection.unixSocketPath != nil)
        let store = PostgresStore(configuration: configuration, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            defer { group.cancelAll() }
            try await store.migrate()
            // A socket connection has no client address; a TCP one would show 127.0.0.1.
            let rows = try await store.rows("SELECT client_addr IS NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()")
            var isSocket: Bool?
            for row in rows { isSocket = try row.decode(Bool.self) }
            #expect(isSocket == true)
        }
    }
}
