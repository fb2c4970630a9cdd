#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import Synchronization
import TallyStore

/// Where ``LazyMetadataLogHandler`` writes lines: timestamped here, and batched.
///
/// With one access-log line per request, swift-log's stream handler cost a third of a wallet read's
/// throughput: it formats the time with `localtime` and `strftime` and makes a `write` system call for
/// every line. Here the timestamp is formatted once per second, and lines below `notice` collect in a
/// buffer written when it reaches 16 KiB, when a line arrives ``maxDelay`` (100 ms) or more after the first
/// one waiting, or on ``flush()``, which ``LogFlusher`` calls every ``LogFlusher/interval`` (50 ms): a line
/// reaches the log within 100 ms, and a `SIGKILL` loses at most the lines of the last 100 ms. A line at
/// `notice` or above is written at once, after those waiting.
public final class LogSink: Sendable {
    private struct State {
        var pending: [UInt8] = []
        /// When the first line waiting was written (milliseconds since 1970).
        var pendingSince: Int64 = 0
        var stampSecond: Int64 = -1
        var stamp: [UInt8] = []
    }

    /// The longest a line waits in the buffer when other lines follow it.
    public static let maxDelay: Int64 = 100

    private let state = Mutex(State())
    private let output: @Sendable ([UInt8]) -> Void
    private let batches: Bool
    private let milliseconds: @Sendable () -> Int64

    /// A sink handing lines to `output`; with `batching` off, every line at once (for tests).
    public convenience init(batching: Bool = true, output: @escaping @Sendable ([UInt8]) -> Void) {
        self.init(batching: batching, milliseconds: LogSink.realTime, output: output)
    }

    /// A sink reading the time (milliseconds since 1970) from `milliseconds`.
    init(batching: Bool, milliseconds: @escaping @Sendable () -> Int64, output: @escaping @Sendable ([UInt8]) -> Void) {
        self.batches = batching
        self.milliseconds = milliseconds
        self.output = output
    }

    /// Standard error, batched.
    public static let standardError = LogSink { writeAll($0, to: 2) }

    /// Appends `line` (everything after the timestamp, newline included) with the current time in front.
    /// Written under the lock, so batches keep their order.
    func write(_ line: String, level: Logger.Level) {
        let now = milliseconds()
        let second = now / 1000
        state.withLock { state in
            if state.stampSecond != second {
                state.stampSecond = second
                state.stamp = Self.timestamp(second)
            }
            if state.pending.isEmpty { state.pendingSince = now }
            let due = state.pending.count >= 16_384 || now - state.pendingSince >= Self.maxDelay
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

    /// The real time in milliseconds since 1970 (`clock_gettime` through the vDSO underneath: no system call).
    private static let realTime: @Sendable () -> Int64 = { Int64(saturating: Date().timeIntervalSince1970 * 1000) }

    /// `2026-01-15T08:00:00+0000`, in local time, as swift-log's stream handler writes it.
    private static func timestamp(_ seconds: Int64) -> [UInt8] {
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
