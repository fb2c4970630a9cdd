import Foundation
import TallyAPI

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
        ticks(stat: stat, fields: 2).map { $0 / ticksPerSecond }
    }

    /// CPU seconds of a process and of the children it has waited for (`utime + stime + cutime + cstime`), from the
    /// text of `/proc/<pid>/stat`: a PostgreSQL backend's CPU moves into the postmaster's `cutime` when it exits.
    public static func cpuSecondsWithChildren(stat: String, ticksPerSecond: Double = 100) -> Double? {
        ticks(stat: stat, fields: 4).map { $0 / ticksPerSecond }
    }

    /// The sum of `fields` clock-tick fields from `utime` (field 14, 1-based over the whole line) on: `utime`, `stime`,
    /// `cutime`, `cstime`.
    private static func ticks(stat: String, fields count: Int) -> Double? {
        // The command name may hold spaces and parentheses: fields start after the last ')', with the state first.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 11 + count else { return nil }
        let ticks = fields[11..<(11 + count)].compactMap { Double($0) }
        return ticks.count == count ? ticks.reduce(0, +) : nil
    }

    /// The command name (`comm`) from the text of `/proc/<pid>/stat`.
    public static func commandName(stat: String) -> Substring? {
        guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"), open < close else { return nil }
        return stat[stat.index(after: open)..<close]
    }

    /// The CPU seconds, children included, of every process of the machine named one of `names`: a whole PostgreSQL
    /// cluster (each backend is named `postgres`; those that exited are in the postmaster's children's time) and PgBouncer.
    public static func cpuSeconds(ofProcessesNamed names: Set<String>) -> Double {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var total = 0.0
        for entry in entries where entry.first?.isNumber == true {
            guard let stat = read("/proc/\(entry)/stat"), let name = commandName(stat: stat), names.contains(String(name)),
                let seconds = cpuSecondsWithChildren(stat: stat)
            else { continue }
            total += seconds
        }
        return total
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

/// What the measured phase cost in CPU, per operation: the servers' own CPU and the database's (every `postgres` and
/// `pgbouncer` process of the machine, so run it on a machine with no other cluster busy; zero on SQLite, which runs
/// inside the server). Read from `/proc` at the phase's start and end.
public struct OperationCost: Sendable, Hashable, Codable {
    /// Operations of the measured phase (every request, refusals and errors included).
    public var operations: Int
    /// CPU seconds of the servers (user + system) over the phase.
    public var serverSeconds: Double
    /// CPU seconds of the database processes (PostgreSQL and PgBouncer) over the phase.
    public var databaseSeconds: Double
    /// Server CPU per operation, in microseconds.
    public var serverMicroseconds: Double
    /// Database CPU per operation, in microseconds.
    public var databaseMicroseconds: Double

    /// The cost of `operations` from two readings.
    public init(operations: Int, start: CPUReading, end: CPUReading) {
        self.operations = operations
        serverSeconds = max(0, end.servers - start.servers)
        databaseSeconds = max(0, end.database - start.database)
        let count = Double(max(operations, 1))
        serverMicroseconds = serverSeconds / count * 1e6
        databaseMicroseconds = databaseSeconds / count * 1e6
    }
}

/// CPU seconds used so far by the servers and by the database processes.
public struct CPUReading: Sendable, Hashable {
    /// The servers' (user + system).
    public var servers: Double
    /// Every `postgres` and `pgbouncer` process's, children included.
    public var database: Double

    /// A reading of these totals.
    public init(servers: Double, database: Double) {
        (self.servers, self.database) = (servers, database)
    }

    /// A reading now of `servers` and the machine's database processes.
    public static func now(servers: [(name: String, pid: Int32)]) -> CPUReading {
        let own = servers.compactMap { ProcFS.read("/proc/\($0.pid)/stat").flatMap { ProcFS.cpuSeconds(stat: $0) } }.reduce(0, +)
        return CPUReading(servers: own, database: ProcFS.cpuSeconds(ofProcessesNamed: ["postgres", "pgbouncer"]))
    }
}
