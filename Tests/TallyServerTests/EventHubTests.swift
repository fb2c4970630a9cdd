import Foundation
import Metrics
import TallyStore
import Testing

@testable import TallyServer

/// The in-process fan-out of change events to event streams: coalescing, bounded pending state, the cap
/// on streams per user, and forgetting streams that ended.
@Suite("Event hub", .timeLimit(.minutes(1)))
struct EventHubTests {
    @Test("Events arriving while a stream is busy fold into one: the newest version, one wallet read")
    func coalesces() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let stream = hub.subscribe(userId: "u1", sessionId: "s1")
        for version in [5, 2, 9, 7] as [Int64] { hub.deliver(.documents(userId: "u1", version: version)) }
        for _ in 0..<1_000 { hub.deliver(.wallet(userId: "u1")) }
        #expect(await stream.next() == PendingEvents(version: 9, wallet: true))
        hub.deliver(.documents(userId: "u1", version: 10))
        #expect(await stream.next() == PendingEvents(version: 10), "taken means cleared")
    }

    @Test("A stream that never reads holds one pending state, however many events come")
    func boundedWhenNotRead() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let stream = hub.subscribe(userId: "u1", sessionId: "s1")
        // The writers never wait for the stream: a million deliveries complete with nobody reading.
        for version in 1...1_000_000 as ClosedRange<Int64> { hub.deliver(.documents(userId: "u1", version: version)) }
        #expect(await stream.next() == PendingEvents(version: 1_000_000))
    }

    @Test("Only the user's streams hear the user's events; a sign-out ends only that session's streams")
    func routesByUserAndSession() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let phone = hub.subscribe(userId: "u1", sessionId: "phone")
        let tablet = hub.subscribe(userId: "u1", sessionId: "tablet")
        let other = hub.subscribe(userId: "u2", sessionId: "x")
        hub.deliver(.wallet(userId: "u1"))
        hub.deliver(.sessionEnded(userId: "u1", sessionId: "phone"))
        #expect(await phone.next() == PendingEvents(wallet: true, end: .sessionEnded))
        #expect(await tablet.next() == PendingEvents(wallet: true))
        hub.deliver(.documents(userId: "u2", version: 1))
        #expect(await other.next() == PendingEvents(version: 1), "u2 heard its own event and nothing of u1's")
        hub.deliver(.accountDeleted(userId: "u1"))
        #expect(await tablet.next() == PendingEvents(end: .accountDeleted))
        hub.deliver(.wallet(userId: "u1"))
        #expect(await tablet.next() == PendingEvents(end: .cancelled), "an ended stream gets nothing more")
    }

    @Test("A stream waiting for events is woken by the next one")
    func wakesAWaitingStream() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let stream = hub.subscribe(userId: "u1", sessionId: "s1")
        async let next = stream.next()
        // Whether the delivery comes before or after the stream waits, it is handed over exactly once.
        hub.deliver(.documents(userId: "u1", version: 4))
        #expect(await next == PendingEvents(version: 4))
    }

    @Test("Opening more than the cap of streams for one user ends the oldest")
    func capsStreamsPerUser() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let streams = (0...EventHub.maxStreamsPerUser).map { hub.subscribe(userId: "u1", sessionId: "s\($0)") }
        #expect(hub.openStreams == EventHub.maxStreamsPerUser)
        #expect(await streams[0].next() == PendingEvents(end: .superseded))
        hub.deliver(.wallet(userId: "u1"))
        #expect(await streams[1].next() == PendingEvents(wallet: true))
    }

    @Test("A stream that ends, or whose task is cancelled, is forgotten: delivering finds no one")
    func forgetsEndedStreams() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let stream = hub.subscribe(userId: "u1", sessionId: "s1")
        let waiting = Task { await stream.next() }
        waiting.cancel()
        #expect(await waiting.value == PendingEvents(end: .cancelled))
        hub.unsubscribe(stream)
        #expect(hub.openStreams == 0)
        hub.deliver(.wallet(userId: "u1"))
        #expect(await stream.next() == PendingEvents(end: .cancelled), "nothing was delivered to it after it ended")
        hub.unsubscribe(stream)  // twice is harmless
        #expect(hub.openStreams == 0)
    }

    @Test("Ending every stream (a reconnected listener, a shutdown) reaches all users'")
    func endsAll() async {
        let hub = EventHub(metrics: NOOPMetricsHandler.instance)
        let streams = ["u1", "u2", "u3"].map { hub.subscribe(userId: $0, sessionId: "s") }
        hub.endAll(.stale)
        for stream in streams { #expect(await stream.next() == PendingEvents(end: .stale)) }
    }
}
