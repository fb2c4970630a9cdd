import Foundation
import Logging
import PostgresNIO
import Synchronization
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// Change events between processes over LISTEN/NOTIFY: what one notifier publishes, another hears, once;
/// a burst goes out in a few notifications; a listener whose backend is killed reconnects on its clock.
/// Each test has a database of its own (notifications are per database, so parallel tests do not mix).
@Suite("PostgreSQL: change notifications", .timeLimit(.minutes(2)))
struct PostgresNotificationsTests {
    @Test("What one process publishes every other one hears, exactly once; a process skips its own")
    func deliversToOthersOnly() async throws {
        try await Self.withTwoListening { notifierA, a, notifierB, b in
            let user = UUID().uuidString.lowercased()
            notifierA.publish(.documents(userId: user, version: 3))
            notifierA.publish(.wallet(userId: user))
            notifierA.publish(.sessionEnded(userId: user, sessionId: "s1"))
            try await b.waitForEvents(3)
            #expect(
                Set(b.events)
                    == [.documents(userId: user, version: 3), .wallet(userId: user), .sessionEnded(userId: user, sessionId: "s1")])
            // A marker from B, heard by A: A's own notifications, sent before it, were heard and skipped by then.
            notifierB.publish(.accountDeleted(userId: user))
            try await a.waitForEvents(1)
            #expect(a.events == [.accountDeleted(userId: user)], "A heard only B's event, not its own")
            #expect(b.events.count == 3, "B did not hear its own")
        }
    }

    @Test("Events published together are heard together: a reset's fifty ended sessions in one delivery")
    func publishedTogetherHeardTogether() async throws {
        try await Self.withTwoListening { notifierA, a, notifierB, b in
            let user = UUID().uuidString.lowercased()
            // The session cap's worth, as a password reset ends them: a process that heard one must have heard all,
            // or a client whose stream ended could still be served with another of the account's tokens there.
            let ended = (0..<50).map { _ in ChangeEvent.sessionEnded(userId: user, sessionId: UUID().uuidString.lowercased()) }
            notifierA.publish(ended)
            try await b.waitForEvents(50)
            #expect(Set(b.events) == Set(ended))
            #expect(b.deliveries == [50], "one delivery of all fifty")
        }
    }

    @Test("A burst published while nothing could be sent goes out coalesced, in a few notifications under 8000 bytes")
    func batchesABurst() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let clock = ManualClock()
            let users = (0..<1_000).map { _ in UUID().uuidString.lowercased() }
            let notifier = try Self.notifier(url, clock, Recorder())
            for user in users {
                for version in 1...5 as ClosedRange<Int64> { notifier.publish(.documents(userId: user, version: version)) }
                notifier.publish(.wallet(userId: user))
                notifier.publish(.wallet(userId: user))
            }
            // A plain listener, to see the notifications as they are sent.
            let listener = try await PostgresConnection.connect(
                configuration: try PostgresStore.configuration(url: url).connection, id: 1, logger: Self.logger)
            defer { Task { try? await listener.close() } }
            let payloads = try await listener.listen(on: PostgresNotifications.channel) { notifications in
                try await withThrowingTaskGroup(of: [String].self) { group in
                    group.addTask { await notifier.run(); return [] }
                    group.addTask {
                        var payloads: [String] = []
                        var heard = Set<ChangeEvent>()
                        for try await notification in notifications {
                            payloads.append(notification.payload)
                            heard.formUnion(ChangeBatch.decode(notification.payload)?.events ?? [])
                            if heard.count == 2 * users.count { return payloads }
                        }
                        return payloads
                    }
                    defer { group.cancelAll() }
                    return try await group.next() ?? []
                }
            }
            // 7,000 publishes of 2,000 coalesced events, about 83 bytes a user: 11 notifications, not 7,000.
            #expect((10...12).contains(payloads.count), "\(payloads.count) notifications")
            #expect(payloads.allSatisfy { $0.utf8.count <= PostgresNotifications.maxPayloadBytes })
            let events = payloads.flatMap { ChangeBatch.decode($0)?.events ?? [] }
            #expect(events.count == 2 * users.count, "each user's events coalesced into two")
            #expect(Set(events) == Set(users.flatMap { [ChangeEvent.documents(userId: $0, version: 5), .wallet(userId: $0)] }))
        }
    }

    @Test("A listener whose backend is terminated reconnects after its backoff on the injected clock, says it may have missed events, and hears again")
    func reconnects() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let clock = ManualClock()
            let recorder = Recorder()
            let otherRecorder = Recorder()
            let notifier = try Self.notifier(url, clock, recorder)
            let other = try Self.notifier(url, clock, otherRecorder)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await notifier.run() }
                group.addTask { await other.run() }
                defer { group.cancelAll() }
                // Both listening before the kill (a CI run killed one, the other not yet connected, and waited for two).
                try await recorder.waitUntilListening(1)
                try await otherRecorder.waitUntilListening(1)
                #expect(recorder.listening == [false])

                let killer = try await PostgresConnection.connect(
                    configuration: try PostgresStore.configuration(url: url).connection, id: 2, logger: Self.logger)
                let rows = try await killer.query(
                    """
                    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE application_name = \(PostgresNotifications.applicationName) AND datname = current_database()
                    """, logger: Self.logger
                ).collect()
                try await killer.close()
                #expect(rows.count == 2, "both notifiers' listeners were terminated")
                // Each waits out its backoff on the manual clock: nothing reconnects until it moves.
                try await Recorder.waitFor { clock.sleeperCount >= 2 }
                #expect(recorder.listening == [false])
                clock.advance(by: 1)
                try await recorder.waitUntilListening(2)
                #expect(recorder.listening == [false, true], "the second LISTEN follows a lost connection")

                let user = UUID().uuidString.lowercased()
                other.publish(.wallet(userId: user))  // sent once `other` is connected again, too
                try await recorder.waitForEvents(1)
                #expect(recorder.events == [.wallet(userId: user)])
            }
        }
    }

    static let logger: Logger = {
        var logger = Logger(label: "tally.notifications-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// Runs `body` with two notifiers on a database of their own (and what each handed its owner), both listening.
    static func withTwoListening(
        _ body: (PostgresNotifications, Recorder, PostgresNotifications, Recorder) async throws -> Void
    ) async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let clock = ManualClock()
            let a = Recorder(), b = Recorder()
            let notifierA = try Self.notifier(url, clock, a), notifierB = try Self.notifier(url, clock, b)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await notifierA.run() }
                group.addTask { await notifierB.run() }
                defer { group.cancelAll() }
                try await a.waitUntilListening(1)
                try await b.waitUntilListening(1)
                try await body(notifierA, a, notifierB, b)
            }
        }
    }

    static func notifier(_ url: String, _ clock: ManualClock, _ recorder: Recorder) throws -> PostgresNotifications {
        PostgresNotifications(
            connection: try PostgresStore.configuration(url: url).connection, clock: clock, logger: logger
        ) { recorder.record($0) }
    }
}

