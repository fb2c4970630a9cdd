import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TallyAPI
import TallyClient

/// The live-events benchmark: `users` guests each hold one `GET /v1/sync/events` stream open while writes
/// at `writesPerSecond`, each made by one of them through another connection (their other device), put a
/// document; it measures, per write, the time from sending the write to its `changed` event on the
/// writer's stream. Every user is written to in turn, so a user has at most one write in flight.
public enum EventFanoutBenchmark {
    /// What to run.
    public struct Options: Sendable {
        /// The server.
        public var host = "127.0.0.1"
        /// Its port.
        public var port: Int
        /// Streams (one per user).
        public var users = 5_000
        /// Document writes per second, spread over the users.
        public var writesPerSecond = 500
        /// How long writes go on, in seconds.
        public var duration = 20
        /// The collection written to; its range key, if it has one, gets a date.
        public var collection: String
        /// The collection's range key field.
        public var rangeKey: String?
        /// Connections the writes go through.
        public var writers = 64
        /// A `changed` event later than this after its write counts as missed.
        public var deadline: Duration = .seconds(5)

        /// Options for a server on `port` and a declared `collection`.
        public init(port: Int, collection: String, rangeKey: String? = nil) {
            self.port = port
            self.collection = collection
            self.rangeKey = rangeKey
        }
    }

    /// What was measured (milliseconds).
    public struct Result: Codable, Sendable {
        /// Streams open when the writes began.
        public var streams: Int
        /// Streams still open at the end.
        public var streamsOpenAtEnd: Int
        /// Writes answered 2xx.
        public var writes: Int
        /// Writes that failed.
        public var writeErrors: Int
        /// Writes whose event arrived within the deadline.
        public var delivered: Int
        /// Writes whose event did not.
        public var missed: Int
        /// Achieved writes per second.
        public var writesPerSecond: Double
        /// Write sent → its event, median.
        public var deliveryP50: Double
        /// Write sent → its event, 99th percentile.
        public var deliveryP99: Double
        /// Write sent → its event, worst.
        public var deliveryMax: Double
        /// Write answered → its event, 99th percentile (0 when the event came first).
        public var afterAnswerP99: Double
        /// Write round trip, median.
        public var writeP50: Double
        /// Write round trip, 99th percentile.
        public var writeP99: Double
        /// Seconds to sign the users up and open their streams.
        public var setupSeconds: Double
    }

    /// Runs the benchmark; progress goes to `log`.
    public static func run(_ options: Options, log: @escaping @Sendable (String) -> Void) async throws -> Result {
        let group = MultiThreadedEventLoopGroup.singleton
        let setupStart = ContinuousClock.now
        log("signing up \(options.users) guests")
        let tokens = try await signUp(options, group: group)
        let tracker = DeliveryTracker()
        log("opening \(options.users) event streams")
        let streams = try await openStreams(options, tokens: tokens, tracker: tracker, group: group)
        // Events sent on connect (the current state) are not measured.
        try await Task.sleep(for: .seconds(2))
        tracker.reset()
        let setupSeconds = seconds(ContinuousClock.now - setupStart)
        log("\(streams.count) streams open after \(String(format: "%.1f", setupSeconds)) s; writing \(options.writesPerSecond)/s for \(options.duration) s")

        let total = options.writesPerSecond * options.duration
        let start = ContinuousClock.now + .milliseconds(100)
        let interval = Duration.seconds(1) / options.writesPerSecond
        await withTaskGroup(of: Void.self) { writers in
            for writer in 0..<options.writers {
                writers.addTask {
                    let connection = LoadConnection(host: options.host, port: options.port, group: group, timeout: .seconds(10))
                    var index = writer
                    while index < total {
                        let user = index % options.users
                        try? await Task.sleep(until: start + interval * index, clock: .continuous)
                        var fields: [JSONKey: JSONValue] = ["n": .int(index)]
                        if let rangeKey = options.rangeKey { fields[rangeKey] = .string("2026-11-\(10 + index % 18)") }
                        let body = JSONValue.object(["data": .object(fields)]).bytes
                        let sent = ContinuousClock.now
                        tracker.sent(user: user, at: sent)
                        let request = LoadRequest(
                            .PUT, "/v1/collections/\(options.collection)/docs/w\(index)",
                            headers: [("Authorization", "Bearer \(tokens[user])")], body: body)
                        if let response = try? await connection.send(request), (200..<300).contains(response.status) {
                            let now = ContinuousClock.now
                            tracker.answered(user: user, sent: sent, at: now)
                        } else {
                            tracker.failed(user: user)
                        }
                        index += options.writers
                    }
                    await connection.close()
                }
            }
        }
        let elapsed = seconds(ContinuousClock.now - start)
        // The last events may still be on their way.
        let waitUntil = ContinuousClock.now + options.deadline
        while tracker.outstanding > 0, ContinuousClock.now < waitUntil { try await Task.sleep(for: .milliseconds(50)) }
        let openAtEnd = streams.filter(\.isOpen).count
        for stream in streams { await stream.close() }

        let outcome = tracker.outcome(deadline: millis(options.deadline))
        let writes = outcome.writeTimes
        return Result(
            streams: streams.count, streamsOpenAtEnd: openAtEnd, writes: writes.count, writeErrors: outcome.writeErrors,
            delivered: outcome.latencies.count, missed: outcome.missed + tracker.outstanding,
            writesPerSecond: Double(writes.count) / max(elapsed, 0.001),
            deliveryP50: percentile(outcome.latencies, 0.50), deliveryP99: percentile(outcome.latencies, 0.99),
            deliveryMax: outcome.latencies.last ?? 0, afterAnswerP99: percentile(outcome.afterAnswer, 0.99),
            writeP50: percentile(writes, 0.50), writeP99: percentile(writes, 0.99), setupSeconds: setupSeconds)
    }

