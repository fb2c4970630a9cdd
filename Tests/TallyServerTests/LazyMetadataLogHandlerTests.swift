import Logging
import Synchronization
import Testing

@testable import TallyServer

/// The server's log handler writes the same lines as swift-log's stream handler, rendering metadata
/// late, and its sink batches lines below `notice`.
@Suite struct LazyMetadataLogHandlerTests {
    /// Collects what the stream handler writes.
    final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    /// Two loggers given the same metadata and lines: the server's and swift-log's stream handler.
    static func both(level: Logger.Level = .info) -> (ours: Logger, theirs: Logger, ourLines: Lines, theirLines: Lines) {
        let (ourLines, theirLines) = (Lines(), Lines())
        let sink = LogSink(batching: false) { ourLines.write(String(decoding: $0, as: UTF8.self)) }
        var ours = Logger(label: "tally.test") { LazyMetadataLogHandler(label: $0, sink: sink) }
        var theirs = Logger(label: "tally.test") { StreamLogHandler(label: $0, stream: theirLines, metadataProvider: nil) }
        ours.logLevel = level
        theirs.logLevel = level
        return (ours, theirs, ourLines, theirLines)
    }

    /// A line without its timestamp (the two handlers may write in different seconds).
    static func untimed(_ text: String) -> [String] {
        text.split(separator: "\n").map { String($0.drop { $0 != " " }) }
    }

    @Test func linesAreSwiftLogsStreamLinesWithTheLoggersAndTheirOwnMetadata() {
        var (ours, theirs, ourLines, theirLines) = Self.both()
        for index in [0, 1] {
            var logger = index == 0 ? ours : theirs
            logger[metadataKey: "hb.request.id"] = "r1"
            logger[metadataKey: "shared"] = "logger"
            logger.debug("below the level")
            logger.info("written", metadata: ["shared": "line", "own": "x", "count": .stringConvertible(3)])
            logger.warning("no metadata of its own")
            logger.error("with an error", error: TestError())
            if index == 0 { ours = logger } else { theirs = logger }
        }
        let text = ourLines.text.withLock { $0 }
        #expect(Self.untimed(text) == Self.untimed(theirLines.text.withLock { $0 }))
        #expect(!text.contains("below the level"))
        #expect(text.contains("hb.request.id=r1") && text.contains("own=x"))
        let written = text.split(separator: "\n").first { $0.hasSuffix("] written") } ?? ""
        #expect(written.contains("shared=line") && !written.contains("shared=logger"), "a line's own value wins")
        #expect(ours[metadataKey: "shared"] == "logger" && ours.logLevel == .info)
    }

    @Test func theSinkBatchesLinesBelowNoticeUntilFlushedANoticeLineOrTheNextSecond() {
        let written = Lines()
        let second = Mutex(1_800_000_000)
        let sink = LogSink(batching: true, seconds: { second.withLock { $0 } }) { written.write(String(decoding: $0, as: UTF8.self)) }
        let logger = Logger(label: "tally.test") { LazyMetadataLogHandler(label: $0, sink: sink) }
        func messages() -> [String] {
            written.text.withLock { $0 }.split(separator: "\n").map { String($0.split(separator: "] ").last ?? "") }
        }
        logger.info("first")
        logger.info("second")
        #expect(messages().isEmpty, "info lines wait")
        logger.warning("third")
        #expect(messages() == ["first", "second", "third"], "a warning is written at once, after the lines waiting")
        logger.info("fourth")
        sink.flush()
        #expect(messages().last == "fourth")
        logger.info("fifth")
        second.withLock { $0 += 1 }
        logger.info("sixth")
        #expect(messages().suffix(2) == ["fifth", "sixth"], "a line in a later second takes the waiting ones along")
    }

    struct TestError: Error, CustomStringConvertible {
        var description: String { "boom" }
    }
}
