/// The bookkeeping of ``PostgresPool``, without I/O or time of its own: which connections are idle or
/// leased, who waits for one and until when, and whether the database is reachable. The pool feeds it
/// events under its lock and performs what it answers (resume a waiter, close a connection).
///
/// The rules that keep a server alive through a database outage live here:
/// - a lease takes an idle connection if there is one, whatever else is known;
/// - otherwise, while the database is known to be down (the last connection attempt failed), it fails at
///   once instead of queueing, so requests answer `503` in microseconds rather than hanging;
/// - otherwise it waits in line, but never past its deadline (``tick(now:)`` expires it);
/// - a failed connection attempt fails every waiter: nothing is coming for them;
/// - a lease held longer than the maximum is reported once, so the pool closes its connection and the
///   statement stuck on it fails (a database that stopped answering cannot wedge a caller for good).
struct PoolState<Connection, Waiter> {
    /// Whether the database can be reached, as far as connection attempts tell.
    enum Health: Equatable, Sendable {
        /// No connection attempt finished yet.
        case starting
        /// The last attempt connected.
        case up
        /// The last attempt failed.
        case down
    }

    /// What a lease gets.
    enum LeaseDecision {
        /// This idle connection.
        case connection(id: Int, Connection)
        /// Nothing yet: the waiter is queued until a connection frees up or its deadline passes.
        case wait
        /// Nothing, at once.
        case fail(PoolFailure)
    }

    private struct Idle {
        let id: Int
        let connection: Connection
    }

    private struct Leased {
        let connection: Connection
        let since: ContinuousClock.Instant
        var reported = false
    }

    private struct Queued {
        let id: Int
        let waiter: Waiter
        let deadline: ContinuousClock.Instant
    }

    private(set) var health = Health.starting
    private(set) var isShuttingDown = false
    private var idle: [Idle] = []
    private var leased: [Int: Leased] = [:]
    private var queue: [Queued] = []

    /// Idle connections.
    var idleCount: Int { idle.count }
    /// Leased connections.
    var leasedCount: Int { leased.count }
    /// Waiting leases.
    var waitingCount: Int { queue.count }

    // MARK: Leases

    /// A lease by `waiter` (known as `id` for cancellation) at `now`, waiting at most until `deadline`.
    mutating func lease(_ waiter: Waiter, id: Int, now: ContinuousClock.Instant, deadline: ContinuousClock.Instant) -> LeaseDecision {
        if isShuttingDown { return .fail(.shuttingDown) }
        if let next = idle.popLast() {
            leased[next.id] = Leased(connection: next.connection, since: now)
            return .connection(id: next.id, next.connection)
        }
        if health == .down { return .fail(.unreachable) }
        queue.append(Queued(id: id, waiter: waiter, deadline: deadline))
        return .wait
    }

    /// Takes back connection `id` at `now`. A reusable one goes to the first waiter (returned, with the
    /// connection, for the caller to resume) or back to the idle ones; any other is forgotten (the caller
    /// closes it, and its slot connects a new one).
    mutating func release(id: Int, reusable: Bool, now: ContinuousClock.Instant) -> (waiter: Waiter, connection: Connection)? {
        guard let returned = leased.removeValue(forKey: id) else { return nil }
        guard reusable, !isShuttingDown else { return nil }
        return handOut(id: id, returned.connection, now: now)
    }

    /// A waiter that gave up (its task was cancelled): removed from the line, returned if it was there.
    mutating func cancel(waiterId: Int) -> Waiter? {
        guard let index = queue.firstIndex(where: { $0.id == waiterId }) else { return nil }
        return queue.remove(at: index).waiter
    }

    // MARK: Connections

    /// A slot connected `connection` as `id`: the database is up. Returns the waiter it goes to, if any.
    mutating func connected(id: Int, _ connection: Connection, now: ContinuousClock.Instant) -> Waiter? {
        health = .up
        return handOut(id: id, connection, now: now)?.waiter
    }

    /// A connection attempt failed: the database is down. Returns the waiters to fail.
    mutating func connectFailed() -> [Waiter] {
        health = .down
        defer { queue.removeAll() }
        return queue.map(\.waiter)
    }

    /// Connection `id` closed by itself (the server ended it, the network dropped it). An idle one is
    /// forgotten here; a leased one when it is released.
    mutating func closed(id: Int) {
        idle.removeAll { $0.id == id }
    }

    // MARK: Time and shutdown

    /// What is due at `now`: waiters past their deadline (to fail) and connections leased for longer than
    /// `maximumLease` (to close; each reported once).
    mutating func tick(now: ContinuousClock.Instant, maximumLease: Duration) -> (expired: [Waiter], overdue: [Connection]) {
        var expired: [Waiter] = []
        queue.removeAll { queued in
            guard queued.deadline <= now else { return false }
            expired.append(queued.waiter)
            return true
        }
        var overdue: [Connection] = []
        for (id, lease) in leased where !lease.reported && now - lease.since > maximumLease {
            leased[id]?.reported = true
            overdue.append(lease.connection)
        }
        return (expired, overdue)
    }

    /// Stops leasing: returns the waiters to fail and the idle connections to close.
    mutating func shutDown() -> (waiters: [Waiter], idle: [Connection]) {
        isShuttingDown = true
        defer {
            queue.removeAll()
            idle.removeAll()
        }
        return (queue.map(\.waiter), idle.map(\.connection))
    }

    /// Takes every idle connection out of the pool (for closing: their slots connect new ones).
    mutating func takeIdle() -> [Connection] {
        defer { idle.removeAll() }
        return idle.map(\.connection)
    }

    /// Leased connections, for closing them when the pool stops.
    var leasedConnections: [Connection] { leased.values.map(\.connection) }

    private mutating func handOut(id: Int, _ connection: Connection, now: ContinuousClock.Instant) -> (waiter: Waiter, connection: Connection)? {
        guard !isShuttingDown else { return nil }
        guard !queue.isEmpty else {
            idle.append(Idle(id: id, connection: connection))
            return nil
        }
        let next = queue.removeFirst()
        leased[id] = Leased(connection: connection, since: now)
        return (next.waiter, connection)
    }
}

/// Why a lease got no connection.
enum PoolFailure: Error, Equatable, Sendable {
    /// The database could not be reached at the last attempt.
    case unreachable
    /// No connection freed up before the lease's deadline.
    case timedOut
    /// The pool is stopping.
    case shuttingDown
    /// The connection closed under a statement (see ``PooledConnection``).
    case connectionClosed
}