    /// Signs up `users` guests, 64 at a time; their access tokens.
    private static func signUp(_ options: Options, group: any EventLoopGroup) async throws -> [String] {
        let tokens = Mutex<[String?]>(Array(repeating: nil, count: options.users))
        try await forEach(0..<options.users, concurrency: 64, group: group, options: options) { index, connection in
            let body = JSONValue.object(["deviceId": .string("bench-events-\(UUID().uuidString)")]).bytes
            let response = try await connection.send(LoadRequest(.POST, "/v1/auth/guest", body: body))
            guard (200..<300).contains(response.status), let token = try? JSONValue.parse(response.body)["accessToken"]?.stringValue
            else { throw EventStreamError.status(response.status) }
            tokens.withLock { $0[index] = token }
        }
        return tokens.withLock { $0.map { $0 ?? "" } }
    }

    /// Opens one stream per user, 64 at a time.
    private static func openStreams(
        _ options: Options, tokens: [String], tracker: DeliveryTracker, group: any EventLoopGroup
    ) async throws -> [EventStreamClient] {
        let streams = Mutex<[EventStreamClient]>([])
        try await forEach(0..<options.users, concurrency: 64, group: group, options: options) { index, _ in
            let stream = try await EventStreamClient.open(
                host: options.host, port: options.port, path: "/v1/sync/events",
                headers: [("Authorization", "Bearer \(tokens[index])")], group: group
            ) { event in
                if event.name == "changed" { tracker.delivered(user: index, at: ContinuousClock.now) }
            }
            streams.withLock { $0.append(stream) }
        }
        return streams.withLock { $0 }
    }

    /// Runs `work` for each index on `concurrency` tasks, each with its own connection.
    private static func forEach(
        _ indices: Range<Int>, concurrency: Int, group: any EventLoopGroup, options: Options,
        _ work: @escaping @Sendable (Int, LoadConnection) async throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for lane in 0..<concurrency {
                tasks.addTask {
                    let connection = LoadConnection(host: options.host, port: options.port, group: group)
                    var index = indices.lowerBound + lane
                    while index < indices.upperBound {
                        try await work(index, connection)
                        index += concurrency
                    }
                    await connection.close()
                }
            }
            try await tasks.waitForAll()
        }
    }

    private static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }
}

/// Per user: when their write was sent (and answered), until their stream reports a change.
private final class DeliveryTracker: Sendable {
    private struct Pending {
        var sent: ContinuousClock.Instant
        var answered: ContinuousClock.Instant?
    }

    private struct State {
        var pending: [Int: Pending] = [:]
        var latencies: [Double] = []
        var afterAnswer: [Double] = []
        var writeTimes: [Double] = []
        var writeErrors = 0
    }

    private let state = Mutex(State())

    func reset() { state.withLock { $0 = State() } }

    func sent(user: Int, at instant: ContinuousClock.Instant) {
        state.withLock { $0.pending[user] = Pending(sent: instant) }
    }

    func answered(user: Int, sent: ContinuousClock.Instant, at instant: ContinuousClock.Instant) {
        state.withLock { state in
            state.writeTimes.append(millis(instant - sent))
            if state.pending[user] != nil { state.pending[user]?.answered = instant }
        }
    }

    func failed(user: Int) {
        state.withLock { state in
            state.writeErrors += 1
            state.pending.removeValue(forKey: user)
        }
    }

    func delivered(user: Int, at instant: ContinuousClock.Instant) {
        state.withLock { state in
            guard let pending = state.pending.removeValue(forKey: user) else { return }
            state.latencies.append(millis(instant - pending.sent))
            state.afterAnswer.append(pending.answered.map { max(0, millis(instant - $0)) } ?? 0)
        }
    }

    var outstanding: Int { state.withLock { $0.pending.count } }

    func outcome(deadline: Double) -> (latencies: [Double], afterAnswer: [Double], missed: Int, writeTimes: [Double], writeErrors: Int) {
        state.withLock { state in
            let late = state.latencies.filter { $0 > deadline }.count
            return (
                state.latencies.filter { $0 <= deadline }.sorted(), state.afterAnswer.sorted(), late, state.writeTimes.sorted(),
                state.writeErrors
            )
        }
    }
}

private func millis(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
}

private func seconds(_ duration: Duration) -> Double { millis(duration) / 1_000 }
