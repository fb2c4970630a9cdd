import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyStore

/// PostgreSQL connections opened as they are needed, up to a maximum, and closed when idle, that fails fast
/// while the database is unreachable or too busy and recovers by itself when it returns.
///
/// Tally used PostgresNIO's `PostgresClient` before, and it could not survive an outage: with
/// `minimumConnections == maximumConnections` (to avoid the per-release idle timers, benchmarks/postgres-levers.md) a
/// database restart killed the process in `PoolStateMachine.ConnectionGroup.createNewDemandConnectionIfPossible`
/// (`precondition(minimumConcurrentConnections <= stats.active)`: while connection creation is failing, the
/// pool destroys every failed connection but one, so `active` drops below the minimum, and the next lease
/// that finds no idle connection trips the precondition — also after the database is back, since nothing
/// refills the pool); and short of that, a lease waits for the pool's circuit breaker (60 s) instead of
/// failing, and reconnects back off up to a minute. See ARCHITECTURE.md, "PostgreSQL outages".
///
/// Here each open connection has a slot, a task that connects, waits for the connection to close, and connects
/// again while the pool still needs it (``PoolState/closed(id:)``). One slot (``Configuration/minimumConnections``)
/// runs from the start and always: it backs off at most ``Configuration/reconnectBackoffLimit`` between failed
/// attempts (``backoffDelay(attempt:first:maximum:unit:)`` from 50 ms), so an outage and its end are noticed
/// without a lease. The others start when a lease finds no idle connection, up to ``Configuration/size``, and end
/// when their connection has been idle for ``Configuration/idleTimeout`` or an attempt fails. Many processes
/// behind one pooler or one `max_connections` then hold what their load uses, not their maximum (README,
/// "Running in production", pool sizing).
///
/// The bookkeeping is ``PoolState``. A lease fails at once with ``PoolFailure/unreachable`` while the last
/// connection attempt failed and no connection is idle, and with ``PoolFailure/timedOut`` after
/// ``Configuration/acquireTimeout`` (a few seconds, well under a request's timeout: the request answers 503, and
/// one `warning` per 10 s says how many got no connection); a lease held longer than
/// ``Configuration/maximumLease`` has its connection closed, which fails the statement stuck on it. No timers
/// per lease: one ticker per pool, on the injected clock, checks deadlines and idle connections.
public final class PostgresPool: Service, Sendable {
    /// How to connect, how many connections, and how long to wait.
    public struct Configuration: Sendable {
        /// The default maximum of connections per process (``size``). The 10,000-user load at 3,000 ops/s on two
        /// processes kept 1–5 server sessions active at once of the 44 they held (issue 36): 8 leaves a process
        /// room for all of those and a burst, and two processes with their listeners (2 × (8 + 1) = 18) fit
        /// PgBouncer's default `default_pool_size` of 20 in session mode (docs/production.md).
        public static let defaultSize = 8
        /// The default ``acquireTimeout``.
        public static let defaultAcquireTimeout: Duration = .seconds(5)

        /// Where and as whom to connect, and the connections' own options (startup parameters, connect timeout).
        public var connection: PostgresConnection.Configuration
        /// The most connections open at once (opened as leases need them).
        public var size: Int
        /// Connections opened at start and kept open (at least one, at most ``size``).
        public var minimumConnections = 1
        /// How long a connection beyond ``minimumConnections`` stays open unused.
        public var idleTimeout: Duration = .seconds(60)
        /// The longest a lease waits for a connection while the database is reachable (under load); then it fails
        /// with ``PoolFailure/timedOut`` (a 503).
        public var acquireTimeout: Duration = Configuration.defaultAcquireTimeout
        /// The longest a lease may hold its connection before the connection is closed under it.
        public var maximumLease: Duration = .seconds(30)
        /// The longest pause between two connection attempts of one slot while the database is down.
        public var reconnectBackoffLimit: Duration = .seconds(1)
        /// How often deadlines and idle connections are checked.
        public var tickInterval: Duration = .milliseconds(100)
        /// How the store's named statements are sent (``PooledConnection/execute(_:logger:)``).
        public var statements = PostgresStatements.prepared

