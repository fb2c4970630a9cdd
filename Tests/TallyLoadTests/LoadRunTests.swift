import Foundation
import TallyLoad
import Testing

/// Small versions of the load scenario against real `tally serve` processes: the books must balance,
/// also when a server is killed with SIGKILL mid-run and restarted.
@Suite(.serialized) struct LoadRunTests {
    @Test func aSmallRunOnSQLiteBalances() async throws {
        let report = try await Self.run(users: 200, sdkUsers: 20, rate: 300, seconds: 4)
        #expect(report.passed, "\(report.books.violations)")
        #expect(report.usersReady == 200)
        #expect(report.total.errors == 0, "\(report.operations.filter { $0.errors > 0 })")
        #expect(report.total.count > 900)
        // Every kind of operation ran, including refusals that must leave nothing behind.
        let names = Set(report.operations.map(\.name))
        for name in ["wallet.read", "action.quota", "action.tokens", "hold.create", "admin.grant", "action.abandoned", "bad-request", "sdk.screen", "sdk.action"] {
            #expect(names.contains(name), "\(name) did not run")
        }
        #expect(report.books.refused > 0 && report.books.debits > 0 && report.books.captures > 0)
        // The SDK's apps asked for more reads than reached the server.
        #expect(report.sdk.logicalReads > report.sdk.serverReads)
        #expect(report.markdown().contains("**Books balanced**"))
        #expect(report.svgChart().hasPrefix("<svg"))
    }

    @Test func booksBalanceWhenTheServerIsKilledMidRun() async throws {
        let report = try await Self.run(users: 150, sdkUsers: 10, rate: 200, seconds: 5, crashAt: .seconds(2))
        #expect(report.passed, "\(report.books.violations)")
        #expect(report.faults.count == 1)
        // The crash was felt: requests failed at the transport and were retried with their keys.
        #expect(report.total.retries > 0)
    }

    @Test(.enabled(if: Self.postgresURL != nil))
    func twoServersOnPostgreSQLBalanceThroughACrash() async throws {
        let report = try await Self.run(users: 200, sdkUsers: 10, rate: 250, seconds: 5, servers: 2, crashAt: .seconds(2))
        #expect(report.passed, "\(report.books.violations)")
        #expect(report.servers.count == 2)
    }

    static var postgresURL: String? {
        ProcessInfo.processInfo.environment["TALLY_TEST_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static func run(
        users: Int, sdkUsers: Int, rate: Double, seconds: Int, servers: Int = 1, crashAt: Duration? = nil
    ) async throws -> LoadReport {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-load-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerFleet.Settings(binary: binary, directory: directory)
        settings.count = servers
        settings.backlog = 1_024
        let database = servers > 1 ? try ScratchPostgres(baseURL: postgresURL ?? "") : nil
        defer { database?.drop() }
        settings.databaseURL = database?.url
        let fleet = try await ServerFleet(settings)
        defer { fleet.stop() }
        var options = LoadOptions(servers: fleet.urls, adminServers: fleet.adminURLs, adminKey: fleet.adminKey)
        options.users = users
        options.sdkUsers = sdkUsers
        options.mode = .open(perSecond: rate)
        options.duration = .seconds(seconds)
        options.setupConcurrency = 32
        options.settleDeadline = .seconds(60)
        var run = LoadRun(options: options)
        run.sampled = { fleet.processes }
        if let crashAt {
            run.faults = [ScheduledFault(at: crashAt, name: "server 1 killed") { try await fleet.crash(0, downFor: .milliseconds(500)) }]
        }
        return try await run.run()
    }

    /// The built `tally` binary: `TALLY_BIN` (set by scripts/test), else the debug build next to the sources.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["TALLY_BIN"], !path.isEmpty { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/tally").path
    }
}

/// A database of its own on the provisioned PostgreSQL, made and dropped with `psql`, so the load
/// servers' housekeeping (which sweeps every account) cannot touch other tests' data.
struct ScratchPostgres {
    let baseURL: String
    let url: String
    let name = "tally_load_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")

    init(baseURL: String) throws {
        self.baseURL = baseURL
        guard var components = URLComponents(string: baseURL) else { throw LoadTestError("bad database URL") }
        components.path = "/" + name
        url = components.string ?? baseURL
        try Self.psql(baseURL, "CREATE DATABASE \(name)")
    }

    func drop() { try? Self.psql(baseURL, "DROP DATABASE \(name) WITH (FORCE)") }

    static func psql(_ url: String, _ sql: String) throws {
        let process = Process()
        let candidates = ["/usr/lib/postgresql/15/bin/psql", "/usr/bin/psql"]
        process.executableURL = URL(fileURLWithPath: candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "psql")
        process.arguments = [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw LoadTestError("psql failed: \(sql)") }
    }
}

struct LoadTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
