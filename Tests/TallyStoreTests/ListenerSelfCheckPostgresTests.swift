import Foundation
import Logging
import PostgresNIO
import Synchronization
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyPostgres

/// The listener's self-check against real PostgreSQL and PgBouncer (``PostgresNotifications/SelfCheck``): its
/// probe goes through the store's pool and must come back to the listener; the probes' clock is a
/// ``ManualClock``, so a timeout passes only when the test moves it.
@Suite("PostgreSQL: the listener's self-check", .timeLimit(.minutes(2)))
struct ListenerSelfCheckPostgresTests {
    @Test("A listener on PostgreSQL itself hears its probe; after losing its connection it polls until it hears again, with no error")
    func hearsDirectly() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let clock = ManualClock(), log = Lines(), deliveries = Deliveries()
            let store = try PostgresStore(url: url, maximumConnections: 2, logger: Logger(label: "tally.self-check-tests"))
            let notifier = try Self.notifier(connection: PostgresStore.configuration(url: url).connection, store, clock, log, deliveries)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                group.addTask { await notifier.run() }
                defer { group.cancelAll() }
                // Heard without the clock moving: the probe came back well within its 2 s.
                try await Recorder.waitFor { deliveries.list == [.listening] }

                try await Self.terminateListeners(url)
                try await Recorder.waitFor { deliveries.list == [.listening, .polling] }
                // The backoff before reconnecting, then the new connection's probe, heard.
                try await clock.waitForSleepers(1)
                clock.advance(by: 1)
                try await Recorder.waitFor { deliveries.list == [.listening, .polling, .listening] }
                #expect(log.errors.isEmpty, "\(log.errors)")
            }
        }
    }

    @Test("A listener through PgBouncer in transaction mode does not hear its probe: one error naming the pooler and the setting, and polling")
    func deafThroughPgBouncer() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let pooled = try throughPgBouncer(url)
            let clock = ManualClock(), log = Lines(), deliveries = Deliveries()
            let store = try PostgresStore(url: pooled, maximumConnections: 2, statements: .unnamed, logger: Logger(label: "tally.self-check-tests"))
            let notifier = try Self.notifier(connection: PostgresStore.configuration(url: pooled).connection, store, clock, log, deliveries)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                group.addTask { await notifier.run() }
                defer { group.cancelAll() }
                // LISTEN went through, and the probe was sent: it waits out its 2 s on the clock.
                try await Recorder.waitFor { clock.sleeperCount == 1 }
                #expect(deliveries.list == [], "heard its probe through a transaction pooler")
                clock.advance(by: 2)
                try await Recorder.waitFor { deliveries.list == [.polling] }
                #expect(log.errors.count == 1)
                #expect(log.errors.allSatisfy { $0.contains("transaction pooler") && $0.contains("TALLY_LISTEN_DATABASE_URL") }, "\(log.errors)")
                // A minute later the next probe is not heard either: no second error, still polling.
                try await Recorder.waitFor { clock.sleeperCount == 1 }
                clock.advance(by: 58)
                try await Recorder.waitFor { clock.sleeperCount == 1 && notifier.probesSent == 2 }
                clock.advance(by: 2)
                try await Recorder.waitFor { clock.sleeperCount == 1 }
                #expect(log.errors.count == 1)
                #expect(deliveries.list == [.polling])
            }
        }
    }

    static func notifier(
        connection: PostgresConnection.Configuration, _ store: PostgresStore, _ clock: ManualClock, _ log: Lines, _ deliveries: Deliveries
    ) -> PostgresNotifications {
        let logger = Logger(label: "tally.self-check-tests") { _ in log }
        let selfCheck = PostgresNotifications.SelfCheck(probingThrough: store) { deliveries.append($0) }
        return PostgresNotifications(connection: connection, clock: clock, logger: logger, selfCheck: selfCheck) { _ in }
    }

    /// Terminates every listener on the database `url` names.
    static func terminateListeners(_ url: String) async throws {
        let logger = Logger(label: "tally.self-check-tests")
        let killer = try await PostgresConnection.connect(configuration: try PostgresStore.configuration(url: url).connection, id: 3, logger: logger)
        _ = try await killer.query(
            """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE application_name = \(PostgresNotifications.applicationName) AND datname = current_database()
            """, logger: logger
        ).collect()
        try await killer.close()
    }
}

/// How a self-check's owner was told events reach it, in order.
final class Deliveries: Sendable {
    private let state = Mutex<[EventDelivery]>([])
    func append(_ delivery: EventDelivery) { state.withLock { $0.append(delivery) } }
    var list: [EventDelivery] { state.withLock { $0 } }
}

/// The error lines a logger wrote.
final class Lines: LogHandler, @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        if event.level >= .error { lines.withLock { $0.append("\(event.message)") } }
    }
    var errors: [String] { lines.withLock { $0 } }
}
