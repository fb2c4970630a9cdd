import ArgumentParser
import Foundation
import TallyLoad

/// `tally-dev loadtest`: simulated app users against `tally serve` (started here, or already running), then
/// the books check; exits 0 only when every account balances.
struct LoadTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Drive N simulated app users against Tally servers, then check every account's books.",
        discussion: """
            Without --url it starts the servers itself (`tally serve`: --binary, else TALLY_BIN, else the `tally` beside \
            this binary): one on the embedded SQLite, or
            --servers N sharing the PostgreSQL at DATABASE_URL. Exit status: 0 when the books balance, 3 when they do not.
            For 10,000 connections run it through scripts/loadtest, which raises the kernel's listen limits.
            """)

    @Option(help: "Simulated users, each with its own guest identity and connection.") var users = 10_000
    @Option(name: .customLong("sdk-users"), help: "How many of them run the TallyClient SDK.") var sdkUsers = 200
    @Option(name: .customLong("sync-users"), help: "How many of them sync documents (push, pull, an event stream each).") var syncUsers = 0
    @Option(help: "Open loop: operations per second offered, whatever the latency.") var rate: Double = 2_000
    @Option(help: "Closed loop instead: this many workers, each starting an operation when the last one ends.") var closed: Int?
    @Option(help: "Seconds of the measured phase.") var duration = 60
    @Option(help: "Seed of the random choices.") var seed: UInt64 = 1
    @Option(name: .customLong("setup-concurrency"), help: "Requests in flight while users sign in.") var setupConcurrency = 256
    @Option(help: "Servers to start (more than one needs DATABASE_URL).") var servers = 1
    @Option(help: "The servers' listen backlog.") var backlog = 16_384
    @Option(name: .customLong("url"), help: "A running server instead (repeatable); needs TALLY_ADMIN_KEY and --admin-url.") var urls: [String] = []
    @Option(name: .customLong("admin-url"), help: "The admin listener of each --url server, in the same order.") var adminURLs: [String] = []
    @Option(name: .customLong("server-pid"), help: "Pids of running servers to sample (repeatable).") var serverPids: [Int32] = []
    @Option(name: .customLong("crash-at"), help: "Kill server 1 with SIGKILL this many seconds into the run, then restart it.") var crashAt: Int?
    @Option(name: .customLong("down-for"), help: "Seconds a crashed server stays down.") var downFor = 2
    @Option(
        name: .customLong("db-outage-at"),
        help: "Stop PostgreSQL this many seconds into the run ($TALLY_PG_CONTROL stop|start, which scripts/with-postgres exports).")
    var outageAt: Int?
    @Option(name: .customLong("db-outage-for"), help: "Seconds PostgreSQL stays stopped.") var outageFor = 10
    @Option(help: "Directory for report.md, report.json and latency.svg.") var out = "loadtest-report"
    @Option(help: "The tally binary to serve (default: TALLY_BIN, else the tally beside this binary).") var binary: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        var fleet: ServerFleet?
        let targets: [URL]
        let adminTargets: [URL]
        let adminKey: String
        if urls.isEmpty {
            if servers > 1, (environment["DATABASE_URL"] ?? "").isEmpty {
                throw ValidationError("--servers \(servers) needs DATABASE_URL: several processes share one PostgreSQL")
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-loadtest-\(UUID().uuidString)")
            let serverBinary = try ServerBinary.path(binary)
            var settings = ServerFleet.Settings(binary: serverBinary, directory: directory)
            settings.count = servers
            settings.backlog = backlog
            settings.databaseURL = environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
            log("starting \(servers) tally serve process(es) in \(directory.path) (\((environment["DATABASE_URL"] ?? "").isEmpty ? "SQLite" : "PostgreSQL"))")
            let started = try await ServerFleet(settings)
            fleet = started
            targets = started.urls
            adminTargets = started.adminURLs
            adminKey = started.adminKey
        } else {
            guard let key = environment["TALLY_ADMIN_KEY"], !key.isEmpty else { throw ValidationError("--url needs TALLY_ADMIN_KEY") }
            guard adminURLs.count == urls.count else { throw ValidationError("give one --admin-url per --url, in the same order") }
            targets = try urls.map { guard let url = URL(string: $0) else { throw ValidationError("bad --url \($0)") }; return url }
            adminTargets = try adminURLs.map { guard let url = URL(string: $0) else { throw ValidationError("bad --admin-url \($0)") }; return url }
            adminKey = key
        }
        defer { fleet?.stop() }

        var options = LoadOptions(servers: targets, adminServers: adminTargets, adminKey: adminKey)
        options.users = users
        options.sdkUsers = min(sdkUsers, users)
        options.syncUsers = min(syncUsers, users - options.sdkUsers)
        options.mode = closed.map { .closed(workers: $0) } ?? .open(perSecond: rate)
        options.duration = .seconds(duration)
        options.seed = seed
        options.setupConcurrency = setupConcurrency
        var run = LoadRun(options: options)
        run.log = { log($0) }
        let pids = serverPids
        var outage: DatabaseOutage?
        if let outageAt {
            guard fleet != nil, let control = environment["TALLY_PG_CONTROL"], !control.isEmpty, options.servers.count > 0 else {
                throw ValidationError("--db-outage-at needs servers started here on DATABASE_URL, and TALLY_PG_CONTROL (scripts/with-postgres)")
            }
            let made = DatabaseOutage(
                .init(at: .seconds(outageAt), length: .seconds(outageFor), control: control), servers: targets, adminServers: adminTargets,
                adminKey: adminKey)
            try await made.prepare()
            run.faults.append(made.fault)
            outage = made
        }
        if let fleet {
            run.sampled = { fleet.processes }
            if let crashAt {
                let down = downFor
                run.faults += [ScheduledFault(at: .seconds(crashAt), name: "server 1 killed (SIGKILL) at \(crashAt) s, restarted after \(down) s") {
                    try await fleet.crash(0, downFor: .seconds(down))
                }]
            }
        } else {
            run.sampled = { pids.enumerated().map { ("server \($0.offset + 1)", $0.element) } }
        }
        var report = try await run.run()
        if let outage, let fleet {
            // The case that wedged servers in the field: SIGTERM while the database is down.
            report.outage = outage.result
            try await outage.control("stop")
            log("PostgreSQL stopped again; stopping the servers with SIGTERM")
            report.outage?.shutdownSeconds = fleet.stop()
            try await outage.control("start")
        }

        let directory = URL(fileURLWithPath: out)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let markdown = report.markdown(chart: "latency.svg")
        try markdown.write(to: directory.appendingPathComponent("report.md"), atomically: true, encoding: .utf8)
        try report.json().write(to: directory.appendingPathComponent("report.json"))
        try report.svgChart().write(to: directory.appendingPathComponent("latency.svg"), atomically: true, encoding: .utf8)
        print(markdown)
        log("report written to \(directory.path)/report.md, report.json, latency.svg")
        fleet?.stop()
        if !report.passed { throw ExitCode(3) }
    }
}

private func log(_ line: String) {
    FileHandle.standardError.write(Data("[loadtest \(ISO8601DateFormatter().string(from: Date()))] \(line)\n".utf8))
}
