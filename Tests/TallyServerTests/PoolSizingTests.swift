import Foundation
import HTTPTypes
import Logging
import PostgresNIO
import Synchronization
import TallyAPI
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyPostgres

/// Pools sized for many processes (issue 36): connections opened as leases need them up to the maximum and closed
/// after the idle timeout of the pool's injected clock (the server's count seen in `pg_stat_activity`), and a
/// lease that finds every connection in use failing after the lease timeout, logged once per period, answered
/// `503` over HTTP well before the request timeout.
@Suite("PostgreSQL pools for many processes", .timeLimit(.minutes(2)))
struct PoolSizingTests {
    @Test("Connections are opened as leases need them, up to the maximum, and closed after the idle timeout down to one")
    func lazyConnectionsCloseWhenIdle() async throws {
        let name = "tally_pool_" + UUID().uuidString.prefix(8).lowercased()
        var configuration = try PostgresStore.configuration(url: try postgresURL(), maximumConnections: 4)
        configuration.connection.options.additionalStartupParameters.append(("application_name", name))
        configuration.idleTimeout = .seconds(60)
        let clock = ManualClock()
        try await Self.withPool(configuration, clock: clock) { pool, _ in
            try await Self.eventually("the first connection") { pool.connectionsOpened.load(ordering: .relaxed) == 1 }
            #expect(pool.openConnections == 1)
            #expect(try await Self.backends(name) == 1, "one connection at start")

            // Five leases held at once: four connections (the maximum), the fifth lease waits for one of them.
            try await Self.holding(5, on: pool, atOnce: 4) {
                #expect(pool.openConnections == 4)
                #expect(pool.waitingLeases == 1)
                let sessions = try await Self.backends(name)
                #expect(sessions == 4)
            }
            #expect(pool.connectionsOpened.load(ordering: .relaxed) == 4)

            // Idle since the clock's start: nothing closes before the idle timeout...
            try await clock.waitForSleepers()
            clock.advance(by: 59)
            try await clock.waitForSleepers()
            #expect(pool.openConnections == 4)
            #expect(try await Self.backends(name) == 4)
            // ...and after it every connection but one closes, at the server too.
            clock.advance(by: 2)
            try await clock.waitForSleepers()
            try await Self.eventually("the idle connections closed") { pool.openConnections == 1 }
            try await Self.eventually("the server's sessions ended") { try await Self.backends(name) == 1 }
            // The one kept serves, and no connection was opened for it.
            let rows = try await pool.withConnection { try await $0.rows("SELECT 1", logger: Self.logger) }
            #expect(rows.count == 1)
            #expect(pool.connectionsOpened.load(ordering: .relaxed) == 4)
        }
    }

    @Test("A lease finding every connection in use fails at the lease timeout, not before; one warning per 10 s counts them")
    func leaseTimeout() async throws {
        var configuration = try PostgresStore.configuration(url: try postgresURL(), maximumConnections: 1)
        configuration.acquireTimeout = .seconds(5)
        let clock = ManualClock()
        try await Self.withPool(configuration, clock: clock) { pool, capture in
            let probe = LeaseProbe()
            let holder = Task { try await probe.hold(on: pool) }
            try await Self.eventually("the one connection leased") { probe.holding.load(ordering: .relaxed) == 1 }
            let waiting = (0..<3).map { _ in Task { await Self.outcome(of: pool) } }
            try await Self.eventually("three leases waiting") { pool.waitingLeases == 3 }
            try await clock.waitForSleepers()
            clock.advance(by: 4.9)
            try await clock.waitForSleepers()
            #expect(pool.waitingLeases == 3, "none fails before the lease timeout")
            clock.advance(by: 0.2)
            try await clock.waitForSleepers()
            var failed: [String] = []
            for task in waiting { failed.append(await task.value) }
            #expect(failed == ["timedOut", "timedOut", "timedOut"])
            var reports = capture.lines.filter { $0.message.contains("lease timeout") }
            #expect(reports.count == 1 && reports.first?.level == .warning, "\(capture.lines.map(\.text))")
            #expect(reports.first?.metadata["postgres.timed_out"] == "3")
            #expect(reports.first?.message.contains("TALLY_POSTGRES_POOL") == true)

            // Another within 10 s of that line: failed, counted, not logged; the next line, 10 s after, counts it.
            let fourth = Task { await Self.outcome(of: pool) }
            try await Self.eventually("a fourth lease waiting") { pool.waitingLeases == 1 }
            clock.advance(by: 5.1)
            try await clock.waitForSleepers()
            let fourthOutcome = await fourth.value
            #expect(fourthOutcome == "timedOut")
            #expect(capture.lines.filter { $0.message.contains("lease timeout") }.count == 1)
            clock.advance(by: 5)
            try await clock.waitForSleepers()
            reports = capture.lines.filter { $0.message.contains("lease timeout") }
            #expect(reports.count == 2 && reports.last?.metadata["postgres.timed_out"] == "1", "\(capture.lines.map(\.text))")

            probe.released.store(true, ordering: .relaxed)
            try await holder.value
            // A failed lease is a 503 for the store's callers.
            guard case .fail(let error as StoreError) = ErrorDisposition.classify(PoolFailure.timedOut) else {
                Issue.record("a lease timeout must fail the call")
                return
            }
            #expect(error.code == .unavailable)
        }
    }

