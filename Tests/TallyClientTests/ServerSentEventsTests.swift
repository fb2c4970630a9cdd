import TallyClient
import TallyTestSupport
import Testing

/// `EventStreamParser` (TallyAPI; WHATWG "interpreting an event stream"): what the SDK's event stream, AI streams,
/// the gateway's relay, the load harness's `bench-events` and the tests read.
@Suite("Server-sent events parsing", .timeLimit(.minutes(1)))
struct ServerSentEventsTests {
    @Test("Events split anywhere by the network come out whole; comments and unknown fields are skipped")
    func splitAnywhere() throws {
        let stream = Array(": heartbeat\n\nevent: changed\ndata: {\"cursor\":\"abc\"}\n\nid: 7\r\nevent: wallet\r\ndata: a\r\ndata: b\r\n\r\ndata: plain\n\n".utf8)
        let expected = [
            ServerSentEvent(name: "changed", data: #"{"cursor":"abc"}"#), ServerSentEvent(name: "wallet", data: "a\nb", lastEventId: "7"),
            ServerSentEvent(name: "message", data: "plain", lastEventId: "7"),
        ]
        for split in 0...stream.count {
            var parser = EventStreamParser()
            let events = try parser.feed(stream[..<split]) + parser.feed(stream[split...])
            #expect(events == expected, "split at \(split)")
        }
        var parser = EventStreamParser()
        #expect(try stream.flatMap { try parser.feed([$0]) } == expected)
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
    func randomSplits() throws {
        let stream = Self.serverLike
        for seed in UInt64(1)...500 {
            let (events, parser) = try Self.feedInPieces(stream, seed: seed, longest: 12)
            #expect(events == Self.serverLikeEvents, "seed \(seed)")
            #expect(parser.lastEventId == "", "seed \(seed): a bare `id` field empties the last event id")
            #expect(parser.reconnectionDelay == 2.5, "seed \(seed)")
        }
    }

    /// `stream` fed to a new parser in random pieces of 1 to `longest` bytes; the events and the parser after them.
    private static func feedInPieces(_ stream: [UInt8], seed: UInt64, longest: Int) throws -> ([ServerSentEvent], EventStreamParser) {
        var random = SplitMix64(seed: seed)
        var parser = EventStreamParser()
        var events: [ServerSentEvent] = []
        var start = 0
        while start < stream.count {
            let end = min(stream.count, start + 1 + Int(random.next() % UInt64(longest)))
            events += try parser.feed(stream[start..<end])
            start = end
        }
        return (events, parser)
    }

    /// What the server sends before everything on an event stream or an AI stream (its `ServerSentEvents.opening`,
    /// compared byte for byte in the server's SyncEventsTests and AIGatewayTests): 2 KiB, a colon and spaces.
    static let serverOpening = Array((":" + String(repeating: " ", count: 2045) + "\n\n").utf8)

    @Test("The server's 2 KiB opening comment changes nothing: the same events and state, whole and in random pieces")
    func openingComment() throws {
        #expect(Self.serverOpening.count == 2048)
        let padded = Self.serverOpening + Self.serverLike
        var whole = EventStreamParser(limit: 4096)
        #expect(try whole.feed(padded) == Self.serverLikeEvents)
        #expect(whole.reconnectionDelay == 2.5 && whole.lastEventId == "")
        for seed in UInt64(1)...200 {
            let (events, parser) = try Self.feedInPieces(padded, seed: seed, longest: 700)
            #expect(events == Self.serverLikeEvents, "seed \(seed)")
            #expect(parser.reconnectionDelay == 2.5, "seed \(seed)")
        }
    }

    @Test("An id persists until changed, counts only once its event is dispatched, and carries over to a new connection")
    func lastEventId() throws {
        var parser = EventStreamParser()
        #expect(try parser.feed(Array("id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c".utf8)).map(\.lastEventId) == ["1", "1"])
        #expect(parser.lastEventId == "1", "the event of id 2 was cut off before its blank line")
        // An id without data still sets the last event id (no event is dispatched); one holding NUL is ignored.
        #expect(try parser.feed(Array("\n\nid: 3\n\nid: 4\0x\n\n".utf8)) == [ServerSentEvent(name: "message", data: "c", lastEventId: "2")])
        #expect(parser.lastEventId == "3")
        var resumed = EventStreamParser(lastEventId: parser.lastEventId)
        #expect(try resumed.feed(Array("data: d\n\n".utf8)) == [ServerSentEvent(name: "message", data: "d", lastEventId: "3")])
    }

    @Test("retry: takes only ASCII digits, as milliseconds; an event name without data dispatches nothing")
    func retryField() throws {
        var parser = EventStreamParser()
        #expect(parser.reconnectionDelay == nil)
        #expect(try parser.feed(Array("retry: 1500\n\n".utf8)).isEmpty)
        #expect(parser.reconnectionDelay == 1.5)
        for invalid in ["retry: -1", "retry: 1.5", "retry: 2s", "retry:", "retry: 99999999999999999999999"] {
            #expect(try parser.feed(Array("\(invalid)\n\n".utf8)).isEmpty)
            #expect(parser.reconnectionDelay == 1.5, "\(invalid) is ignored")
        }
        #expect(try parser.feed(Array("retry:0\nevent: wallet\n\n".utf8)).isEmpty)
        #expect(parser.reconnectionDelay == 0)
    }

    @Test("A byte order mark is skipped at the stream's start only, however the network splits it")
    func byteOrderMark() throws {
        let stream: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("data: a\n\n".utf8) + [0xEF, 0xBB, 0xBF] + Array("data: b\n\n".utf8)
        for split in 0...stream.count {
            var parser = EventStreamParser()
            let events = try parser.feed(stream[..<split]) + parser.feed(stream[split...])
            // The second BOM starts a line: a field named by it, unknown, ignored.
            #expect(events == [ServerSentEvent(name: "message", data: "a")], "split at \(split)")
        }
        // Bytes that only begin like a BOM are the first line's.
        var parser = EventStreamParser()
        #expect(try parser.feed([0xEF, 0xBB]) == [])
        #expect(try parser.feed(Array("\ndata: c\n\n".utf8)) == [ServerSentEvent(name: "message", data: "c")])
    }

    @Test("A line longer than the limit throws, and the parser never holds more than the limit: a 64 MiB line fed in 64 KiB pieces")
    func endlessLine() throws {
        var parser = EventStreamParser()
        #expect(parser.limit == 1 << 20)
        let piece = [UInt8](repeating: UInt8(ascii: "x"), count: 64 << 10)
        #expect(try parser.feed(Array("data: ".utf8)).isEmpty)
        var fed = 6
        var refused: EventStreamParser.TooLarge?
        for _ in 0..<1_024 where refused == nil {
            do {
                _ = try parser.feed(piece)
                fed += piece.count
            } catch {
                refused = error
            }
            #expect(parser.bufferedBytes <= parser.limit)
        }
        #expect(refused == EventStreamParser.TooLarge(limit: 1 << 20))
        #expect(fed <= 1 << 20 && fed > (1 << 20) - piece.count, "refused at the piece that passes the limit (\(fed) fed)")
        // Spent: nothing more is read from this stream.
        #expect(throws: EventStreamParser.TooLarge.self) { try parser.feed(Array("\n\ndata: ok\n\n".utf8)) }
        #expect(parser.bufferedBytes == 0, "what it held is let go")
    }

    @Test("An event's data is bounded too: data lines without a blank line pass the limit; with blank lines, comments or other fields, never")
    func endlessEvent() throws {
        var parser = EventStreamParser(limit: 1_000)
        let line = Array("data: 0123456789\n".utf8)
        var events = 0
        #expect(throws: EventStreamParser.TooLarge.self) {
            for _ in 0..<200 {
                events += try parser.feed(line).count
                #expect(parser.bufferedBytes <= 1_000)
            }
        }
        #expect(events == 0)
        var bounded = EventStreamParser(limit: 1_000)
        for index in 0..<20_000 {
            let text = index % 50 == 49 ? "\n" : [": keep-alive\n", "data: 0123456789\n", "event: x\n", "id: 1\n", "other: y\n"][index % 5]
            events += try bounded.feed(Array(text.utf8)).count
        }
        #expect(events == 400)
    }
}
