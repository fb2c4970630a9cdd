import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyStore

/// Carries change events between the server processes that share one PostgreSQL database, over
/// LISTEN/NOTIFY on ``channel``: what one process publishes, every other one hears.
///
/// - **Publishing** (``publish(_:)``) appends the event to an in-memory ``ChangeBatch`` and rings a bell:
///   no round trip on the caller's path. One task sends the batch with `SELECT pg_notify($1, $2)` on the
///   connection below, at most one every ``sendGap``; events published meanwhile wait and go out together in
///   the next one, coalesced per user and packed into payloads of at most ``maxPayloadBytes`` — so a burst of
///   writes costs a few notifications, not one per write. At most ``maxPendingUsers`` users wait; beyond,
///   the batch records that events were lost and receivers treat every stream as stale.
/// - **Listening**: one dedicated `PostgresConnection` outside the pool (its `application_name` is
///   ``applicationName``) runs `LISTEN`; each payload from another process is decoded and handed to
///   `onInput` as `.events`. The process's own payloads come back too and are skipped (each carries the
///   sender's random origin id): a process delivers its own events locally, directly, so every stream
///   hears each event once.
/// - **Reconnecting**: when the connection fails (the database restarted, the backend was terminated), it
///   connects again after ``backoffDelay(attempt:first:maximum:unit:)`` on the injected clock (50 ms to 1 s).
///   Notifications sent while nobody listened are lost, so once `LISTEN` is back `onInput` gets
///   `.listening(reconnected: true)`: the server ends its streams, and their clients reconnect and catch up.
/// - **Checking that it hears** (given a ``SelfCheck``): once `LISTEN` is active, and every
///   ``SelfCheck/interval`` after, a probe (`tally-probe <origin> <n>`) is sent through the store's pool — another
///   session than the listener's — and must come back within ``SelfCheck/timeout``. ``ListenerSelfCheck``
///   decides: a probe not heard logs one error naming the likely cause (a transaction pooler in front of the
///   listener) and `TALLY_LISTEN_DATABASE_URL`, and ``SelfCheck/onDelivery`` gets ``EventDelivery/polling``, so
///   the owner polls the database (``ListenerFallbackPoller``) instead of going quiet; a probe heard again gives
///   ``EventDelivery/listening``. Delivery is polling until the first probe is heard, and again while the
///   listener reconnects.
///
/// Notifications are hints, never the data: a receiver reads the state it is told about.
public final class PostgresNotifications: Service, Sendable {
    /// What the listener hands its owner.
    public enum Input: Sendable {
        /// `LISTEN` is active; `reconnected`: after a lost connection, so notifications may have been missed.
        case listening(reconnected: Bool)
        /// Events another process published.
        case events([ChangeEvent])
        /// Another process dropped events it could not send: every stream is stale.
        case eventsLost
    }

    /// The NOTIFY channel.
    public static let channel = "tally_events"
    /// PostgreSQL's limit is "shorter than 8000 bytes".
    public static let maxPayloadBytes = 7_999
    /// Users whose events may wait to be sent (a batch a database outage keeps from going out stays bounded).
    public static let maxPendingUsers = 100_000
    /// The listener connection's `application_name` (what operators see in `pg_stat_activity`).
    public static let applicationName = "tally-events"

    /// The listener's self-check: probes sent through `store`'s pool, every `interval`, heard within `timeout`.
    public struct SelfCheck: Sendable {
        /// Sends the probes (through its pool: another session than the listener's).
        let store: PostgresStore
        /// Between probes, on the notifier's clock.
        let interval: TimeInterval
        /// How long a probe may take to come back.
        let timeout: TimeInterval
        /// Told each time delivery changes (it starts as ``EventDelivery/polling``).
        let onDelivery: @Sendable (EventDelivery) -> Void

        /// A self-check probing through `store` every `interval` (a minute) and expecting each probe back within
        /// `timeout` (2 s); `onDelivery` is told when events must be polled, and when they are heard again.
        public init(
            probingThrough store: PostgresStore, every interval: TimeInterval = 60, timeout: TimeInterval = 2,
            onDelivery: @escaping @Sendable (EventDelivery) -> Void
        ) {
            (self.store, self.interval, self.timeout, self.onDelivery) = (store, interval, timeout, onDelivery)
        }
    }

