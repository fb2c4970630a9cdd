import Foundation

/// CPU and resident memory of one process at one moment, read from `/proc`.
public struct ProcessSample: Sendable, Hashable, Codable {
    /// Seconds since the start of the measured phase.
    public var second: Double
    /// Which process: `server 1`, `server 2`, `load tool`.
    public var process: String
    /// CPU use since the previous sample, in percent of one core.
    public var cpuPercent: Double
    /// Resident memory in bytes.
    public var residentBytes: Int
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/statm` (Linux). Pure parsing, so it is testable on text.
public enum ProcFS {
    /// CPU seconds (user + system) from the text of `/proc/<pid>/stat`.
    public static func cpuSeconds(stat: String, ticksPerSecond: Double = 100) -> Double? {
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3, utime field 14, stime field 15 (1-based over the whole line).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond
    }

    /// Resident bytes from the text of `/proc/<pid>/statm`.
    public static func residentBytes(statm: String, pageSize: Int = 4096) -> Int? {
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * pageSize
    }

    /// The peak resident bytes (`VmHWM`, the high-water mark) from the text of `/proc/<pid>/status`: a peak, so no
    /// spike between two reads escapes it.
    public static func peakResidentBytes(status: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
        let fields = line.split { $0 == " " || $0 == "\t" }
        guard fields.count == 3, fields[2] == "kB", let kibibytes = Int(fields[1]) else { return nil }
        return kibibytes * 1024
    }

    static func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }
}

/// Samples named processes once a second while a run lasts.
final class ProcessSampler: Sendable {
    let processes: @Sendable () -> [(name: String, pid: Int32)]

    init(processes: @escaping @Sendable () -> [(name: String, pid: Int32)]) { self.processes = processes }

    /// Samples until cancelled; returns every sample.
    func run(from start: ContinuousClock.Instant) async -> [ProcessSample] {
        var samples: [ProcessSample] = []
        var last: [String: (pid: Int32, cpu: Double, at: ContinuousClock.Instant)] = [:]
        while !Task.isCancelled {
            let now = ContinuousClock.now
            for (name, pid) in processes() {
                guard let stat = ProcFS.read("/proc/\(pid)/stat"), let cpu = ProcFS.cpuSeconds(stat: stat),
                    let statm = ProcFS.read("/proc/\(pid)/statm"), let rss = ProcFS.residentBytes(statm: statm)
                else { continue }
                if let previous = last[name], previous.pid == pid {
                    let elapsed = Self.seconds(now - previous.at)
                    let second = Self.seconds(now - start)
                    samples.append(ProcessSample(second: second, process: name, cpuPercent: elapsed > 0 ? (cpu - previous.cpu) / elapsed * 100 : 0, residentBytes: rss))
                }
                last[name] = (pid, cpu, now)
            }
            try? await Task.sleep(for: .seconds(1))
        }
        return samples
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
