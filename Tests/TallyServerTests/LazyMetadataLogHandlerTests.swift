import Logging
import Synchronization
import TallyServer
import Testing

/// The server's log handler writes the same lines as swift-log's stream handler, rendering metadata late.
@Suite struct LazyMetadataLogHandlerTests {
    /// Collects what the stream handler writes.
    final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    @Test func linesCarryTheLoggersAndTheirOwnMetadata() {
        let lines = Lines()
        var logger = Logger(label: "tally.test") { label in
            LazyMetadataLogHandler(wrapping: StreamLogHandler(label: label, stream: lines, metadataProvider: nil))
        }
        logger[metadataKey: "hb.request.id"] = "r1"
        logger[metadataKey: "shared"] = "logger"
        logger.logLevel = .info
        logger.debug("below the level")
        logger.info("written", metadata: ["shared": "line", "own": "x"])
        let text = lines.text.withLock { $0 }
        #expect(!text.contains("below the level"))
        #expect(text.contains("tally.test:") && text.contains("written"))
        #expect(text.contains("hb.request.id=r1") && text.contains("own=x"))
        #expect(text.contains("shared=line") && !text.contains("shared=logger"), "a line's own value wins")
        #expect(logger[metadataKey: "shared"] == "logger" && logger.logLevel == .info)
    }
}