/// What a notifier handed its owner.
final class Recorder: Sendable {
    private let state = Mutex<(listening: [Bool], events: [ChangeEvent], lost: Int)>(([], [], 0))
    private let sizes = Mutex<[Int]>([])

    func record(_ input: PostgresNotifications.Input) {
        state.withLock { state in
            switch input {
            case .listening(let reconnected): state.listening.append(reconnected)
            case .events(let events):
                state.events += events
                sizes.withLock { $0.append(events.count) }
            case .eventsLost: state.lost += 1
            }
        }
    }

    /// How many events each delivery handed over, in order.
    var deliveries: [Int] { sizes.withLock { $0 } }

    var listening: [Bool] { state.withLock { $0.listening } }
    var events: [ChangeEvent] { state.withLock { $0.events } }

    func waitUntilListening(_ count: Int) async throws {
        try await waitFor { $0.listening.count >= count }
    }

    func waitForEvents(_ count: Int) async throws {
        try await waitFor { $0.events.count >= count }
    }

    private func waitFor(_ condition: @escaping ((listening: [Bool], events: [ChangeEvent], lost: Int)) -> Bool) async throws {
        try await Self.waitFor { self.state.withLock { condition($0) } }
    }

    /// Polls `condition` (what the database does is nothing a test can await) for at most 20 s.
    static func waitFor(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw HarnessError("timed out waiting for the notifier") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
