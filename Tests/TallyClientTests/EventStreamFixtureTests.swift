import Foundation
import NIOCore
import TallyAPI
@testable import TallyClient
@testable import TallyServer
import TallyTestSupport
import Testing

/// One event-stream parser (TallyAPI's `EventStreamParser`) for the gateway's relay and the SDK: both read
/// `Tests/Fixtures/event-stream.txt` — every edge case of the WHATWG rules in an OpenAI-shaped stream — in every
/// split position, and the SDK reads what the relay made of it.
@Suite("Event streams: the relay and the SDK read one fixture through one parser", .timeLimit(.minutes(2)))
struct EventStreamFixtureTests {
    static let fixture: [UInt8] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/event-stream.txt")
        return (try? Array(Data(contentsOf: url))) ?? []
    }()

    static func chunk(_ delta: String, finish: String = "null", usage: String = "null", choices: String? = nil) -> String {
        #"{"id":"c1","object":"chat.completion.chunk","choices":"# + (choices ?? #"[{"index":0,"delta":\#(delta),"finish_reason":\#(finish)}]"#)
            + #","usage":\#(usage)}"#
    }

    /// What the fixture says, line by line of the file, by the standard's rules.
    static let expected: [EventStreamParser.Item] = [
        .comment("a comment after the byte order mark"),  // the BOM skipped: else this line is an unknown field
        .retry(2500),
        .event(.init(data: Array(chunk(#"{"role":"assistant","content":""}"#).utf8))),
        .comment("keep-alive, CRLF line ends"),
        .event(.init(data: Array(chunk(#"{"content":"Hel"}"#).utf8))),
        .event(.init(data: Array(chunk(#"{"content":"lo, 世界"}"#).utf8))),  // `data:` without a space, CR line ends
        .event(.init(
            data: Array((#"{"id":"c1","object":"chat.completion.chunk","# + "\n" + #" "choices":[{"index":0,"delta":{"content":" one\ntwo"},"finish_reason":null}],"usage":null}"#).utf8),
            dataLines: 2, id: "7", lastEventId: "7")),
        // `event: ping` without data dispatches nothing; an id holding NUL, `retry: 12x` and an unknown field are ignored;
        // `data` without a colon is an empty data line.
        .event(.init(data: Array(("\n" + chunk("{}", finish: #""stop""#)).utf8), dataLines: 2, lastEventId: "7")),
        .event(.init(data: Array(chunk("", usage: #"{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}"#, choices: "[]").utf8), lastEventId: "7")),
        .event(.init(data: Array("[DONE]".utf8), lastEventId: "7")),
        // The last event is cut off by the end of the stream: never dispatched.
    ]

    /// `bytes` fed in `pieces` (cut at the given offsets) to a fresh parser.
    static func parse(_ bytes: [UInt8], cuts: [Int]) throws -> (items: [EventStreamParser.Item], parser: EventStreamParser) {
        var parser = EventStreamParser()
        var items: [EventStreamParser.Item] = []
        for (start, end) in zip([0] + cuts, cuts + [bytes.count]) {
            try parser.feed(bytes[start..<end]) { items.append($0) }
        }
        return (items, parser)
    }

    @Test("The parser reads the fixture the same cut at every position, byte by byte and in random pieces")
    func everySplit() throws {
        let fixture = Self.fixture
        #expect(fixture.count > 1_000 && fixture.starts(with: [0xEF, 0xBB, 0xBF]), "the fixture is there")
        var cuttings = (0...fixture.count).map { [$0] } + [Array(1..<fixture.count)]
        var random = SplitMix64(seed: 31)
        for _ in 0..<200 {
            cuttings.append(Array(Set((0..<Int(random.next() % 40)).map { _ in Int(random.next() % UInt64(fixture.count)) })).sorted())
        }
        for cuts in cuttings {
            let (items, parser) = try Self.parse(fixture, cuts: cuts)
            #expect(items == Self.expected, "cut at \(cuts.prefix(8))")
            #expect(parser.lastEventId == "7" && parser.reconnectionDelay == 2.5 && parser.bufferedBytes > 0, "cut at \(cuts.prefix(8))")
        }
        // The SDK's entry point (events as text) is the same parser.
        var sdk = EventStreamParser()
        let events = try stride(from: 0, to: fixture.count, by: 7).flatMap { try sdk.feed(fixture[$0..<min($0 + 7, fixture.count)]) }
        let expectedEvents = Self.expected.compactMap { item -> ServerSentEvent? in
            if case .event(let event) = item { return ServerSentEvent(event) } else { return nil }
        }
        #expect(events == expectedEvents)
    }

    @Test("The relay re-frames what the parser read, at every cut, and the SDK reads from it the upstream's events and text", arguments: [false, true])
    func relayThenSDK(_ clientWantsUsage: Bool) throws {
        let fixture = Self.fixture
        let sent = Self.expected.compactMap { item -> [UInt8]? in if case .event(let event) = item { event.data } else { nil } }
        let usageChunk = sent[sent.count - 2]
        for cut in 0...fixture.count {
            var parser = EventStreamParser(limit: AIGatewayProtocol.maxUpstreamEventBytes)
            var tally = StreamRelay.Tally()
            var out = ByteBuffer()
            for piece in [fixture[..<cut], fixture[cut...]] {
                StreamRelay.relay(piece, parser: &parser, clientWantsUsage: clientWantsUsage, redaction: KeyRedaction(key: nil), tally: &tally, into: &out)
            }
            #expect(tally.done && tally.failure == nil && tally.generatedChunks == 3, "cut at \(cut): \(tally)")
            #expect(tally.usage == ChatUsage(promptTokens: 9, completionTokens: 3), "cut at \(cut)")
            // What the client reads: the upstream's events, the usage chunk only when asked for.
            var sdk = EventStreamParser()
            let events = try sdk.feed(out.readableBytesView)
            #expect(events.map { Array($0.data.utf8) } == (clientWantsUsage ? sent : sent.filter { $0 != usageChunk }), "cut at \(cut)")
            #expect(events.allSatisfy { $0.name == "message" })
            var interpreter = AIStreamInterpreter()
            let read = events.compactMap { interpreter.read($0) }
            #expect(read.map(\.content).joined() == "Hello, 世界 one\ntwo" && read.contains { $0.finishReason == "stop" }, "cut at \(cut): \(read)")
            #expect(read.contains { $0.usage != nil } == clientWantsUsage && interpreter.done)
        }
    }
}
