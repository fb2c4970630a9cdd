import Testing
import TallyLoad

@Suite("Server-sent events as the benchmark client reads them")
struct EventStreamParserTests {
    @Test("Events split anywhere by the network come out whole; comments and unknown fields are skipped")
    func splitAnywhere() {
        let stream = Array(": heartbeat\n\nevent: changed\ndata: {\"cursor\":\"abc\"}\n\nid: 7\r\nevent: wallet\r\ndata: a\r\ndata: b\r\n\r\ndata: plain\n\n".utf8)
        let expected = [
            ServerSentEvent(name: "changed", data: #"{"cursor":"abc"}"#), ServerSentEvent(name: "wallet", data: "a\nb"),
            ServerSentEvent(name: "message", data: "plain"),
        ]
        for split in 0...stream.count {
            var parser = EventStreamParser()
            let events = parser.feed(stream[..<split]) + parser.feed(stream[split...])
            #expect(events == expected, "split at \(split)")
        }
        var parser = EventStreamParser()
        #expect(stream.flatMap { parser.feed([$0]) } == expected)
    }
}
