import Foundation
import TallyAPI
import TallyTestSupport
import Testing

/// Tally behind a transaction pooler, as managed PostgreSQL runs it: two `tally serve` processes whose
/// `DATABASE_URL` goes through the PgBouncer `scripts/with-pgbouncer` starts (1.18, `pool_mode=transaction`,
/// default settings: it refuses start-up parameters it does not know), with `TALLY_POSTGRES_STATEMENTS=unnamed`
/// and the event listener and migrations on PostgreSQL itself (`TALLY_LISTEN_DATABASE_URL`) — and without it, where
/// the listener's self-check reports that it hears nothing and the processes poll instead.
@Suite("Through a transaction pooler (PgBouncer)", .timeLimit(.minutes(10)))
struct PoolerTests {
    /// What the self-check logs when its probe is not heard (`PostgresNotifications`).
    static let deafListener = "the event listener did not hear its own notification"

    @Test("Two processes through PgBouncer in transaction mode: tokens, grants, actions, documents, events, sign-out across them")
    func twoProcessesThroughPgBouncer() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { direct in
            let environment = [
                "TALLY_POSTGRES_STATEMENTS": "unnamed", "TALLY_LISTEN_DATABASE_URL": direct, "TALLY_POSTGRES_POOL": "4",
            ]
            let config = SyncProtocolTests.processCatalogYAML + SyncFixture.yaml
            try await ServerPair.with(url: try throughPgBouncer(direct), config: config, extraEnvironment: environment) { pair in
                try await acrossProcesses(pair, within: .seconds(1))
                // Each process heard its probe: nothing was reported.
                for process in pair.processes { #expect(!process.log.contains(Self.deafListener), "\(process.log)") }
            }
        }
    }

