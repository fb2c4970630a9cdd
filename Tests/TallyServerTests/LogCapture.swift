import Logging
import Synchronization

/// A log handler that keeps every line, for tests of what the server logs (and what it must not).
struct LogCapture: LogHandler, Sendable {
    /// One line as logged.
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]

        /// The message and every metadata value, for searching for what must not be there.
        var text: String { ([message] + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ") }
    }

    private final class Storage: Sendable {
        let lines = Mutex<[Line]>([])
    }

    private let storage = Storage()
    /// The lowest level the server logs at when it logs here (``LiveServer/with``).
    let level: Logger.Level
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    /// A capture for a server logging at `level` and above.
    init(level: Logger.Level = .notice) { self.level = level }

    /// Every line so far.
    var lines: [Line] { storage.lines.withLock { $0 } }

    /// The lines whose message is `message`.
    func lines(_ message: String) -> [Line] { lines.filter { $0.message == message } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let line = Line(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" })
        storage.lines.withLock { $0.append(line) }
    }
}