    @Test("Over HTTP: a request that gets no connection within the lease timeout answers 503 JSON at once, then the pool serves again")
    func leaseTimeoutOverHTTP() async throws {
        let capture = LogCapture(level: .warning)
        try await LiveServer.with(.postgres, logs: capture, configure: { configuration in
            configuration.postgresPoolSize = 1
            configuration.postgresLeaseTimeout = .milliseconds(300)
        }) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let store = try #require(server.services.store as? PostgresStore)
            #expect(store.pool.configuration.size == 1 && store.pool.configuration.acquireTimeout == .milliseconds(300))
            let probe = LeaseProbe()
            let holder = Task { try await probe.hold(on: store.pool) }
            try await Self.eventually("the one connection leased") { probe.holding.load(ordering: .relaxed) == 1 }
            let start = ContinuousClock.now
            let refused = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString))
            let waited = ContinuousClock.now - start
            #expect(refused.status == .serviceUnavailable && refused.errorCode == "unavailable", "\(refused.status) \(refused.text)")
            #expect(refused.headers[.retryAfter] == "1")
            // The lease timeout (0.3 s) and the way back, far under the request timeout (30 s) on a loaded machine.
            #expect(waited >= .milliseconds(300) && waited < .seconds(10), "\(waited)")
            let reports = capture.lines.filter { $0.message.contains("lease timeout") }
            #expect(reports.count == 1, "\(capture.lines.map(\.text))")

            probe.released.store(true, ordering: .relaxed)
            try await holder.value
            let served = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString))
            #expect(served.status == .created || served.status == .ok, "\(served.status) \(served.text)")
        }
    }

    // MARK: - Helpers

    static let logger: Logger = {
        var logger = Logger(label: "tally.pool-sizing")
        logger.logLevel = .error
        return logger
    }()

    /// Runs a pool on `configuration` and `clock` for the duration of `body`, its log captured at `warning`.
    static func withPool(
        _ configuration: PostgresPool.Configuration, clock: ManualClock, _ body: (PostgresPool, LogCapture) async throws -> Void
    ) async throws {
        let capture = LogCapture(level: .warning)
        var logger = Logger(label: "tally.pool-sizing") { _ in capture }
        logger.logLevel = .warning
        let pool = PostgresPool(configuration: configuration, logger: logger, clock: clock)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await pool.run() }
            defer { group.cancelAll() }
            try await body(pool, capture)
        }
    }

    /// Takes `count` leases at once and runs `body` once `atOnce` of them hold a connection, then releases them all
    /// (the ones that waited take theirs and release them at once).
    static func holding(_ count: Int, on pool: PostgresPool, atOnce: Int, _ body: () async throws -> Void) async throws {
        let probe = LeaseProbe()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask { try await probe.hold(on: pool) }
            }
            try await eventually("\(atOnce) leases holding a connection") { probe.holding.load(ordering: .relaxed) == atOnce }
            try await eventually("the rest waiting") { pool.waitingLeases == count - atOnce }
            do { try await body() } catch {
                probe.released.store(true, ordering: .relaxed)
                throw error
            }
            probe.released.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
    }

    /// What a lease on `pool` that does nothing came to: `ok`, or the error it failed with.
    static func outcome(of pool: PostgresPool) async -> String {
        do {
            try await pool.withConnection { _ in }
            return "ok"
        } catch {
            return "\(error)"
        }
    }

    /// The server's sessions whose `application_name` is `name`, counted on a connection of its own.
    static func backends(_ name: String) async throws -> Int64 {
        let configuration = try PostgresStore.configuration(url: try postgresURL(), maximumConnections: 1).connection
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        defer { Task { try? await connection.close() } }
        let rows = try await connection.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = \(name)", logger: logger).collect()
        return try #require(rows.first).decode(Int64.self)
    }

    /// Waits (a condition, at most 10 s) until `condition` holds; records an issue and throws if it never does.
    static func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw HarnessError("not within 10 s: \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Leases that hold their connection until released, counted.
final class LeaseProbe: Sendable {
    /// Leases holding a connection now.
    let holding = Atomic(0)
    /// Set to let them go.
    let released = Atomic(false)

    /// Leases a connection of `pool` and holds it until ``released``.
    func hold(on pool: PostgresPool) async throws {
        try await pool.withConnection { _ in
            holding.add(1, ordering: .relaxed)
            defer { holding.subtract(1, ordering: .relaxed) }
            while !released.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(5)) }
        }
    }
}
