import TallyClient
import TallyTestSupport
import Testing

/// `EventStreamParser` (WHATWG "interpreting an event stream"): what the SDK's event stream and the load
/// harness's `bench-events` read.
@Suite("Server-sent events parsing", .timeLimit(.minutes(1)))
struct ServerSentEventsTests {
    @Test("Events split anywhere by the network come out whole; comments and unknown fields are skipped")
    func splitAnywhere() {
        let stream = Array(": heartbeat\n\nevent: changed\ndata: {\"cursor\":\"abc\"}\n\nid: 7\r\nevent: wallet\r\ndata: a\r\ndata: b\r\n\r\ndata: plain\n\n".utf8)
        let expected = [
            ServerSentEvent(name: "changed", data: #"{"cursor":"abc"}"#), ServerSentEvent(name: "wallet", data: "a\nb", lastEventId: "7"),
            ServerSentEvent(name: "message", data: "plain", lastEventId: "7"),
        ]
        for split in 0...stream.count {
            var parser = EventStreamParser()
            let events = parser.feed(stream[..<split]) + parser.feed(stream[split...])
            #expect(events == expected, "split at \(split)")
        }
        var parser = EventStreamParser()
        #expect(stream.flatMap { parser.feed([$0]) } == expected)
    }

    /// A stream like the server's, with every field and line ending the parser handles.
    private static let serverLike = Array(
        ("retry: 3200\n\n: heartbeat\n\nevent: wallet\ndata: {\"wallet\":1}\n\nevent: changed\nid: MTIu\ndata: {\"cursor\":\"MTIu\"}\n\n"
            + ": heartbeat\r\n\r\nevent: changed\rid: MTMu\rdata: {\"cursor\":\"MTMu\"}\r\rdata: x\r\ndata:\r\n\r\nretry: 2500\nid\n\n").utf8)
    private static let serverLikeEvents = [
        ServerSentEvent(name: "wallet", data: #"{"wallet":1}"#),
        ServerSentEvent(name: "changed", data: #"{"cursor":"MTIu"}"#, lastEventId: "MTIu"),
        ServerSentEvent(name: "changed", data: #"{"cursor":"MTMu"}"#, lastEventId: "MTMu"),
        ServerSentEvent(name: "message", data: "x\n", lastEventId: "MTMu"),
    ]

    @Test("Random splits into many pieces (CR, LF and CRLF line ends, a CRLF cut in two) give the same events and state")
    func randomSplits() {
        let stream = Self.serverLike
        for seed in UInt64(1)...500 {
            var random = SplitMix64(seed: seed)
            var parser = EventStreamParser()
            var events: [ServerSentEvent] = []
            var start = 0
            while start < stream.count {
                let end = min(stream.count, start + 1 + Int(random.next() % 12))
                events += parser.feed(stream[start..<end])
                start = end
            }
            #expect(events == Self.serverLikeEvents, "seed \(seed)")
            #expect(parser.lastEventId == "", "seed \(seed): a bare `id` field empties the last event id")
            #expect(parser.reconnectionDelay == 2.5, "seed \(seed)")
        }
    }

    @Test("An id persists until changed, counts only once its event is dispatched, and carries over to a new connection")
    func lastEventId() {
        var parser = EventStreamParser()
        #expect(parser.feed(Array("id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c".utf8)).map(\.lastEventId) == ["1", "1"])
        #expect(parser.lastEventId == "1", "the event of id 2 was cut off before its blank line")
        // An id without data still sets the last event id (no event is dispatched); one holding NUL is ignored.
        #expect(parser.feed(Array("\n\nid: 3\n\nid: 4\0x\n\n".utf8)) == [ServerSentEvent(name: "message", data: "c", lastEventId: "2")])
        #expect(parser.lastEventId == "3")
        var resumed = EventStreamParser(lastEventId: parser.lastEventId)
        #expect(resumed.feed(Array("data: d\n\n".utf8)) == [ServerSentEvent(name: "message", data: "d", lastEventId: "3")])
    }

    @Test("retry: takes only ASCII digits, as milliseconds; an event name without data dispatches nothing")
    func retryField() {
        var parser = EventStreamParser()
        #expect(parser.reconnectionDelay == nil)
        #expect(parser.feed(Array("retry: 1500\n\n".utf8)).isEmpty)
        #expect(parser.reconnectionDelay == 1.5)
        for invalid in ["retry: -1", "retry: 1.5", "retry: 2s", "retry:", "retry: 99999999999999999999999"] {
            #expect(parser.feed(Array("\(invalid)\n\n".utf8)).isEmpty)
            #expect(parser.reconnectionDelay == 1.5, "\(invalid) is ignored")
        }
        #expect(parser.feed(Array("retry:0\nevent: wallet\n\n".utf8)).isEmpty)
        #expect(parser.reconnectionDelay == 0)
    }
}
