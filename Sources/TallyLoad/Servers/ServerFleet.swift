import Foundation
import Synchronization
import TallyAPI

/// `tally serve` child processes for a load run: started on free ports, killed and restarted on the same
/// port for fault injection, stopped at the end.
public final class ServerFleet: Sendable {
    /// How to start the servers.
    public struct Settings: Sendable {
        /// The `tally` binary.
        public var binary: String
        /// Working directory: data, configuration and logs.
        public var directory: URL
        /// How many processes (more than one needs `DATABASE_URL`).
        public var count = 1
        /// `--backlog` of each.
        public var backlog = 16_384
        /// The PostgreSQL the servers share; nil runs one server on the embedded SQLite.
        public var databaseURL: String?
        /// Extra environment (`TALLY_POSTGRES_POOL`, `LOG_LEVEL`…).
        public var environment: [String: String] = [:]

        /// Settings for `binary` working in `directory`.
        public init(binary: String, directory: URL) {
            self.binary = binary
            self.directory = directory
        }
    }

    /// The configuration a load run expects: a quota action, a token action, the sync users' collection, no sign-up limit. Every simulated
    /// user comes from 127.0.0.1, but with a device, a session and an account of its own, and the harness sends
    /// no password sign-ins, links or wrong keys; its refreshes succeed (only refused ones count per address),
    /// so the production defaults of `limits:` hold, and a run checks them rather than working around them.
    public static let configuration = """
        signupGrant: 0
        guestSignupsPerIPPerHour: 1000000000
        quotas:
          - {name: readings, daily: 3}
        actions:
          - {name: reading, quota: readings, tokens: 5}
          - {name: ai.query, tokens: 3}
        collections:
          - {name: load_logs, rangeKey: date}
        """

    private struct Member {
        var process: ChildProcess
        var port: Int
        var adminPort: Int
        var log: URL
    }

    private let settings: Settings
    /// The admin key every server shares.
    public let adminKey: String
    private let members = Mutex<[Member]>([])

    /// Starts `settings.count` servers and waits until each listens.
    public init(_ settings: Settings) async throws {
        guard settings.count == 1 || settings.databaseURL != nil else {
            throw LoadError("several servers need a PostgreSQL to share: the embedded SQLite belongs to one process")
        }
        self.settings = settings
        adminKey = (0..<4).map { _ in UUID().uuidString.replacingOccurrences(of: "-", with: "") }.joined()
        try FileManager.default.createDirectory(at: settings.directory, withIntermediateDirectories: true)
        try Self.configuration.write(to: settings.directory.appendingPathComponent("load.yaml"), atomically: true, encoding: .utf8)
        for index in 0..<settings.count {
            let member = try await start(index: index, port: 0, adminPort: 0)
            members.withLock { $0.append(member) }
        }
    }

    /// Base URLs of the servers.
    public var urls: [URL] { members.withLock { $0.map { URL(string: "http://127.0.0.1:\($0.port)")! } } }

    /// Base URLs of the servers' admin listeners, in the same order.
    public var adminURLs: [URL] { members.withLock { $0.map { URL(string: "http://127.0.0.1:\($0.adminPort)")! } } }

    /// Process ids by name, for the resource samples.
    public var processes: [(name: String, pid: Int32)] {
        members.withLock { $0.enumerated().map { ("server \($0.offset + 1)", $0.element.process.processIdentifier) } }
    }

    /// Kills server `index` with SIGKILL (no graceful shutdown), waits `downFor`, and starts it again on its ports.
    public func crash(_ index: Int, downFor: Duration) async throws {
        let member = members.withLock { $0[index] }
        member.process.kill()
        _ = await member.process.wait()
        try await Task.sleep(for: downFor)
        let restarted = try await start(index: index, port: member.port, adminPort: member.adminPort)
        members.withLock { $0[index] = restarted }
    }

    /// Stops every server with SIGTERM (graceful), all at once, and waits; returns each one's seconds from
    /// the signal to its exit.
    @discardableResult
    public func stop() -> [Double] {
        let running = members.withLock { $0 }.map(\.process).filter(\.isRunning)
        let start = ContinuousClock.now
        for process in running { process.terminate() }
        return running.map { process in
            _ = process.waitUntilExit()
            return ProcessSampler.seconds(.now - start)
        }
    }

    /// Starts server `index` and waits until both its listeners listen.
    ///
    /// Every simulated user connects from 127.0.0.1, so the per-address cap is off; and users signed in
    /// early in a long set-up wait longer than the default idle timeout for the measured phase, so it is
    /// longer than a run (reconnecting thousands of users at its start would measure the reconnects).
    private func start(index: Int, port: Int, adminPort: Int) async throws -> Member {
        let log = settings.directory.appendingPathComponent("server-\(index + 1).log")
        // A restarted server appends to its log: what it prints from here on.
        let offset = (try? FileManager.default.attributesOfItem(atPath: log.path)[.size] as? Int) ?? 0
        let arguments = [
            "serve", "--port", String(port), "--admin-port", String(adminPort), "--backlog", String(settings.backlog),
            "--data-dir", settings.directory.appendingPathComponent("data").path, "--max-connections-per-ip", "0",
            "--idle-timeout", "1800",
        ]
        var environment = ProcessInfo.processInfo.environment.merging(settings.environment) { $1 }
        environment["TALLY_CONFIG"] = settings.directory.appendingPathComponent("load.yaml").path
        environment["TALLY_ADMIN_KEY"] = adminKey
        environment["DATABASE_URL"] = settings.databaseURL
        environment["LOG_LEVEL"] = environment["LOG_LEVEL"] ?? "warning"
        let process = try ChildProcess(
            settings.binary, arguments: arguments, environment: environment, standardOutput: .file(log), standardError: .file(log))
        for _ in 0..<1_200 {
            let text = (try? Data(contentsOf: log)).map { String(decoding: $0.dropFirst(offset), as: UTF8.self) } ?? ""
            if let listening = Self.port(after: "tally listening on http://", in: text),
                let admin = Self.port(after: "tally admin listening on http://", in: text)
            {
                return Member(process: process, port: listening, adminPort: admin, log: log)
            }
            guard process.isRunning else { throw LoadError("tally serve exited:\n\(text)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        throw LoadError("tally serve did not listen within 60 s; see \(log.path)")
    }

    /// The port of the `host:port` that follows `prefix` at the start of a line of `text`.
    static func port(after prefix: String, in text: String) -> Int? {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        let address = line.dropFirst(prefix.count).prefix { $0 != " " }
        return address.split(separator: ":").last.flatMap { Int($0) }
    }
}
