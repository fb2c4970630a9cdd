import Foundation
import Testing

@testable import TallyPostgres

/// The PostgreSQL pool's bookkeeping (pure): leases, hand-overs, outages, deadlines.
@Suite("PostgreSQL pool state", .timeLimit(.minutes(1)))
struct PoolStateTests {
    typealias State = PoolState<String, Int>
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func at(_ milliseconds: Int) -> Date { t0.addingTimeInterval(TimeInterval(milliseconds) / 1000) }

    func state(maximum: Int, minimum: Int = 1) -> State { State(limits: .init(maximum: maximum, minimum: minimum)) }

    func expectWait(_ decision: State.LeaseDecision, open: Bool, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .wait(let opens) = decision else {
            Issue.record("\(comment): expected to wait, got \(decision)", sourceLocation: sourceLocation)
            return
        }
        #expect(opens == open, comment, sourceLocation: sourceLocation)
    }

    @Test("Idle connections are leased most recent first; a released one goes to the first waiter in line")
    func leasesAndHandOvers() throws {
        var state = state(maximum: 2, minimum: 2)
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
        expectWait(state.lease(12, id: 12, now: at(2), deadline: at(5_002)), open: false, "a third lease waits (the maximum is open)")
        expectWait(state.lease(13, id: 13, now: at(3), deadline: at(5_003)), open: false, "a fourth lease waits")
        #expect(state.waitingCount == 2)
        let released = state.release(id: 2, reusable: true, now: at(4))
        let handOver = try #require(released)
        #expect(handOver.waiter == 12 && handOver.connection == "b")
        #expect(state.leasedCount == 2 && state.idleCount == 0 && state.waitingCount == 1)
        // A connection that closed while leased is dropped, not handed on: its slot connects a new one.
        let answer3 = state.release(id: 1, reusable: false, now: at(5))
        #expect(answer3 == nil)
        let reconnects = state.closed(id: 1)
        #expect(reconnects, "the slot of a closed connection connects again while a lease waits")
        #expect(state.leasedCount == 1 && state.waitingCount == 1)
        let answer4 = state.connected(id: 3, "c", now: at(6))
        #expect(answer4 == 13)
        #expect(state.leasedCount == 2 && state.idleCount == 0 && state.waitingCount == 0)
    }

    @Test("Connections are opened as leases need them, one per waiter not already covered, never beyond the maximum")
    func lazyOpening() throws {
        var state = state(maximum: 3)
        #expect(state.slotCount == 1 && state.openingCount == 1, "only the minimum is opened at start")
        expectWait(state.lease(10, id: 10, now: at(0), deadline: at(5_000)), open: false, "the connection being opened covers the first lease")
        let first = state.connected(id: 1, "a", now: at(1))
        #expect(first == 10)
        expectWait(state.lease(11, id: 11, now: at(2), deadline: at(5_002)), open: true, "none idle: a second connection")
        expectWait(state.lease(12, id: 12, now: at(2), deadline: at(5_002)), open: true, "a third")
        expectWait(state.lease(13, id: 13, now: at(2), deadline: at(5_002)), open: false, "not beyond the maximum")
        #expect(state.slotCount == 3 && state.openingCount == 2)
        let second = state.connected(id: 2, "b", now: at(3))
        #expect(second == 11)
        // The first lease returns before the third connection is up: the waiter takes it, and the third connection,
        // when it comes, goes to the next waiter.
        let released = state.release(id: 1, reusable: true, now: at(4))
        let handOver = try #require(released)
        #expect(handOver.waiter == 12 && handOver.connection == "a")
        let third = state.connected(id: 3, "c", now: at(5))
        #expect(third == 13)

        // A lease that finds a connection being opened for fewer waiters than wait opens another; else it waits for it.
        var other = self.state(maximum: 5)
        _ = other.connected(id: 1, "a", now: at(0))
        _ = other.lease(20, id: 20, now: at(0), deadline: at(5_000))
        expectWait(other.lease(21, id: 21, now: at(1), deadline: at(5_001)), open: true, "one waiter, none opening")
        let handedOn = other.release(id: 1, reusable: true, now: at(2))
        #expect(handedOn?.waiter == 21)
        expectWait(other.lease(22, id: 22, now: at(3), deadline: at(5_003)), open: false, "one waiter, one opening already")
        #expect(other.slotCount == 2)
    }

