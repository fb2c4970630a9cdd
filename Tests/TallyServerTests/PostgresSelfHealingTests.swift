import Foundation
import Logging
import PostgresNIO
import Synchronization
import TallyAPI
import TallyStore
import TallyTestSupport
import Testing

@testable import TallyPostgres

/// A pooled connection whose server session ended, or whose prepared statements no longer match its session
/// (as behind a transaction pooler), is replaced, never reused: the next calls succeed on a fresh connection.
/// Each store has a pool of one connection, so "the connection" is the one every call uses.
@Suite("PostgreSQL connections that break are replaced", .timeLimit(.minutes(10)))
struct PostgresSelfHealingTests {
    @Test("A pooled connection whose backend is terminated is replaced, and the next calls succeed")
    func terminatedBackend() async throws {
        try await withStore { store, _ in
            #expect(try await store.liveSessionUser(sessionId: "no-such-session") == nil)
            let killed = try await backendPid(store)
            let opened = store.pool.connectionsOpened.load(ordering: .relaxed)
            try await withAdminConnection(store) { admin in
                try await admin.rows("SELECT pg_terminate_backend(\(killed))", logger: store.logger)
            }
            // The pool notices the end of the session and opens another (a condition, at most 10 s).
            let deadline = ContinuousClock.now + .seconds(10)
            while store.pool.connectionsOpened.load(ordering: .relaxed) == opened, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(store.pool.connectionsOpened.load(ordering: .relaxed) > opened, "the terminated connection was not replaced")
            for index in 0..<5 { #expect(try await store.liveSessionUser(sessionId: "no-such-session-\(index)") == nil) }
            #expect(try await backendPid(store) != killed)
        }
    }

    @Test("A prepared statement deallocated under the pool: the call is answered on a fresh connection, logged once as a pooler's doing")
    func deallocatedStatement() async throws {
        try await withStore { store, capture in
            #expect(try await store.liveSessionUser(sessionId: "no-such-session") == nil)
            let broken = try await backendPid(store)
            try await store.pool.withConnection { connection in
                try await connection.rows("DEALLOCATE \(unescaped: SessionUserStatement.name)", logger: store.logger)
            }
            // The statement is missing on that session (26000): the call goes again on another connection.
            for index in 0..<5 { #expect(try await store.liveSessionUser(sessionId: "no-such-session-\(index)") == nil) }
            #expect(try await backendPid(store) != broken)
            let reports = capture.lines.filter { $0.level == .error && $0.message.contains("TALLY_POSTGRES_STATEMENTS=unnamed") }
            #expect(reports.count == 1, "\(capture.lines.map(\.text))")
            #expect(reports.first?.metadata["postgres.sqlstate"] == "26000")

            // A statement of that name already there when the store prepares it (42P05): the same.
            let duplicated = try await backendPid(store)
            try await store.pool.withConnection { connection in
                try await connection.rows("PREPARE \(unescaped: WalletBatchReadStatement.name) AS SELECT 1", logger: store.logger)
            }
            let read = try await store.prepared(WalletBatchReadStatement(reads: [WalletRead(userId: "nobody", now: Date())]))
            #expect(read.isEmpty)
            #expect(try await backendPid(store) != duplicated)
            // Reported once per pool: its cause is the setup.
            #expect(capture.lines.filter { $0.level == .error }.count == 1, "\(capture.lines.map(\.text))")
        }
    }

    @Test("With unnamed statements nothing is prepared on the server session")
    func unnamedStatements() async throws {
        try await withStore(statements: .unnamed) { store, _ in
            #expect(try await store.liveSessionUser(sessionId: "no-such-session") == nil)
            let read = try await store.prepared(WalletBatchReadStatement(reads: [WalletRead(userId: "nobody", now: Date())]))
            #expect(read.isEmpty)
            let prepared: Int64 = try await store.pool.withConnection { connection in
                let rows = try await connection.rows("SELECT count(*) AS prepared FROM pg_prepared_statements", logger: store.logger)
                return try #require(rows.first).decode(Int64.self)
            }
            #expect(prepared == 0)
        }
    }

    @Test("Migrating makes the role plan generically, and the pool's sessions start so")
    func genericPlansByRole() async throws {
        try await withStore { store, _ in
            let mode: String = try await store.pool.withConnection { connection in
                let rows = try await connection.rows("SELECT current_setting('plan_cache_mode') AS mode", logger: store.logger)
                return try #require(rows.first).decode(String.self)
            }
            #expect(mode == "force_generic_plan")
        }
    }

    @Test("Over HTTP: every pooled backend terminated, then a connection's prepared statements deallocated: the next requests succeed on fresh connections")
    func requestsAfterBackendsKilledAndStatementsLost() async throws {
        let capture = LogCapture(level: .error)
        try await LiveServer.with(.postgres, logs: capture, configure: { $0.postgresPoolSize = 3 }) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let store = try #require(server.services.store as? PostgresStore)
            let user = try await api.newGuest(granted: 100)
            // Three leases at once: the pool opens its three connections (lazily, so they are all fresh here).
            let killed = try await Self.backendPids(of: store, atOnce: 3)
            #expect(Set(killed).count == 3 && store.pool.openConnections == 3)
            let opened = store.pool.connectionsOpened.load(ordering: .relaxed)
            try await withAdminConnection(store) { admin in
                for pid in killed { try await admin.rows("SELECT pg_terminate_backend(\(pid))", logger: store.logger) }
            }
            // The pool sees the three sessions end; the one connection it keeps is opened again (a condition, at most 10 s).
            let deadline = ContinuousClock.now + .seconds(10)
            while store.pool.connectionsOpened.load(ordering: .relaxed) == opened || store.pool.openConnections > 1, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(store.pool.connectionsOpened.load(ordering: .relaxed) > opened, "no fresh connection")
            // Statements prepared on it (the one idle connection, leased again next), then gone from its session, as
            // behind a transaction pooler: PostgresNIO still believes them prepared.
            #expect(try await store.liveSessionUser(sessionId: "no-such-session") == nil)
            let read = try await store.prepared(WalletBatchReadStatement(reads: [WalletRead(userId: "nobody", now: Date())]))
            #expect(read.isEmpty)
            _ = try await store.pool.withConnection { connection in
                try await connection.rows("DEALLOCATE ALL", logger: store.logger)
            }
            for index in 0..<5 {
                let wallet = try await api.send(.get, "/v1/wallet", token: user.accessToken)
                #expect(wallet.status == .ok, "wallet read \(index): \(wallet.status) \(wallet.text)")
                let grant = try await api.send(
                    .post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: 1, reason: "after \(index)"))
                #expect(grant.status == .created, "grant \(index): \(grant.status) \(grant.text)")
                let guest = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-\(UUID().uuidString)"))
                #expect(guest.status == .created || guest.status == .ok, "sign-in \(index): \(guest.status) \(guest.text)")
            }
            let after = try await Self.backendPids(of: store, atOnce: 1)
            #expect(Set(after).isDisjoint(with: killed), "a terminated backend is still in use")
            let wallet = try await api.wallet(user)
            #expect(wallet.balance == 105)
            try await api.expectBooksBalance(user)
            // The deallocated statements were met (26000) and reported once as a pooler's doing; nothing else failed.
            let reports = capture.lines.filter { $0.message.contains("TALLY_POSTGRES_STATEMENTS=unnamed") }
            #expect(reports.count == 1, "\(capture.lines.map(\.text))")
        }
    }

