import Testing

@testable import TallyPostgres

/// The PostgreSQL pool's bookkeeping (pure): leases, hand-overs, outages, deadlines.
@Suite("PostgreSQL pool state")
struct PoolStateTests {
    typealias State = PoolState<String, Int>
    let t0 = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

    @Test("Idle connections are leased most recent first; a released one goes to the first waiter in line")
    func leasesAndHandOvers() throws {
        var state = State()
        let answer1 = state.connected(id: 1, "a", now: at(0))
        #expect(answer1 == nil)
        let answer2 = state.connected(id: 2, "b", now: at(0))
        #expect(answer2 == nil)
        #expect(state.health == .up)
        guard case .connection(2, "b") = state.lease(10, id: 10, now: at(1), deadline: at(5_001)) else {
            Issue.record("expected the most recently parked connection")
            return
        }
        guard case .connection(1, "a") = state.lease(11, id: 11, now: at(1), deadline: at(5_001)) else {
            Issue.record("expected the other connection")
            return
        }
        guard case .wait = state.lease(12, id: 12, now: at(2), deadline: at(5_002)) else {
            Issue.record("a third lease must wait")
            return
        }
        guard case .wait = state.lease(13, id: 13, now: at(3), deadline: at(5_003)) else {
            Issue.record("a fourth lease must wait")
            return
        }
        #expect(state.waitingCount == 2)
        let released = state.release(id: 2, reusable: true, now: at(4))
        let handOver = try #require(released)
        #expect(handOver.waiter == 12 && handOver.connection == "b")
        #expect(state.leasedCount == 2 && state.idleCount == 0 && state.waitingCount == 1)
        // A connection that closed while leased is dropped, not handed on: its slot connects a new one.
        let answer3 = state.release(id: 1, reusable: false, now: at(5))
        #expect(answer3 == nil)
        #expect(state.leasedCount == 1 && state.waitingCount == 1)
        let answer4 = state.connected(id: 3, "c", now: at(6))
        #expect(answer4 == 13)
        #expect(state.leasedCount == 2 && state.idleCount == 0 && state.waitingCount == 0)
    }

    @Test("While the database is down a lease with no idle connection fails at once, and waiters are failed")
    func outageFailsFast() {
        var state = State()
        guard case .wait = state.lease(1, id: 1, now: at(0), deadline: at(5_000)) else {
            Issue.record("before the first attempt a lease waits")
            return
        }
        let answer5 = state.connectFailed()
        #expect(answer5 == [1])
        #expect(state.health == .down)
        guard case .fail(.unreachable) = state.lease(2, id: 2, now: at(1), deadline: at(5_001)) else {
            Issue.record("a lease during an outage must fail at once")
            return
        }
        #expect(state.waitingCount == 0)
        // The database returns: the first connection ends the outage.
        let answer6 = state.connected(id: 7, "x", now: at(2))
        #expect(answer6 == nil)
        #expect(state.health == .up)
        guard case .connection(7, "x") = state.lease(3, id: 3, now: at(3), deadline: at(5_003)) else {
            Issue.record("after the outage a lease gets the new connection")
            return
        }
    }

    @Test("An idle connection is still leased while the last attempt failed (one slot refused, others fine)")
    func idleBeatsHealth() {
        var state = State()
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.connectFailed()
        guard case .connection(1, "a") = state.lease(1, id: 1, now: at(1), deadline: at(5_001)) else {
            Issue.record("an idle connection must be leased")
            return
        }
        guard case .fail(.unreachable) = state.lease(2, id: 2, now: at(1), deadline: at(5_001)) else {
            Issue.record("with none idle and the database down the lease fails")
            return
        }
    }

    @Test("Waiters expire at their deadline, not before; leases held too long are reported once")
    func deadlines() {
        var state = State()
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.lease(1, id: 1, now: at(0), deadline: at(5_000))
        _ = state.lease(2, id: 2, now: at(100), deadline: at(200))
        _ = state.lease(3, id: 3, now: at(150), deadline: at(400))
        var due = state.tick(now: at(199), maximumLease: .seconds(30))
        #expect(due.expired.isEmpty && due.overdue.isEmpty)
        due = state.tick(now: at(200), maximumLease: .seconds(30))
        #expect(due.expired == [2] && due.overdue.isEmpty)
        due = state.tick(now: at(30_001), maximumLease: .seconds(30))
        #expect(due.expired == [3] && due.overdue == ["a"])
        due = state.tick(now: at(60_000), maximumLease: .seconds(30))
        #expect(due.expired.isEmpty && due.overdue.isEmpty, "an overdue lease is reported once")
        #expect(state.waitingCount == 0)
    }

    @Test("A cancelled waiter leaves the line; a connection closed while idle is forgotten")
    func cancellationAndClosing() {
        var state = State()
        _ = state.lease(1, id: 1, now: at(0), deadline: at(5_000))
        _ = state.lease(2, id: 2, now: at(0), deadline: at(5_000))
        let answer7 = state.cancel(waiterId: 1)
        #expect(answer7 == 1)
        let answer8 = state.cancel(waiterId: 1)
        #expect(answer8 == nil)
        let answer9 = state.connected(id: 5, "a", now: at(1))
        #expect(answer9 == 2)
        _ = state.release(id: 5, reusable: true, now: at(2))
        #expect(state.idleCount == 1)
        state.closed(id: 5)
        #expect(state.idleCount == 0)
    }

    @Test("Shutting down fails the waiters, hands out the idle connections to close, and refuses new leases")
    func shutdown() {
        var state = State()
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.connected(id: 2, "b", now: at(0))
        _ = state.lease(9, id: 9, now: at(0), deadline: at(5_000))
        _ = state.lease(10, id: 10, now: at(0), deadline: at(5_000))
        _ = state.lease(11, id: 11, now: at(0), deadline: at(5_000))
        let (waiters, idle) = state.shutDown()
        #expect(waiters == [11] && idle.isEmpty)
        #expect(Set(state.leasedConnections) == ["a", "b"])
        guard case .fail(.shuttingDown) = state.lease(12, id: 12, now: at(1), deadline: at(5_001)) else {
            Issue.record("no lease after shutdown")
            return
        }
        let answer10 = state.release(id: 1, reusable: true, now: at(2))
        #expect(answer10 == nil)
        let answer11 = state.connected(id: 3, "c", now: at(3))
        #expect(answer11 == nil)
        #expect(state.idleCount == 0)
    }
}
