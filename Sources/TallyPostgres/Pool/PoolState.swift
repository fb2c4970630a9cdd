import Foundation

/// The bookkeeping of ``PostgresPool``, without I/O or time of its own: which connections are idle or
/// leased, how many are open or being opened, who waits for one and until when, and whether the database is
/// reachable. The pool feeds it events under its lock, with the time of its injected clock, and performs what
/// it answers (open a connection, resume a waiter, close a connection).
///
/// Connections are opened as leases need them, up to ``Limits/maximum``; ``Limits/minimum`` are opened at start
/// and kept (they watch the database: their attempts find an outage, and its end). One idle longer than
/// ``Limits/idleTimeout`` is closed, down to the minimum.
///
/// The rules that keep a server alive through a database outage or a burst live here:
/// - a lease takes an idle connection if there is one (the one parked last), whatever else is known;
/// - otherwise, while the database is known to be down (an attempt failed with no connection open), it fails at
///   once instead of queueing, so requests answer `503` in microseconds rather than hanging;
/// - otherwise it waits in line, and a connection is opened for it when fewer are open than the maximum and
///   fewer are being opened than wait; it never waits past its deadline (``tick(now:maximumLease:)`` expires it,
///   and says when to log that, at most once per ``Limits/reportInterval``);
/// - a failed connection attempt with no connection open marks the database down and fails every waiter:
///   nothing is coming for them (with some open, the waiters wait for those);
/// - a lease held longer than the maximum is reported once, so the pool closes its connection and the
///   statement stuck on it fails (a database that stopped answering cannot wedge a caller for good).
struct PoolState<Connection, Waiter> {
    /// How many connections, and how long an unused one stays open.
    struct Limits: Sendable {
        /// The most connections open (or being opened) at once.
        var maximum: Int
        /// Connections opened at start and kept open, at least one.
        var minimum = 1
        /// How long a connection beyond the minimum may stay idle before it is closed.
        var idleTimeout: TimeInterval = 60
        /// The least time between two reports of leases that got no connection in time.
        var reportInterval: TimeInterval = 10
    }

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
        /// Nothing yet: the waiter is queued until a connection frees up or its deadline passes; with `open`, the
        /// pool opens a new connection (a new slot) for it.
        case wait(open: Bool)
        /// Nothing, at once.
        case fail(PoolFailure)
    }

    /// What is due at a tick.
    struct Due {
        /// Waiters past their deadline, to fail with ``PoolFailure/timedOut``.
        var expired: [Waiter] = []
        /// Connections leased for longer than the maximum lease, to close (each reported once).
        var overdue: [Connection] = []
        /// Idle connections past the idle timeout, to close (taken out of the pool).
        var retired: [Connection] = []
        /// When a report of timed-out leases is due: how many timed out since the last report.
        var timedOutToReport: Int?
    }

    private struct Idle {
        let id: Int
        let connection: Connection
        let since: Date
    }

    private struct Leased {
        let connection: Connection
        let since: Date
        var reported = false
    }

    private struct Queued {
        let id: Int
        let waiter: Waiter
        let deadline: Date
    }

    /// The limits this state keeps to.
    let limits: Limits
    private(set) var health = Health.starting
    private(set) var isShuttingDown = false
    /// Connections open or being opened: one slot each (a slot opens its connection again when it closes, while needed).
    private(set) var slotCount: Int
    /// Slots opening a connection now.
    private(set) var openingCount: Int
    private var idle: [Idle] = []
    private var leased: [Int: Leased] = [:]
    private var queue: [Queued] = []
    /// Connections retired for idling, not yet closed (still counted in ``slotCount``).
    private var retiring: Set<Int> = []
    private var lastTimeoutReport: Date?
    private var unreportedTimeouts = 0

    /// A pool within `limits`, its ``Limits/minimum`` slots counted as opening (the pool starts them).
    init(limits: Limits) {
        precondition(limits.minimum >= 1 && limits.maximum >= limits.minimum, "a pool keeps 1...maximum connections")
        self.limits = limits
        slotCount = limits.minimum
        openingCount = limits.minimum
    }

    /// Idle connections.
    var idleCount: Int { idle.count }
    /// Leased connections.
    var leasedCount: Int { leased.count }
    /// Waiting leases.
    var waitingCount: Int { queue.count }

    // MARK: Leases

    /// A lease by `waiter` (known as `id` for cancellation) at `now`, waiting at most until `deadline`.
    mutating func lease(_ waiter: Waiter, id: Int, now: Date, deadline: Date) -> LeaseDecision {
        if isShuttingDown { return .fail(.shuttingDown) }
        if let next = idle.popLast() {
            leased[next.id] = Leased(connection: next.connection, since: now)
            return .connection(id: next.id, next.connection)
        }
        if health == .down { return .fail(.unreachable) }
        queue.append(Queued(id: id, waiter: waiter, deadline: deadline))
        let open = slotCount < limits.maximum && openingCount < queue.count
        if open {
            slotCount += 1
            openingCount += 1
        }
        return .wait(open: open)
    }

    /// Takes back connection `id` at `now`. A reusable one goes to the first waiter (returned, with the
    /// connection, for the caller to resume) or back to the idle ones; any other is forgotten (the caller
    /// closes it, and its slot decides at ``closed(id:)`` whether to open another).
    mutating func release(id: Int, reusable: Bool, now: Date) -> (waiter: Waiter, connection: Connection)? {
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
    mutating func connected(id: Int, _ connection: Connection, now: Date) -> Waiter? {
        openingCount -= 1
        health = .up
        return handOut(id: id, connection, now: now)?.waiter
    }

    /// A connection attempt failed. With no connection open, the database is down: the waiters are returned, to
    /// fail. With some open (the database answers them; a pooler or the network refused one more), the waiters
    /// keep waiting for those. Also returns whether the slot tries again (after its backoff: it is one of the
    /// minimum, which watch for the database's return) or ends.
    mutating func connectFailed() -> (waiters: [Waiter], retry: Bool) {
        guard slotCount - openingCount == 0 else { return ([], attemptGoesOn()) }
        health = .down
        defer { queue.removeAll() }
        return (queue.map(\.waiter), attemptGoesOn())
    }

    /// A connection attempt found the database up but full (no room for another connection): the waiters keep
    /// waiting for the connections already open. Returns whether the slot tries again (see ``connectFailed()``).
    mutating func connectRefusedBusy() -> Bool {
        attemptGoesOn()
    }

    /// Connection `id` closed (the server ended it, the network dropped it, the pool closed it). An idle one is
    /// forgotten here; a leased one when it is released. Returns whether its slot opens another: while the pool
    /// keeps fewer than its minimum or more wait than are being opened, and is not stopping; otherwise the slot ends.
    mutating func closed(id: Int) -> Bool {
        idle.removeAll { $0.id == id }
        retiring.remove(id)
        if !isShuttingDown, slotCount <= limits.minimum || queue.count > openingCount {
            openingCount += 1
            return true
        }
        slotCount -= 1
        return false
    }

    /// Whether a slot whose attempt failed tries again: only one of the minimum (it stays counted as opening);
    /// any other ends, and no longer counts.
    private mutating func attemptGoesOn() -> Bool {
        if !isShuttingDown, slotCount <= limits.minimum { return true }
        slotCount -= 1
        openingCount -= 1
        return false
    }

    // MARK: Time and shutdown

    /// What is due at `now`: waiters past their deadline (to fail), connections leased for longer than
    /// `maximumLease` (to close; each reported once), idle connections past the idle timeout beyond the
    /// minimum (to close, oldest first), and whether to report the timed-out leases now.
    mutating func tick(now: Date, maximumLease: TimeInterval) -> Due {
        var due = Due()
        queue.removeAll { queued in
            guard queued.deadline <= now else { return false }
            due.expired.append(queued.waiter)
            return true
        }
        for (id, lease) in leased where !lease.reported && now.timeIntervalSince(lease.since) > maximumLease {
            leased[id]?.reported = true
            due.overdue.append(lease.connection)
        }
        // Idle connections are parked at the end and leased from it: the oldest are at the start.
        while slotCount - retiring.count > limits.minimum, let oldest = idle.first,
            now.timeIntervalSince(oldest.since) >= limits.idleTimeout
        {
            idle.removeFirst()
            retiring.insert(oldest.id)
            due.retired.append(oldest.connection)
        }
        unreportedTimeouts += due.expired.count
        if unreportedTimeouts > 0, lastTimeoutReport.map({ now.timeIntervalSince($0) >= limits.reportInterval }) ?? true {
            due.timedOutToReport = unreportedTimeouts
            unreportedTimeouts = 0
            lastTimeoutReport = now
        }
        return due
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

    /// Takes every idle connection out of the pool (for closing: their slots open new ones as needed).
    mutating func takeIdle() -> [Connection] {
        defer { idle.removeAll() }
        return idle.map(\.connection)
    }

    /// Leased connections, for closing them when the pool stops.
    var leasedConnections: [Connection] { leased.values.map(\.connection) }

    private mutating func handOut(id: Int, _ connection: Connection, now: Date) -> (waiter: Waiter, connection: Connection)? {
        guard !isShuttingDown else { return nil }
        guard !queue.isEmpty else {
            idle.append(Idle(id: id, connection: connection, since: now))
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
