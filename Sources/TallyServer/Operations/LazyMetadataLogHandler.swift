import Foundation
import Logging
import ServiceLifecycle
import TallyAPI
import TallyStore

/// `tally serve`'s log handler: the lines of swift-log's `StreamLogHandler`
/// (`<time> <level> <label>: <k=v …> [<source>] <message>`), with the logger's metadata rendered only
/// into lines that are written, and the lines written through a ``LogSink`` (timestamp once per second,
/// batched writes).
///
/// `StreamLogHandler` renders its metadata into a string every time a key is set; Hummingbird sets the
/// request id on every request's logger, so that was about 4 % of a wallet read's CPU, for lines that
/// were almost never written. The access log writes one line per request, which through
/// `StreamLogHandler` cost a third of a wallet read's throughput (time formatting and a system call per
/// line); benchmarks/access-log-ab.md and benchmarks/profiles.md have the measurements.
public struct LazyMetadataLogHandler: LogHandler {
    private let label: String
    private let sink: LogSink
    /// The logger's metadata, as set; rendered only into lines that are written.
    public var metadata: Logger.Metadata = [:]
    /// The lowest level this handler writes.
    public var logLevel: Logger.Level = .info
    /// Metadata added to every line at the moment it is written.
    public var metadataProvider: Logger.MetadataProvider?

    /// Writes `label`'s lines to `sink` (standard error, batched, unless told otherwise).
    public init(label: String, sink: LogSink = .standardError) {
        self.label = label
        self.sink = sink
    }

    /// One metadata value; setting it only stores it (rendered when a line is written).
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line, rendering the metadata only now (a line's own values win over the logger's).
    public func log(event: LogEvent) {
        // Pairs in order of precedence, later ones winning; sorted stably by key, the last of a key is kept.
        var pairs = Array(metadata)
        if let provided = metadataProvider?.get() { pairs += provided }
        if let explicit = event.metadata { pairs += explicit }
        if let error = event.error {
            pairs.append(("error.message", "\(error)"))
            pairs.append(("error.type", "\(String(reflecting: type(of: error)))"))
        }
        let ordered = pairs.enumerated().sorted { ($0.element.key, $0.offset) < ($1.element.key, $1.offset) }
        var line = ""
        line.reserveCapacity(256)
        line.append(" ")
        line.append(event.level.rawValue)
        if !label.isEmpty {
            line.append(" ")
            line.append(label)
        }
        line.append(":")
        for (index, pair) in ordered.enumerated() where index + 1 == ordered.count || ordered[index + 1].element.key != pair.element.key {
            line.append(" ")
            line.append(pair.element.key)
            line.append("=")
            line.append(pair.element.value.description)
        }
        line.append(" [")
        line.append(event.source)
        line.append("] ")
        line.append(event.message.description)
        line.append("\n")
        sink.write(line, level: event.level)
    }
}

/// Flushes a ``LogSink`` every ``interval`` while the server runs, and once more when it stops (after every
/// other service of the group, when it is the group's first: `tally serve` puts it there).
public struct LogFlusher: Service {
    /// How often the buffer is written: with the sink's own rule (a line waits at most ``LogSink/maxDelay``
    /// when others follow), a line reaches the log within 100 ms even when nothing follows it.
    public static let interval: TimeInterval = 0.05

    let sink: LogSink
    let clock: any TallyClock

    /// A flusher of `sink`, sleeping on `clock`.
    public init(sink: LogSink, clock: any TallyClock = SystemClock()) {
        self.sink = sink
        self.clock = clock
    }

    /// Flushes every ``interval`` until the service group stops, then a last time.
    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await clock.sleep(for: Self.interval) }
            sink.flush()
        }
        sink.flush()
    }
}
