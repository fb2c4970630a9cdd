import Foundation
import Logging
import Synchronization
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// The server's log handler writes the same lines as swift-log's stream handler, rendering metadata
/// late, and its sink batches lines below `notice`.
@Suite(.timeLimit(.minutes(1))) struct LazyMetadataLogHandlerTests {
    /// Collects what the stream handler writes.
    final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    /// Two loggers given the same label and metadata provider: the server's, its sink stamping every line
    /// with `second`, and swift-log's stream handler.
    static func both(label: String = "tally.test", second: Int, provider: Logger.MetadataProvider? = nil)
        -> (ours: Logger, theirs: Logger, ourLines: Lines, theirLines: Lines)
    {
        let (ourLines, theirLines) = (Lines(), Lines())
        let sink = LogSink(batching: false, milliseconds: { Int64(second) * 1000 }) { ourLines.write(String(decoding: $0, as: UTF8.self)) }
        let ours = Logger(label: label) { label in
            var handler = LazyMetadataLogHandler(label: label, sink: sink)
            handler.metadataProvider = provider
            return handler
        }
        let theirs = Logger(label: label) { StreamLogHandler(label: $0, stream: theirLines, metadataProvider: provider) }
        return (ours, theirs, ourLines, theirLines)
    }

    /// What `run` returns for a run that began and ended in the same wall-clock second (handed to it): the
    /// stream handler reads the clock, so ours is pinned to that second. A run that straddles a second
    /// boundary, where the two texts would differ in their time, is made again, five times at most.
    static func inOneSecond<T>(_ run: (_ second: Int) -> T) -> T? {
        for _ in 0..<5 {
            let second = Int(time(nil))
            let result = run(second)
            if Int(time(nil)) == second { return result }
        }
        Issue.record("each of five runs straddled a second boundary")
        return nil
    }

    @Test func linesAreSwiftLogsStreamLinesWithTheLoggersAndTheirOwnMetadata() {
        let provider = Logger.MetadataProvider { ["provided": "p", "shared": "provider"] }
        let run = Self.inOneSecond { second in
            var (ours, theirs, ourLines, theirLines) = Self.both(second: second, provider: provider)
            for index in [0, 1] {
                var logger = index == 0 ? ours : theirs
                logger[metadataKey: "hb.request.id"] = "r1"
                logger[metadataKey: "shared"] = "logger"
                logger.debug("below the level")
                logger.info("written", metadata: ["shared": "line", "own": "x", "count": .stringConvertible(3)])
                logger.warning("no metadata of its own")
                logger.error("with an error", error: TestError())
                logger.critical("nested values", metadata: ["list": ["a", ["k": "v"]], "empty": ""])
                if index == 0 { ours = logger } else { theirs = logger }
            }
            return (ours: ours, text: ourLines.text.withLock { $0 }, theirs: theirLines.text.withLock { $0 })
        }
        guard let (ours, text, theirs) = run else { return }
        #expect(text == theirs, "byte for byte, the time included")
        #expect(text.split(separator: "\n").count == 4)
        #expect(!text.contains("below the level"))
        #expect(text.contains("hb.request.id=r1") && text.contains("own=x"))
        let written = text.split(separator: "\n").first { $0.hasSuffix("] written") } ?? ""
        #expect(written.contains("shared=line") && !written.contains("shared=logger"), "a line's own value wins")
        #expect(ours[metadataKey: "shared"] == "logger" && ours.logLevel == .info)
    }

    @Test func aLoggerWithoutLabelOrMetadataWritesTheSameLines() {
        let run = Self.inOneSecond { second in
            let (ours, theirs, ourLines, theirLines) = Self.both(label: "", second: second)
            for logger in [ours, theirs] {
                logger.info("bare")
                logger.notice("with its own", metadata: ["k": "v"])
            }
            return (text: ourLines.text.withLock { $0 }, theirs: theirLines.text.withLock { $0 })
        }
        guard let (text, theirs) = run else { return }
        #expect(text == theirs, "byte for byte, the time included")
        #expect(text.split(separator: "\n").count == 2)
    }

    @Test func theSinkBatchesLinesBelowNoticeUntilFlushedANoticeLineOrALineAHundredMillisecondsLater() {
        let written = Lines()
        let now = Mutex<Int64>(1_800_000_000_000)
        let sink = LogSink(batching: true, milliseconds: { now.withLock { $0 } }) { written.write(String(decoding: $0, as: UTF8.self)) }
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
        now.withLock { $0 += LogSink.maxDelay - 1 }
        logger.info("sixth")
        #expect(messages().last == "fourth", "99 ms after the first waiting line, lines still wait")
        now.withLock { $0 += 1 }
        logger.info("seventh")
        #expect(messages().suffix(3) == ["fifth", "sixth", "seventh"], "a line 100 ms after the first waiting one takes them along")
    }

    @Test("A line reaches the log within 100 ms of the injected clock, whenever it is written and whether or not others follow")
    func aLineIsWrittenWithinAHundredMilliseconds() async throws {
        let clock = ManualClock()
        let written = Lines()
        let sink = LogSink(batching: true, milliseconds: { clock.now.millis }) { written.write(String(decoding: $0, as: UTF8.self)) }
        let logger = Logger(label: "tally.test") { LazyMetadataLogHandler(label: $0, sink: sink) }
        let flusher = Task { try await LogFlusher(sink: sink, clock: clock).run() }
        defer { flusher.cancel() }
        try await clock.waitForSleepers()
        var generator = SplitMix64(seed: 31)
        var delays: [Int64] = []
        for index in 0..<200 {
            // Somewhere in the flusher's interval, in steps of a millisecond.
            // (Set by whole milliseconds: adding 0.001 s to a `Date` this far from 1970 can round down to nothing.)
            clock.set(Date(millis: clock.now.millis + Int64(generator.next() % 60)))
            if clock.sleeperCount == 0 { try await clock.waitForSleepers() }
            let loggedAt = clock.now.millis
            logger.info("line \(index)")
            while !written.text.withLock({ $0 }).contains("] line \(index)\n") {
                #expect(clock.now.millis - loggedAt < LogSink.maxDelay, "line \(index) still waits")
                guard clock.now.millis - loggedAt < 1000 else { return }
                clock.set(Date(millis: clock.now.millis + 1))
                // Woken: wait until it flushed and sleeps again.
                if clock.sleeperCount == 0 { try await clock.waitForSleepers() }
            }
            delays.append(clock.now.millis - loggedAt)
        }
        #expect(delays.max() ?? 0 <= Int64(LogFlusher.interval * 1000), "the flusher alone writes each within its interval: \(delays.max() ?? 0) ms")
        #expect(Set(delays).count > 10, "lines were written at many points of the interval")
    }

    struct TestError: Error, CustomStringConvertible {
        var description: String { "boom" }
    }
}