    @Test("Without TALLY_LISTEN_DATABASE_URL, LISTEN goes through the pooler: the self-check says so, and events and sign-outs are polled (every second)")
    func listenerThroughPgBouncerFallsBackToPolling() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { direct in
            let environment = ["TALLY_POSTGRES_STATEMENTS": "unnamed", "TALLY_POSTGRES_POOL": "4"]
            let config = SyncProtocolTests.processCatalogYAML + SyncFixture.yaml
            try await ServerPair.with(url: try throughPgBouncer(direct), config: config, extraEnvironment: environment) { pair in
                // The probe sent at start is not heard within 2 s: one error each, naming the cause and the setting.
                let started = ContinuousClock.now
                while pair.processes.contains(where: { !$0.log.contains(Self.deafListener) }), ContinuousClock.now - started < .seconds(20) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                for process in pair.processes {
                    let lines = process.log.split(separator: "\n").filter { $0.contains(Self.deafListener) }
                    #expect(lines.count == 1, "\(process.log)")
                    #expect(lines.allSatisfy { $0.contains("transaction pooler") && $0.contains("TALLY_LISTEN_DATABASE_URL") }, "\(lines)")
                }
                // One poll interval (1 s) plus the poll's read and the stream's own, and the scheduling of the whole
                // suite on two cores: a sign-out once reached B 2.8 s after it was answered under it (CI, 11-29).
                try await acrossProcesses(pair, within: .seconds(5))
            }
        }
    }

    @Test("tally serve --check-config shows TALLY_POSTGRES_STATEMENTS and TALLY_LISTEN_DATABASE_URL (no password) and refuses a bad value")
    func checkConfig() async throws {
        try await ConfigurationFileTests.withDirectory { directory in
            let base = [
                "DATABASE_URL": "postgres://tally:pooled-password-never-shown@127.0.0.1:9/tally", "TALLY_ADMIN_KEY": "admin-key-never-shown-0123",
            ]
            let good = base.merging([
                "TALLY_POSTGRES_STATEMENTS": "unnamed", "TALLY_LISTEN_DATABASE_URL": "postgres://tally:direct-password-never-shown@127.0.0.1:10/tally",
            ]) { $1 }
            let (termination, output, errors) = try await ConfigurationFileTests.checkConfig(environment: good, directory: directory)
            #expect(termination == .exited(0), "\(errors)")
            // A setting's line: its name, padded, then its value.
            let setting = { (output: String, name: String) in
                output.split(separator: "\n").first { $0.contains(name) }.map { $0.replacingOccurrences(of: " +", with: " ", options: .regularExpression) }
            }
            #expect(setting(output, "(TALLY_POSTGRES_STATEMENTS)") == "# postgresStatements (TALLY_POSTGRES_STATEMENTS) unnamed", "\(output)")
            #expect(
                setting(output, "(TALLY_LISTEN_DATABASE_URL)") == "# listenDatabaseURL (TALLY_LISTEN_DATABASE_URL) postgres://tally:***@127.0.0.1:10/tally",
                "\(output)")
            #expect(!(output + errors).contains("password-never-shown"))
            let (defaults, defaultOutput, _) = try await ConfigurationFileTests.checkConfig(environment: base, directory: directory)
            #expect(defaults == .exited(0))
            #expect(setting(defaultOutput, "(TALLY_POSTGRES_STATEMENTS)") == "# postgresStatements (TALLY_POSTGRES_STATEMENTS) prepared")
            #expect(setting(defaultOutput, "(TALLY_LISTEN_DATABASE_URL)") == "# listenDatabaseURL (TALLY_LISTEN_DATABASE_URL) unset: DATABASE_URL")

            let bad = base.merging(["TALLY_POSTGRES_STATEMENTS": "named", "TALLY_LISTEN_DATABASE_URL": "mysql://x@y/z"]) { $1 }
            let (refused, _, refusals) = try await ConfigurationFileTests.checkConfig(environment: bad, directory: directory)
            #expect(refused == .exited(1))
            #expect(refusals.contains("TALLY_POSTGRES_STATEMENTS must be prepared or unnamed"), "\(refusals)")
            #expect(refusals.contains("TALLY_LISTEN_DATABASE_URL: invalid database URL"), "\(refusals)")
        }
    }

    /// Everything across the two processes; each event on B's stream and the sign-out's refusal on B come
    /// `bound` at most after the write on A was answered.
    private func acrossProcesses(_ pair: ServerPair, within bound: Duration) async throws {
        let a = pair.connection(0), b = pair.connection(1)
        defer { Task { await a.close(); await b.close() } }
        let logs = { pair.processes.map(\.log).joined(separator: "\n") }

        // Signed in on A, the token works on B; a grant on A is B's to read.
        let device = "device-" + UUID().uuidString
        let phone = try await a.newGuest(deviceId: device), tablet = try await a.newGuest(deviceId: device)
        try await a.grant(10, to: phone)
        #expect(try await b.wallet(phone).balance == 10, "\(logs())")

        // An event stream on B hears what happens on A.
        let (stream, head) = try await EventStreamClient.open(port: pair.ports[1].api, token: phone.accessToken)
        defer { Task { await stream.close() } }
        #expect(head.status == 200)
        #expect(try await SyncEventsTests.walletEvent(stream).wallet.balance == 10)
        // A metered action on A (3 tokens), then another grant.
        #expect(try await a.send(.post, "/v1/actions/ai.query", token: tablet.accessToken, headers: [.idempotencyKey: "q1"]).status == .ok)
        var written = ContinuousClock.now
        _ = try await SyncEventsTests.walletEvent(stream) { $0.wallet.balance == 7 }
        #expect(ContinuousClock.now - written < bound, "the action's event reached B's stream after \(ContinuousClock.now - written)")
        try await a.grant(5, to: phone)
        written = ContinuousClock.now
        _ = try await SyncEventsTests.walletEvent(stream) { $0.wallet.balance == 12 }
        #expect(ContinuousClock.now - written < bound, "the grant's event reached B's stream after \(ContinuousClock.now - written)")
        // The same key replayed on B: the same answer, charged once.
        #expect(try await b.send(.post, "/v1/actions/ai.query", token: tablet.accessToken, headers: [.idempotencyKey: "q1"]).status == .ok)
        #expect(try await b.wallet(phone).balance == 12)
        // A document written on A, read on B and announced on B's stream.
        #expect(try await a.putDocument(tablet, "habit_logs", "d1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
        written = ContinuousClock.now
        let cursor = try await b.pull(phone).decode(SyncPullResponse.self).cursor
        #expect(try await SyncEventsTests.changedCursor(stream, skippingWallet: true) == cursor)
        #expect(ContinuousClock.now - written < bound, "the write's event reached B's stream after \(ContinuousClock.now - written)")
        try await b.expectBooksBalance(phone)

        // Signed out on A: refused on B within the bound, and B's stream ends.
        #expect(try await a.send(.post, "/v1/auth/sign-out", token: phone.accessToken).status == .noContent)
        let signedOut = ContinuousClock.now
        var status = try await b.send(.get, "/v1/wallet", token: phone.accessToken).status
        while status == .ok, ContinuousClock.now - signedOut < bound {
            try await Task.sleep(for: .milliseconds(20))
            status = try await b.send(.get, "/v1/wallet", token: phone.accessToken).status
        }
        #expect(status == .unauthorized, "the token still worked on B \(bound) after the sign-out on A")
        var item = try await stream.nextEvent()
        while case .event(name: "wallet", _, _) = item { item = try await stream.nextEvent() }  // a poll's, read before the end
        #expect(item == .end, "\(pair.processes[1].log)")
        #expect(ContinuousClock.now - signedOut < bound, "B's stream ended \(ContinuousClock.now - signedOut) after the sign-out")

        // Nothing met a lost prepared statement or a refused start-up parameter on the way.
        for process in pair.processes {
            #expect(!process.log.contains("prepared statement"), "\(process.log)")
            #expect(!process.log.contains("waiting for the database"), "\(process.log)")
        }
    }
}
