import Logging

/// swift-log's `StreamLogHandler` with the logger's own metadata rendered only when a line is written.
///
/// `StreamLogHandler` renders its metadata into a string every time a key is set. Hummingbird sets the
/// request id on every request's logger, so that rendering was about 4 % of a wallet read's CPU, for lines
/// that are almost never written. Here setting a key only stores it; a line hands it to the stream handler
/// together with its own metadata.
public struct LazyMetadataLogHandler: LogHandler {
    private var stream: StreamLogHandler
    /// The logger's metadata, as set; rendered only into lines that are written.
    public var metadata: Logger.Metadata = [:]

    /// Writes through `stream` (whose own metadata is left empty).
    public init(wrapping stream: StreamLogHandler) {
        self.stream = stream
    }

    /// Writes to standard error, like swift-log's default handler.
    public init(label: String) {
        self.init(wrapping: .standardError(label: label))
    }

    /// The lowest level this handler writes.
    public var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    /// Metadata added to every line at the moment it is written.
    public var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    /// One metadata value; setting it only stores it (rendered when a line is written).
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line, rendering the metadata only now.
    public func log(event: LogEvent) {
        var event = event
        if !metadata.isEmpty {
            event.metadata = metadata.merging(event.metadata ?? [:]) { _, explicit in explicit }
        }
        stream.log(event: event)
    }
}