        /// At most `size` connections to `connection`, with the default timeouts.
        public init(connection: PostgresConnection.Configuration, size: Int) {
            self.connection = connection
            self.size = size
        }
    }

    /// A lease in line.
    private struct Waiter: Sendable {
        let continuation: CheckedContinuation<(id: Int, connection: PooledConnection), any Error>
    }

    /// The pool's configuration.
    public let configuration: Configuration
    private let logger: Logger
    private let eventLoops: any EventLoopGroup
    /// What deadlines, idle times and the ticker read (tests advance a ``ManualClock``).
    private let clock: any TallyClock
    private let state: Mutex<PoolState<PooledConnection, Waiter>>
    private let ids = Atomic<Int>(0)
    /// Slots to start beyond the minimum, asked for by leases; ``run()`` starts them.
    private let slotRequests: AsyncStream<Void>.Continuation
    private let slotRequestStream: AsyncStream<Void>
    /// When the database went down, for the log line that says it is back.
    private let downSince = Mutex<ContinuousClock.Instant?>(nil)
    /// Connections opened so far (tests wait on it to see a closed one replaced).
    let connectionsOpened = Atomic(0)
    /// Whether a lost prepared statement was reported (once per pool: its cause is the setup, not the moment).
    private let reportedLostStatement = Atomic(false)

