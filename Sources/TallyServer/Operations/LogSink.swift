#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Synchronization

/// Where ``LazyMetadataLogHandler`` writes lines: timestamped here, and batched.
///
/// With one access-log line per request, swift-log's stream handler cost a third of a wallet read's
/// throughput: it formats the time with `localtime` and `strftime` and makes a `write` system call for
/// every line. Here the timestamp is formatted once per second, and lines below `notice` collect in a
/// buffer written when it reaches 16 KiB, when a line arrives in a later second than the first one
/// waiting, or on ``flush()`` (``LogFlusher`` calls it every second): an info line waits at most about
/// a second. A line at `notice` or above is written at once, after those waiting.
public final class LogSink: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var pendingSecond = 0
        var stampSecond = -1
        var stamp: [UInt8] = []
    }

    private let state = Mutex(State())
    private let output: @Sendable ([UInt8]) -> Void
    private let batches: Bool
    private let seconds: @Sendable () -> Int

    /// A sink handing lines to `output`; with `batching` off, every line at once (for tests).
    public convenience init(batching: Bool = true, output: @escaping @Sendable ([UInt8]) -> Void) {
        self.init(batching: batching, seconds: { Int(time(nil)) }, output: output)
    }

    /// A sink reading the time (whole seconds since 1970) from `seconds`.
    init(batching: Bool, seconds: @escaping @Sendable () -> Int, output: @escaping @Sendable ([UInt8]) -> Void) {
        self.batches = batching
        self.seconds = seconds
        self.output = output
    }

    /// Standard error, batched.
    public static let standardError = LogSink { writeAll($0, to: 2) }

    /// Appends `line` (everything after the timestamp, newline included) with the current time in front.
    /// Written under the lock, so batches keep their order.
    func write(_ line: String, level: Logger.Level) {
        let now = seconds()
        state.withLock { state in
            if state.stampSecond != now {
                state.stampSecond = now
                state.stamp = Self.timestamp(now)
            }
            if state.pending.isEmpty { state.pendingSecond = now }
            let due = state.pending.count >= 16_384 || state.pendingSecond != now
            state.pending += state.stamp
            state.pending += line.utf8
            guard !batches || level >= .notice || due else { return }
            output(state.pending)
            state.pending.removeAll(keepingCapacity: true)
        }
    }

    /// Writes the lines waiting in the buffer.
    public func flush() {
        state.withLock { state in
            guard !state.pending.isEmpty else { return }
            output(state.pending)
            state.pending.removeAll(keepingCapacity: true)
        }
    }

    /// `2026-01-15T08:00:00+0000`, in local time, as swift-log's stream handler writes it.
    private static func timestamp(_ seconds: Int) -> [UInt8] {
        var seconds = time_t(seconds)
        var local = tm()
        var buffer = [Int8](repeating: 0, count: 64)
        guard localtime_r(&seconds, &local) != nil else { return Array("<unknown>".utf8) }
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return buffer.prefix(count).map { UInt8(bitPattern: $0) }
    }
}

/// Writes all of `bytes` to the file descriptor, or as much as it takes.
private func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { return }
        offset += written
    }
}
