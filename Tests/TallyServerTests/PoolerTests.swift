import Foundation
import TallyAPI
import TallyTestSupport
import Testing

/// Tally behind a transaction pooler, as managed PostgreSQL runs it: two `tally serve` processes whose
/// `DATABASE_URL` goes through the PgBouncer `scripts/with-pgbouncer` starts (1.18, `pool_mode=transaction`,
/// default settings: it refuses start-up parameters it does not know), with `TALLY_POSTGRES_STATEMENTS=unnamed`
/// and the event listener and migrations on PostgreSQL itself (`TALLY_LISTEN_DATABASE_URL`).
@Suite("Through a transaction pooler (PgBouncer)")
struct PoolerTests {
    @Test("Two processes through PgBouncer in transaction mode: tokens, grants, actions, documents, events, sign-out across them")
    func twoProcessesThroughPgBouncer() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { direct in
            let environment = [
                "TALLY_POSTGRES_STATEMENTS": "unnamed", "TALLY_LISTEN_DATABASE_URL": direct, "TALLY_POSTGRES_POOL": "4",
            ]
            let config = SyncProtocolTests.processCatalogYAML + SyncFixture.yaml
            try await ServerPair.with(url: try throughPgBouncer(direct), config: config, extraEnvironment: environment) { pair in
                try await acrossProcesses(pair)
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

    private func acrossProcesses(_ pair: ServerPair) async throws {
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
        _ = try await SyncEventsTests.walletEvent(stream) { $0.wallet.balance == 7 }
        try await a.grant(5, to: phone)
        _ = try await SyncEventsTests.walletEvent(stream) { $0.wallet.balance == 12 }
        // The same key replayed on B: the same answer, charged once.
        #expect(try await b.send(.post, "/v1/actions/ai.query", token: tablet.accessToken, headers: [.idempotencyKey: "q1"]).status == .ok)
        #expect(try await b.wallet(phone).balance == 12)
        // A document written on A, read on B and announced on B's stream.
        #expect(try await a.putDocument(tablet, "habit_logs", "d1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
        let cursor = try await b.pull(phone).decode(SyncPullResponse.self).cursor
        #expect(try await SyncEventsTests.changedCursor(stream, skippingWallet: true) == cursor)
        try await b.expectBooksBalance(phone)

        // Signed out on A: refused on B within a second, and B's stream ends.
        #expect(try await a.send(.post, "/v1/auth/sign-out", token: phone.accessToken).status == .noContent)
        let signedOut = ContinuousClock.now
        var status = try await b.send(.get, "/v1/wallet", token: phone.accessToken).status
        while status == .ok, ContinuousClock.now - signedOut < .seconds(1) {
            try await Task.sleep(for: .milliseconds(20))
            status = try await b.send(.get, "/v1/wallet", token: phone.accessToken).status
        }
        #expect(status == .unauthorized, "the token still worked on B a second after the sign-out on A")
        #expect(try await stream.nextEvent() == .end, "\(pair.processes[1].log)")

        // Nothing met a lost prepared statement or a refused start-up parameter on the way.
        for process in pair.processes {
            #expect(!process.log.contains("prepared statement"), "\(process.log)")
            #expect(!process.log.contains("waiting for the database"), "\(process.log)")
        }
    }
}