    /// A pool of at most `configuration.size` connections whose deadlines and idle times follow `clock`;
    /// nothing connects until ``run()``.
    public init(
        configuration: Configuration, logger: Logger, clock: any TallyClock = SystemClock(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        precondition(configuration.size >= 1, "a pool needs at least one connection")
        precondition((1...configuration.size).contains(configuration.minimumConnections), "a pool keeps 1...size connections")
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.eventLoops = eventLoopGroup
        self.state = Mutex(PoolState(limits: .init(
            maximum: configuration.size, minimum: configuration.minimumConnections,
            idleTimeout: configuration.idleTimeout.timeInterval, reportInterval: Self.reportInterval)))
        (slotRequestStream, slotRequests) = AsyncStream.makeStream(of: Void.self)
    }

    /// The least time between two `warning`s about leases that got no connection in time.
    static let reportInterval: TimeInterval = 10

    /// Whether the last connection attempt succeeded (`false` also before the first one finished).
    public var isReachable: Bool { state.withLock { $0.health == .up } }

    /// Connections open or being opened now.
    public var openConnections: Int { state.withLock { $0.slotCount } }

    /// Leases waiting for a connection now.
    var waitingLeases: Int { state.withLock { $0.waitingCount } }

    // MARK: Leasing

    /// Runs `body` with a connection of its own; throws ``PoolFailure`` when none can be had (at once while
    /// the database is down). The connection goes back to the pool when `body` returns or throws, unless it
    /// closed meanwhile.
    public func withConnection<T>(_ body: (PooledConnection) async throws -> T) async throws -> T {
        var (id, connection) = try await lease()
        // One that closed (its server session ended: terminated, restarted, dropped by a pooler) or broke while
        // idle is replaced, not handed out: its slot connects a new one.
        while connection.connection.isClosed || connection.watch.broken != nil {
            release(id: id, connection)
            (id, connection) = try await lease()
        }
        do {
            // On the connection's event loop: its statements' answers resume `body` with no hand-off between threads.
            let result = try await withTaskExecutorPreference(connection.executor) { try await body(connection) }
            release(id: id, connection)
            return result
        } catch {
            // A statement that failed leaves the connection ready unless the connection itself failed;
            // PostgresNIO then closes it, and the release sees that.
            release(id: id, connection)
            throw error
        }
    }

    /// Runs `body` in a transaction (see ``PooledConnection/transaction(logger:committed:_:)``): `committed` gets the
    /// changes its declared writes noted once it commits.
    func withTransaction<T>(
        logger: Logger, committed: (PendingChanges) -> Void = { _ in }, _ body: (PooledConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { try await $0.transaction(logger: logger, committed: committed, body) }
    }

    private func lease() async throws -> (id: Int, connection: PooledConnection) {
        let waiterId = ids.wrappingAdd(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let now = clock.now
                let decision = state.withLock {
                    $0.lease(
                        Waiter(continuation: continuation), id: waiterId, now: now,
                        deadline: now.addingTimeInterval(configuration.acquireTimeout.timeInterval))
                }
                switch decision {
                case .connection(let id, let connection): continuation.resume(returning: (id, connection))
                case .fail(let failure): continuation.resume(throwing: failure)
                case .wait(let open): if open { slotRequests.yield() }
                }
            }
        } onCancel: {
            state.withLock { $0.cancel(waiterId: waiterId) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Takes a connection back: a closed or broken one (``BrokenConnection``) is never reused; a broken one is
    /// closed, and its slot connects a new one.
    private func release(id: Int, _ connection: PooledConnection) {
        let broken = connection.watch.broken
        let reusable = !connection.connection.isClosed && broken == nil
        let handOver = state.withLock { $0.release(id: id, reusable: reusable, now: clock.now) }
        if let handOver { handOver.waiter.continuation.resume(returning: (id, handOver.connection)) }
        guard let broken else { return }
        connection.connection.close().whenComplete { _ in }
        guard case .statementLost(let sqlState) = broken else { return }
        if !reportedLostStatement.exchange(true, ordering: .relaxed) {
            logger.error(
                """
                postgres: a prepared statement is missing on its connection's server session or is there already, as \
                behind a transaction pooler (PgBouncer in pool_mode=transaction, a managed database's pooler port): \
                set TALLY_POSTGRES_STATEMENTS=unnamed, or connect in session mode. Each such connection is closed \
                and replaced
                """, metadata: ["postgres.sqlstate": "\(sqlState)"])
        } else {
            logger.debug("postgres: replacing a connection that lost a prepared statement", metadata: ["postgres.sqlstate": "\(sqlState)"])
        }
    }

    /// Closes every open connection as soon as it is idle, so that new ones are opened: after a change
    /// to what new sessions start with (``PostgresStore/migrate()`` setting the role's `plan_cache_mode`).
    func retireConnections() {
        let (idle, leased) = state.withLock { state in (state.takeIdle(), state.leasedConnections) }
        for connection in leased { connection.watch.broke(.retired) }
        for connection in idle { connection.connection.close().whenComplete { _ in } }
    }

    // MARK: Running

    /// Opens the minimum of connections, then more as leases ask (up to the maximum), and keeps them until the
    /// task is cancelled or the service group shuts down gracefully; then fails the waiters and closes every
    /// connection.
    public func run() async {
        await cancelWhenGracefulShutdown {
            await withTaskCancellationHandler {
                await withDiscardingTaskGroup { group in
                    for _ in 0..<self.configuration.minimumConnections {
                        group.addTask { await self.runSlot() }
                    }
                    group.addTask { await self.runTicker() }
                    // Ends when the pool shuts down (the stream is finished then).
                    for await _ in self.slotRequestStream {
                        group.addTask { await self.runSlot() }
                    }
                }
            } onCancel: {
                // Closing the connections ends the slots' waits on them.
                self.shutDown()
            }
        }
        shutDown()
    }

    /// One slot: connect, serve until the connection closes, connect again while the pool needs it (``PoolState``
    /// decides); back off while attempts fail, or end when the pool no longer needs this slot.
    private func runSlot() async {
        var failures = 0
        while !Task.isCancelled {
            let id = ids.wrappingAdd(1, ordering: .relaxed).newValue
            let connection: PooledConnection
            do {
                let connected = try await PostgresConnection.connect(
                    on: eventLoops.next(), configuration: configuration.connection, id: id, logger: logger
                ).get()
                connection = PooledConnection(connection: connected, watch: ConnectionWatch(), statements: configuration.statements)
            } catch {
                failures += 1
                guard connectFailed(error) else { return }
                try? await Task.sleep(for: .seconds(backoffDelay(
                    attempt: failures, first: 0.05, maximum: configuration.reconnectBackoffLimit.timeInterval, unit: .random(in: 0..<1))))
                continue
            }
            failures = 0
            connectionsOpened.add(1, ordering: .relaxed)
            let now = clock.now
            let (waiter, shuttingDown) = state.withLock { state in
                state.isShuttingDown ? (nil, true) : (state.connected(id: id, connection, now: now), false)
            }
            if shuttingDown {
                try? await connection.connection.close().get()
                return
            }
            recovered()
            waiter?.continuation.resume(returning: (id, connection))
            try? await connection.connection.closeFuture.get()
            connection.watch.closed()
            guard state.withLock({ $0.closed(id: id) }) else { return }
        }
    }

    private func runTicker() async {
        while !Task.isCancelled {
            do { try await clock.sleep(for: configuration.tickInterval.timeInterval) } catch { return }
            let due = state.withLock { $0.tick(now: clock.now, maximumLease: configuration.maximumLease.timeInterval) }
            for waiter in due.expired { waiter.continuation.resume(throwing: PoolFailure.timedOut) }
            if let count = due.timedOutToReport {
                let (open, waiting) = state.withLock { ($0.slotCount, $0.waitingCount) }
                logger.warning(
                    """
                    postgres: requests got no connection within the lease timeout and answer 503: all connections of the \
                    pool are in use (raise TALLY_POSTGRES_POOL if the database has room, and the pooler's pool with it) or \
                    the database is slow to answer
                    """,
                    metadata: [
                        "postgres.timed_out": "\(count)", "postgres.lease_timeout": "\(configuration.acquireTimeout)",
                        "postgres.pool_maximum": "\(configuration.size)", "postgres.pool_open": "\(open)",
                        "postgres.waiting": "\(waiting)",
                    ])
            }
            for connection in due.overdue {
                logger.warning("postgres: closing a connection held longer than the maximum lease", metadata: [
                    "postgres.maximum_lease": "\(configuration.maximumLease)"
                ])
                connection.connection.close().whenComplete { _ in }
            }
            for connection in due.retired {
                logger.debug("postgres: closing an idle connection", metadata: ["postgres.idle_timeout": "\(configuration.idleTimeout)"])
                connection.connection.close().whenComplete { _ in }
            }
        }
    }

    /// Notes a failed connection attempt; returns whether its slot tries again.
    private func connectFailed(_ error: any Error) -> Bool {
        guard !Self.isBusy(error) else {
            // PostgreSQL answered but has no room for another connection: it is up, and the connections
            // already open serve the leases (which wait, up to their deadline).
            logger.debug("postgres: no room for another connection yet", metadata: ["error": "\(PostgresFailure(error))"])
            return state.withLock { $0.connectRefusedBusy() }
        }
        let (failed, wentDown) = state.withLock { state in
            let wasDown = state.health == .down
            let failed = state.connectFailed()
            return (failed, !wasDown && state.health == .down)
        }
        for waiter in failed.waiters { waiter.continuation.resume(throwing: PoolFailure.unreachable) }
        if wentDown { reportDown(error) }
        return failed.retry
    }

    /// Logs the first failed attempt of an outage.
    private func reportDown(_ error: any Error) {
        let first = downSince.withLock { since in
            guard since == nil else { return false }
            since = .now
            return true
        }
        if first {
            logger.error("postgres: the database cannot be reached; requests fail fast (503) until it is back", metadata: [
                "error": "\(PostgresFailure(error))"
            ])
        }
    }

    /// Whether a failed connection attempt shows a database that is up but full (SQLSTATE class 53,
    /// insufficient resources: `too_many_connections` and the like), rather than one that is down.
    static func isBusy(_ error: any Error) -> Bool {
        (error as? PSQLError)?.serverInfo?[.sqlState]?.hasPrefix("53") == true
    }

    private func recovered() {
        guard let since = downSince.withLock({ since in defer { since = nil }; return since }) else { return }
        logger.notice("postgres: the database is reachable again", metadata: ["postgres.down_for": "\(ContinuousClock.now - since)"])
    }

    private func shutDown() {
        let (waiters, idle, leased) = state.withLock { state in
            let (waiters, idle) = state.shutDown()
            return (waiters, idle, state.leasedConnections)
        }
        slotRequests.finish()
        for waiter in waiters { waiter.continuation.resume(throwing: PoolFailure.shuttingDown) }
        for connection in idle + leased { connection.connection.close().whenComplete { _ in } }
    }
}

extension Duration {
    /// This duration in seconds, for ``TallyClock``s and `Date`s.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