    /// The first word of a probe's payload (never a ``ChangeBatch``'s: other processes ignore it).
    static let probeMagic = "tally-probe"

    private struct State {
        var batch = ChangeBatch()
        var check = ListenerSelfCheck()
        /// The sender, waiting for something to send.
        var bell: CheckedContinuation<Void, any Error>?
    }

    private let configuration: PostgresConnection.Configuration
    private let clock: any TallyClock
    private let logger: Logger
    private let eventLoops: any EventLoopGroup
    private let onInput: @Sendable (Input) -> Void
    private let selfCheck: SelfCheck?
    private let state = Mutex(State())
    /// Whether `LISTEN` was ever active (a later one follows a lost connection).
    private let hasListened = Atomic(false)
    /// This process's id in payloads.
    let origin = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16).description

    /// A notifier connecting like `connection` (a pool's connection configuration: same database and role),
    /// checking that it hears when given `selfCheck`.
    public init(
        connection: PostgresConnection.Configuration, clock: any TallyClock, logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, selfCheck: SelfCheck? = nil,
        onInput: @escaping @Sendable (Input) -> Void
    ) {
        self.selfCheck = selfCheck
        var configuration = connection
        configuration.options.additionalStartupParameters.append(("application_name", Self.applicationName))
        self.configuration = configuration
        self.clock = clock
        self.logger = PostgresStore.driverLogger(logger)
        self.eventLoops = eventLoopGroup
        self.onInput = onInput
    }

    /// Probes the self-check sent so far.
    var probesSent: UInt64 { state.withLock { $0.check.probesSent } }

    /// Queues `event` for the other processes. Cheap: a lock and a dictionary insert.
    public func publish(_ event: ChangeEvent) { publish([event]) }

    /// Queues `events` for the other processes together: they go out in one batch (a user's events in one payload),
    /// so a process that hears one has heard them all (the sessions a password reset ends).
    public func publish(_ events: [ChangeEvent]) {
        let bell = state.withLock { state in
            for event in events { state.batch.add(event, maxUsers: Self.maxPendingUsers) }
            defer { state.bell = nil }
            return state.bell
        }
        bell?.resume()
    }

    /// Listens and sends until the task is cancelled or the service group shuts down gracefully,
    /// reconnecting whenever the connection fails.
    public func run() async {
        var failures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let (listened, error) = await cancelWhenGracefulShutdown { await self.session() }
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            perform(state.withLock { $0.check.listenerLost() })
            failures = listened ? 1 : failures + 1
            if failures == 1 {
                logger.warning(
                    "postgres: the event listener lost its connection; reconnecting",
                    metadata: ["error": "\(error.map { "\(PostgresFailure($0))" } ?? "-")"])
            }
            let pause = backoffDelay(attempt: failures, first: 0.05, maximum: 1, unit: .random(in: 0..<1))
            try? await cancelWhenGracefulShutdown { try await self.clock.sleep(for: pause) }
        }
    }

    /// One connection's life: connect, `LISTEN`, then receive and send until either fails. Returns whether
    /// `LISTEN` became active, and why the session ended.
    private func session() async -> (listened: Bool, error: (any Error)?) {
        var listened = false
        do {
            let connected = try await PostgresConnection.connect(
                on: eventLoops.next(), configuration: configuration, id: 0, logger: logger
            ).get()
            // A statement written to a closed PostgresNIO connection is never answered: the watch fails it instead.
            let connection = PooledConnection(connection: connected, watch: ConnectionWatch())
            connected.closeFuture.whenComplete { _ in connection.watch.closed() }
            defer { connected.close().whenComplete { _ in } }
            try await connected.listen(on: Self.channel) { notifications in
                listened = true
                onInput(.listening(reconnected: hasListened.exchange(true, ordering: .relaxed)))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await self.send(on: connection) }
                    group.addTask {
                        for try await notification in notifications { self.receive(notification.payload) }
                        throw PoolFailure.connectionClosed
                    }
                    if let selfCheck { group.addTask { try await self.probe(selfCheck) } }
                    defer { group.cancelAll() }
                    try await group.next()
                }
            }
            return (listened, nil)
        } catch {
            return (listened, error)
        }
    }

    /// Sends each batch as it fills, at most one every ``sendGap``; a batch that fails goes back in front of what waits.
    private func send(on connection: PooledConnection) async throws {
        while true {
            let batch = try await nextBatch()
            do {
                for payload in batch.payloads(origin: origin, limit: Self.maxPayloadBytes) {
                    try await connection.rows("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger)
                }
            } catch {
                state.withLock { state in
                    var requeued = batch
                    requeued.merge(state.batch, maxUsers: Self.maxPendingUsers)
                    state.batch = requeued
                }
                throw error
            }
            try await Task.sleep(for: Self.sendGap)
        }
    }

    /// The least time between two sends; what is published meanwhile goes out together in the next. Without it, a
    /// send's round trip was shorter than the time between two writes, and nearly every write was a NOTIFY of its own
    /// (8,911 for 10,000 writes under `tally bench-events`): a round trip, a commit and the notification coming back
    /// to this process's own listener, each. The first event after a quiet spell goes at once; under load the other
    /// processes hear of a write at most this much later. Pacing, not a deadline: real time, not the injected clock.
    static let sendGap: Duration = .milliseconds(10)

    /// Waits until something is queued, and takes it all.
    private func nextBatch() async throws -> ChangeBatch {
        while true {
            let taken: ChangeBatch? = state.withLock { state in
                guard !state.batch.isEmpty else { return nil }
                defer { state.batch = ChangeBatch() }
                return state.batch
            }
            if let taken { return taken }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    enum Decision { case ring, wait, cancelled }
                    let decision = state.withLock { state -> Decision in
                        if Task.isCancelled { return .cancelled }
                        if !state.batch.isEmpty { return .ring }
                        state.bell = continuation
                        return .wait
                    }
                    switch decision {
                    case .ring: continuation.resume()
                    case .cancelled: continuation.resume(throwing: CancellationError())
                    case .wait: break
                    }
                }
            } onCancel: {
                state.withLock { state in defer { state.bell = nil }; return state.bell }?.resume(throwing: CancellationError())
            }
        }
    }

    /// Probes until the session ends (cancelled with it): one now, then one every interval; a probe the pool
    /// could not send is tried again after the timeout.
    private func probe(_ check: SelfCheck) async throws {
        while true {
            let probe = state.withLock { $0.check.probeSent() }
            do {
                try await check.store.notify(channel: Self.channel, payload: "\(Self.probeMagic) \(origin) \(probe)")
            } catch {
                try Task.checkCancellation()
                state.withLock { $0.check.probeFailed(probe) }
                logger.debug("postgres: the listener's probe could not be sent", metadata: ["error": "\(PostgresFailure(error))"])
                try await clock.sleep(for: check.timeout)
                continue
            }
            try await clock.sleep(for: check.timeout)
            perform(state.withLock { $0.check.timedOut(probe) })
            try await clock.sleep(for: max(0, check.interval - check.timeout))
        }
    }

    /// Does what the self-check decided: tells the owner how events are delivered now, and logs the first miss
    /// of an episode and its end.
    private func perform(_ action: ListenerSelfCheck.Action?) {
        guard let selfCheck, let action else { return }
        switch action {
        case .startPolling(let report):
            if report {
                logger.error(
                    """
                    postgres: the event listener did not hear its own notification within \(selfCheck.timeout.formatted()) s: \
                    its LISTEN likely goes through a transaction pooler (PgBouncer pool_mode=transaction, most managed \
                    poolers), which accepts LISTEN and delivers nothing. Set TALLY_LISTEN_DATABASE_URL to PostgreSQL itself \
                    or to a pooler in session mode. Meanwhile the other processes' events and sign-outs are polled from \
                    the database every \(ListenerFallbackPoller.defaultInterval.formatted()) s
                    """)
            }
            selfCheck.onDelivery(.polling)
        case .stopPolling(let recovered):
            if recovered { logger.notice("postgres: the event listener hears its own notifications again; polling stops") }
            selfCheck.onDelivery(.listening)
        }
    }

    private func receive(_ payload: String) {
        if payload.hasPrefix(Self.probeMagic + " ") {
            let words = payload.split(separator: " ")
            if words.count == 3, words[1] == origin, let probe = UInt64(words[2]) {
                perform(state.withLock { $0.check.heard(probe) })
            }
            return
        }
        guard let decoded = ChangeBatch.decode(payload), decoded.origin != origin else { return }
        if decoded.lostEvents { onInput(.eventsLost) }
        if !decoded.events.isEmpty { onInput(.events(decoded.events)) }
    }
}
