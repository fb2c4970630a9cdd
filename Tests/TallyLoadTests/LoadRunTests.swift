import Foundation
import TallyLoad
import TallyTestSupport
import Testing

/// Small versions of the load scenario against real `tally serve` processes: the books must balance,
/// also when a server is killed with SIGKILL mid-run and restarted.
@Suite(.serialized, .timeLimit(.minutes(10))) struct LoadRunTests {
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

    @Test func twoServersOnPostgreSQLBalanceThroughACrash() async throws {
        // A database of its own: the load servers' housekeeping sweeps every account, so no other test's data is near.
        let report = try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            try await Self.run(users: 200, sdkUsers: 10, rate: 250, seconds: 5, servers: 2, databaseURL: url, crashAt: .seconds(2))
        }
        #expect(report.passed, "\(report.books.violations)")
        #expect(report.servers.count == 2)
    }

    /// Users that sync documents (pushes with abandoned and repeated batches, pulls, an event stream each) end with
    /// every acknowledged mutation on the server exactly once, on both stores — through a server crash on PostgreSQL.
    @Test(arguments: StoreKind.allCases)
    func syncUsersBalance(kind: StoreKind) async throws {
        let report: LoadReport
        switch kind {
        case .sqlite:
            report = try await Self.run(users: 150, sdkUsers: 10, syncUsers: 40, rate: 250, seconds: 5)
        case .postgres:
            report = try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
                try await Self.run(users: 150, sdkUsers: 10, syncUsers: 40, rate: 250, seconds: 5, servers: 2, databaseURL: url, crashAt: .seconds(2))
            }
        }
        #expect(report.passed, "\(report.books.violations) \(report.books.sync.violations)")
        let sync = report.books.sync
        #expect(sync.users == 40 && sync.unreadable == 0 && sync.unsettled == 0)
        #expect(sync.mutations > 100 && sync.pushes > 30 && sync.duplicates > 0, "\(sync)")
        #expect(sync.changedEvents > 0)
        let names = Set(report.operations.map(\.name))
        for name in ["sync.push", "sync.pull"] { #expect(names.contains(name), "\(name) did not run") }
        #expect(report.markdown().contains("exactly once, the documents the replay of them: yes"))
    }

    /// A load run against `servers` fresh `tally serve` processes, on SQLite, or on `databaseURL` (PostgreSQL).
    static func run(
        users: Int, sdkUsers: Int, syncUsers: Int = 0, rate: Double, seconds: Int, servers: Int = 1, databaseURL: String? = nil,
        crashAt: Duration? = nil
    ) async throws -> LoadReport {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-load-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerFleet.Settings(binary: TallyBinary.path, directory: directory)
        settings.count = servers
        settings.backlog = 1_024
        settings.databaseURL = databaseURL
        let fleet = try await ServerFleet(settings)
        defer { fleet.stop() }
        var options = LoadOptions(servers: fleet.urls, adminServers: fleet.adminURLs, adminKey: fleet.adminKey)
        options.users = users
        options.sdkUsers = sdkUsers
        options.syncUsers = syncUsers
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
}