    // MARK: - Helpers

    /// The server processes behind `count` of `store`'s connections leased at once (each lease waits for the others).
    private static func backendPids(of store: PostgresStore, atOnce count: Int) async throws -> [Int32] {
        let arrived = Arrivals()
        return try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<count {
                group.addTask { try await arrived.backendPid(of: store, waitingFor: count) }
            }
            var pids: [Int32] = []
            for try await pid in group { pids.append(pid) }
            return pids
        }
    }

    /// A store on a scratch database with a pool of one connection sending statements as `statements` says,
    /// migrated, its log captured.
    private func withStore(
        statements: PostgresStatements = .prepared, _ body: (PostgresStore, LogCapture) async throws -> Void
    ) async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let capture = LogCapture(level: .debug)
            var logger = Logger(label: "tally.self-healing") { _ in capture }
            logger.logLevel = .debug
            var configuration = try PostgresStore.configuration(url: url, maximumConnections: 1)
            configuration.statements = statements
            let store = PostgresStore(configuration: configuration, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                try await store.migrate()
                try await body(store, capture)
            }
        }
    }

    /// The server process behind the pool's connection.
    private func backendPid(_ store: PostgresStore) async throws -> Int32 {
        let rows = try await store.rows("SELECT pg_backend_pid() AS pid")
        return try #require(rows.first).decode(Int32.self)
    }

    /// A connection of its own to the store's database, outside its pool.
    private func withAdminConnection(_ store: PostgresStore, _ body: (PooledConnection) async throws -> Void) async throws {
        let connected = try await PostgresConnection.connect(configuration: store.pool.configuration.connection, id: 1, logger: store.logger)
        defer { Task { try? await connected.close() } }
        try await body(PooledConnection(connection: connected, watch: ConnectionWatch()))
    }
}

/// Leases that each read their connection's server process, then wait for the others (at most 10 s).
private final class Arrivals: Sendable {
    private let count = Atomic(0)

    func backendPid(of store: PostgresStore, waitingFor total: Int) async throws -> Int32 {
        try await store.pool.withConnection { connection in
            let rows = try await connection.rows("SELECT pg_backend_pid() AS pid", logger: store.logger)
            count.add(1, ordering: .relaxed)
            let deadline = ContinuousClock.now + .seconds(10)
            while count.load(ordering: .relaxed) < total, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            return try #require(rows.first).decode(Int32.self)
        }
    }
}