    @Test("A connection idle past the idle timeout is closed, oldest first, down to the minimum; its slot then ends")
    func idleConnectionsClose() throws {
        var state = State(limits: .init(maximum: 3, minimum: 1, idleTimeout: 60))
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.lease(1, id: 1, now: at(0), deadline: at(5_000))
        _ = state.lease(2, id: 2, now: at(0), deadline: at(5_000))
        _ = state.lease(3, id: 3, now: at(0), deadline: at(5_000))
        _ = state.connected(id: 2, "b", now: at(1))
        _ = state.connected(id: 3, "c", now: at(1))
        #expect(state.leasedCount == 3 && state.slotCount == 3)
        _ = state.release(id: 1, reusable: true, now: at(1_000))  // "a" idle since 1 s
        _ = state.release(id: 2, reusable: true, now: at(2_000))  // "b" since 2 s
        _ = state.release(id: 3, reusable: true, now: at(30_000))  // "c" since 30 s
        var due = state.tick(now: at(60_999), maximumLease: 30)
        #expect(due.retired.isEmpty, "none idle for a minute yet")
        due = state.tick(now: at(61_000), maximumLease: 30)
        #expect(due.retired == ["a"])
        due = state.tick(now: at(200_000), maximumLease: 30)
        #expect(due.retired == ["b"], "the minimum stays open however long it idles")
        #expect(state.idleCount == 1)
        let (firstGoesOn, secondGoesOn) = (state.closed(id: 1), state.closed(id: 2))
        #expect(!firstGoesOn && !secondGoesOn, "the slots of retired connections end")
        #expect(state.slotCount == 1)
        due = state.tick(now: at(10_000_000), maximumLease: 30)
        #expect(due.retired.isEmpty)
        guard case .connection(3, "c") = state.lease(4, id: 4, now: at(10_000_000), deadline: at(10_005_000)) else {
            Issue.record("the kept connection is leased")
            return
        }
    }

    @Test("The minimum is kept: its slot connects again when its connection closes, and retries after a failed attempt")
    func minimumKept() {
        var state = state(maximum: 4)
        _ = state.connected(id: 1, "a", now: at(0))
        let reopens = state.closed(id: 1)
        #expect(reopens, "the only connection closed: it is opened again")
        #expect(state.openingCount == 1)
        let failed = state.connectFailed()
        #expect(failed.retry && failed.waiters.isEmpty && state.health == .down)
        #expect(state.slotCount == 1)
    }

