import TallyStore
import Testing

@testable import TallyPostgres

/// The listener's self-check as a pure state machine (``ListenerSelfCheck``), and what a poll of the fallback
/// announces (``PolledChanges``).
@Suite("Listener self-check", .timeLimit(.minutes(1)))
struct ListenerSelfCheckTests {
    @Test("Polling until the first probe is heard; a probe heard switches to listening without a report")
    func startsPolling() {
        var check = ListenerSelfCheck()
        #expect(check.delivery == .polling)
        let probe = check.probeSent()
        #expect(check.heard(probe) == .stopPolling(recovered: false))
        #expect(check.delivery == .listening)
        #expect(check.timedOut(probe) == nil, "a probe heard cannot time out")
    }

    @Test("The first probe not heard at start is reported once; later misses are not; hearing again ends the episode")
    func deafFromStart() {
        var check = ListenerSelfCheck()
        let first = check.probeSent()
        #expect(check.timedOut(first) == .startPolling(report: true))
        #expect(check.delivery == .polling)
        let second = check.probeSent()
        #expect(check.timedOut(second) == nil, "one error per episode")
        let third = check.probeSent()
        #expect(check.heard(third) == .stopPolling(recovered: true))
        #expect(check.delivery == .listening)
        // A new episode is reported again.
        let fourth = check.probeSent()
        #expect(check.timedOut(fourth) == .startPolling(report: true))
        #expect(check.delivery == .polling)
    }

    @Test("Listening, a probe that times out switches to polling and is reported")
    func goesDeaf() {
        var check = ListenerSelfCheck()
        #expect(check.heard(check.probeSent()) != nil)
        let probe = check.probeSent()
        #expect(check.timedOut(probe) == .startPolling(report: true))
        #expect(check.delivery == .polling)
    }

    @Test("Only the probe in flight counts: a late one, an unknown one and a failed send decide nothing")
    func onlyTheProbeInFlight() {
        var check = ListenerSelfCheck()
        let late = check.probeSent()
        #expect(check.timedOut(late) == .startPolling(report: true))
        #expect(check.heard(late) == nil, "heard after its deadline")
        #expect(check.heard(99) == nil, "never sent")
        let failed = check.probeSent()
        check.probeFailed(failed)
        #expect(check.timedOut(failed) == nil)
        #expect(check.delivery == .polling)
        #expect(check.outstanding == nil)
    }

    @Test("A lost listener polls without a report, its probe in flight forgotten; heard on the next connection, it listens again")
    func listenerLost() {
        var check = ListenerSelfCheck()
        #expect(check.heard(check.probeSent()) == .stopPolling(recovered: false))
        let inFlight = check.probeSent()
        #expect(check.listenerLost() == .startPolling(report: false))
        #expect(check.delivery == .polling)
        #expect(check.timedOut(inFlight) == nil, "a probe of the lost connection decides nothing")
        #expect(check.listenerLost() == nil, "already polling")
        #expect(check.heard(check.probeSent()) == .stopPolling(recovered: false))
        // The next connection does not hear: that is reported.
        #expect(check.listenerLost() == .startPolling(report: false))
        #expect(check.timedOut(check.probeSent()) == .startPolling(report: true))
    }

    @Test("A poll announces a user's documents when their counter grows and their wallet when its stamp changes")
    func polledChanges() {
        typealias Marker = PolledChanges.Marker
        var changes = PolledChanges()
        // First sight: both (the stream may have missed something since it read), documents only when there are some.
        #expect(
            changes.events(from: ["a": Marker(documents: 3, wallet: "10"), "b": Marker(documents: nil, wallet: "11")])
                == [.documents(userId: "a", version: 3), .wallet(userId: "a"), .wallet(userId: "b")])
        #expect(changes.events(from: ["a": Marker(documents: 3, wallet: "10"), "b": Marker(documents: nil, wallet: "11")]) == [])
        #expect(changes.events(from: ["a": Marker(documents: 5, wallet: "10"), "b": Marker(documents: 1, wallet: "12")])
                == [.documents(userId: "a", version: 5), .documents(userId: "b", version: 1), .wallet(userId: "b")])
        // The wallet row gone (the account deleted): announced, so that the stream reads it and ends.
        #expect(changes.events(from: ["a": Marker(documents: 5, wallet: nil)]) == [.wallet(userId: "a")])
        // "b" was not watched in the last poll: seen afresh.
        #expect(changes.events(from: ["b": Marker(documents: 1, wallet: "12")]) == [.documents(userId: "b", version: 1), .wallet(userId: "b")])
        changes.reset()
        #expect(changes.events(from: ["b": Marker(documents: 1, wallet: "12")]).count == 2, "reset: every watched user announced again")
    }
}