    @Test("While the database is down a lease with no idle connection fails at once, and waiters are failed")
    func outageFailsFast() {
        var state = state(maximum: 2)
        expectWait(state.lease(1, id: 1, now: at(0), deadline: at(5_000)), open: false, "before the first attempt a lease waits")
        let failed = state.connectFailed()
        #expect(failed.waiters == [1] && failed.retry)
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

    @Test("An attempt that fails while other connections are open is no outage: the waiters wait for those, the extra slot ends")
    func failedExtraAttempt() throws {
        var state = state(maximum: 3)
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.lease(1, id: 1, now: at(0), deadline: at(5_000))
        expectWait(state.lease(2, id: 2, now: at(1), deadline: at(5_001)), open: true, "a second connection")
        let failed = state.connectFailed()
        #expect(failed.waiters.isEmpty && !failed.retry)
        #expect(state.health == .up && state.slotCount == 1 && state.waitingCount == 1)
        let handOver = state.release(id: 1, reusable: true, now: at(2))
        #expect(handOver?.waiter == 2)
        // The database full (too many connections): the same.
        expectWait(state.lease(3, id: 3, now: at(3), deadline: at(5_003)), open: true, "again")
        let retries = state.connectRefusedBusy()
        #expect(!retries)
        #expect(state.slotCount == 1 && state.waitingCount == 1)
        // With no connection open, a failed attempt is an outage even for an extra slot: every waiter fails.
        _ = state.release(id: 1, reusable: false, now: at(4))
        let minimumReconnects = state.closed(id: 1)
        #expect(minimumReconnects, "the minimum connects again")
        let down = state.connectFailed()
        #expect(down.waiters == [3] && down.retry && state.health == .down)
    }

    @Test("Waiters expire at their deadline, not before; leases held too long are reported once")
    func deadlines() {
        var state = state(maximum: 1)
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.lease(1, id: 1, now: at(0), deadline: at(5_000))
        _ = state.lease(2, id: 2, now: at(100), deadline: at(200))
        _ = state.lease(3, id: 3, now: at(150), deadline: at(400))
        var due = state.tick(now: at(199), maximumLease: 30)
        #expect(due.expired.isEmpty && due.overdue.isEmpty)
        due = state.tick(now: at(200), maximumLease: 30)
        #expect(due.expired == [2] && due.overdue.isEmpty)
        due = state.tick(now: at(30_001), maximumLease: 30)
        #expect(due.expired == [3] && due.overdue == ["a"])
        due = state.tick(now: at(60_000), maximumLease: 30)
        #expect(due.expired.isEmpty && due.overdue.isEmpty, "an overdue lease is reported once")
        #expect(state.waitingCount == 0)
    }

    @Test("Leases that got no connection in time are reported at most once per interval, with how many there were")
    func timeoutReports() {
        var state = State(limits: .init(maximum: 1, minimum: 1, reportInterval: 10))
        _ = state.connected(id: 1, "a", now: at(0))
        _ = state.lease(1, id: 1, now: at(0), deadline: at(600_000))
        for waiter in 2...4 { _ = state.lease(waiter, id: waiter, now: at(0), deadline: at(1_000)) }
        let early = state.tick(now: at(500), maximumLease: 3_600)
        #expect(early.timedOutToReport == nil, "nothing expired yet")
        var due = state.tick(now: at(1_000), maximumLease: 3_600)
        #expect(due.expired == [2, 3, 4] && due.timedOutToReport == 3, "the first ones are reported at once")
        _ = state.lease(5, id: 5, now: at(2_000), deadline: at(3_000))
        due = state.tick(now: at(3_000), maximumLease: 3_600)
        #expect(due.expired == [5] && due.timedOutToReport == nil, "within the interval: counted, not reported")
        _ = state.lease(6, id: 6, now: at(4_000), deadline: at(5_000))
        due = state.tick(now: at(5_000), maximumLease: 3_600)
        #expect(due.timedOutToReport == nil)
        due = state.tick(now: at(10_999), maximumLease: 3_600)
        #expect(due.timedOutToReport == nil)
        due = state.tick(now: at(11_000), maximumLease: 3_600)
        #expect(due.expired.isEmpty && due.timedOutToReport == 2, "then the two since")
        due = state.tick(now: at(30_000), maximumLease: 3_600)
        #expect(due.timedOutToReport == nil, "no report without a timeout")
    }

    @Test("A cancelled waiter leaves the line; a connection closed while idle is forgotten")
    func cancellationAndClosing() {
        var state = state(maximum: 2)
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
        _ = state.closed(id: 5)
        #expect(state.idleCount == 0)
    }

    @Test("Shutting down fails the waiters, hands out the idle connections to close, and refuses new leases")
    func shutdown() {
        var state = state(maximum: 3, minimum: 3)
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
        let stoppingReconnects = state.closed(id: 1)
        #expect(!stoppingReconnects, "no slot connects again while stopping")
        #expect(state.idleCount == 0)
    }
}
