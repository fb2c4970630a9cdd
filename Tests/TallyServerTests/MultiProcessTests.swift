import Foundation
import TallyAPI
import TallyLoad
import Testing

/// Two `tally serve` processes on one PostgreSQL: tokens, idempotency keys and the ledger are shared,
/// and every invariant holds under debits racing across both.
@Suite("Several server processes, one PostgreSQL", .timeLimit(.minutes(10)))
struct MultiProcessTests {
    @Test("Two processes started at once migrate safely and keep every invariant under concurrent debits")
    func twoProcesses() async throws {
        // A database of its own: other tests' servers sweep and purge by clocks set years ahead.
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in try await twoProcesses(url: url) }
    }

    private func twoProcesses(url: String) async throws {
        let config = #"{"guestSignupsPerIPPerHour": 100000, "quotas": [], "actions": [{"name": "debit1", "tokens": 1}]}"#
        try await ServerPair.with(url: url, config: config) { pair in try await twoProcesses(pair) }
    }

    private func twoProcesses(_ pair: ServerPair) async throws {
        let (ports, adminKey) = (pair.ports, pair.adminKey)
        let setup = APIConnection(port: ports[0].api, adminPort: ports[0].admin, adminKey: adminKey)
        let user = try await setup.newGuest(granted: 100)
        let statuses = try await withThrowingTaskGroup(of: UInt16.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let api = APIConnection(port: ports[index % 2].api, adminPort: ports[index % 2].admin, adminKey: adminKey)
                    let status = try await api.send(
                        .post, "/v1/actions/debit1", token: user.accessToken, headers: [.idempotencyKey: "mp-\(index)"]
                    ).status.code
                    await api.close()
                    return UInt16(status)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 200 }.count == 100)
        #expect(statuses.filter { $0 == 402 }.count == 100)

        // One key retried on both processes at once: one charge.
        try await setup.grant(10, to: user)
        let retries = try await withThrowingTaskGroup(of: APIResponse.self) { group in
            for index in 0..<20 {
                group.addTask {
                    let api = APIConnection(port: ports[index % 2].api, adminPort: ports[index % 2].admin, adminKey: adminKey)
                    let response = try await api.send(.post, "/v1/actions/debit1", token: user.accessToken, headers: [.idempotencyKey: "mp-retry"])
                    await api.close()
                    return response
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(retries.allSatisfy { $0.status == .ok || $0.status == .conflict })
        #expect(Set(retries.filter { $0.status == .ok }.map(\.body)).count == 1)
        let other = APIConnection(port: ports[1].api, adminPort: ports[1].admin, adminKey: adminKey)
        #expect(try await other.wallet(user).balance == 9)
        try await other.expectBooksBalance(user)
        await other.close()
        await setup.close()
        // SIGTERM: graceful shutdown, exit status 0.
        #expect(pair.stop() == [.exited(0), .exited(0)])
    }
}

/// A sign-out on one process reaches the other through the LISTEN/NOTIFY notification that ends its event
/// streams: the same notification drops the session from the other process's caches, so the token is refused
/// there as soon as the notification is handled (before, it was accepted for 1.1–1.9 s, until the session
/// cache's trust ran out and the revocation poller caught up).
@Suite("Sign-out across server processes", .timeLimit(.minutes(10)))
struct SignOutAcrossProcessesTests {
    @Test("A token signed out on one process is refused by the other once that one has heard the notification")
    func signedOutTokenRefusedOnTheOtherProcess() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            try await ServerPair.with(url: url, config: SyncProtocolTests.processCatalogYAML + SyncFixture.yaml) { pair in
                let (a, b) = (pair.connection(0), pair.connection(1))
                defer { Task { await a.close(); await b.close() } }
                let user = try await a.newGuest()
                let push = [SyncMutation(id: 1, op: .put, collection: "habit_logs", docId: "a", data: jsonValue(#"{"date":"2027-01-15"}"#))]
                // B trusts the token: its stream is open (the observer of B's notifications) and it just answered with it.
                let (stream, head) = try await EventStreamClient.open(port: pair.ports[1].api, token: user.accessToken)
                defer { Task { await stream.close() } }
                #expect(head.status == 200)
                guard case .event(name: "wallet", _, _) = try await stream.nextEvent() else { throw HarnessError("no first wallet event") }
                #expect(try await b.push(user, clientId: "sign-out-probe-0001", push).status == .ok)
                #expect(try await b.send(.get, "/v1/wallet", token: user.accessToken).status == .ok)

                let signedOut = ContinuousClock.now
                #expect(try await a.send(.post, "/v1/auth/sign-out", token: user.accessToken).status == .noContent)
                // B ends the session's stream when it handles the notification, after dropping the session from its caches.
                // (The push's `changed` event may come first.)
                var item = try await stream.nextEvent()
                while case .event = item { item = try await stream.nextEvent() }
                #expect(item == .end, "B never heard of the sign-out")
                let heard = ContinuousClock.now - signedOut
                let pushed = try await b.push(user, clientId: "sign-out-probe-0001", push)
                let read = try await b.send(.get, "/v1/wallet", token: user.accessToken)
                let refused = ContinuousClock.now - signedOut
                #expect(pushed.status == .unauthorized, "a push with the signed-out token was accepted \(refused) after the sign-out")
                #expect(read.status == .unauthorized, "a read with the signed-out token was accepted \(refused) after the sign-out")
                print("sign-out on A: B heard it after \(heard), refused the token \(refused) after the sign-out")
            }
        }
    }
}

/// The sign-in lockout counts in the database: an attacker spreading guesses over several processes gets
/// no more than against one, and a restart forgets nothing.
@Suite("Lockout across server processes", .timeLimit(.minutes(10)))
struct LockoutAcrossProcessesTests {
    @Test("Failures on two processes add up; the lock holds on both and after a restart")
    func lockoutAcrossProcesses() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-lockout-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let adminKey = "lockout-admin-key-0123456789"
            // One signing key for both: processes whose keys disagree refuse to start beside each other.
            let signingKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            let environment = ["DATABASE_URL": url, "TALLY_ADMIN_KEY": adminKey, "TALLY_SIGNING_KEY": signingKey, "LOG_LEVEL": "warning"]
            let first = try ServerProcess(name: "a", directory: directory, environment: environment)
            var second = try ServerProcess(name: "b", directory: directory, environment: environment)
            defer {
                _ = first.stop()
                _ = second.stop()
            }
            let ports = [try await first.ports(), try await second.ports()]
            let apis = ports.map { APIConnection(port: $0.api, adminPort: $0.admin, adminKey: adminKey) }
            let email = "lock\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let guest = try await apis[0].newGuest()
            #expect(try await apis[0].send(.post, "/v1/auth/link", token: guest.accessToken, json: CredentialsRequest(email: email, password: "correct horse")).status == .ok)
            let guess = CredentialsRequest(email: email, password: "wrong guess")
            for index in 0..<5 {
                #expect(try await apis[index % 2].send(.post, "/v1/auth/sign-in", json: guess).status == .unauthorized)
            }
            for api in apis {
                let locked = try await api.send(.post, "/v1/auth/sign-in", json: guess)
                #expect(locked.status == .tooManyRequests && locked.errorCode == "rate_limited", "\(locked.status) \(locked.text)")
            }
            #expect(second.stop() == .exited(0))
            second = try ServerProcess(name: "b2", directory: directory, environment: environment)
            let restartedPorts = try await second.ports()
            let restarted = APIConnection(port: restartedPorts.api, adminPort: restartedPorts.admin, adminKey: adminKey)
            #expect(try await restarted.send(.post, "/v1/auth/sign-in", json: guess).status == .tooManyRequests)
            for api in apis + [restarted] { await api.close() }
        }
    }
}

/// A `tally serve` child process on free ports.
final class ServerProcess: Sendable {
    let process: ChildProcess
    let output: URL

    /// Starts `tally serve` with `arguments` added; with `openFileLimit`, through `/bin/sh`, which lowers
    /// the limit (soft and hard, so the server cannot raise it back) before running the server. It runs on SQLite
    /// in its directory unless `environment` gives a `DATABASE_URL` (the test run's own is not inherited: on the
    /// shared test database its keys would meet other tests' processes, which key agreement refuses).
    init(
        name: String, directory: URL, environment: [String: String], arguments: [String] = [], openFileLimit: Int? = nil
    ) throws {
        output = directory.appendingPathComponent("\(name).log")
        let serve = ["serve", "--port", "0", "--admin-port", "0", "--data-dir", directory.appendingPathComponent(name).path] + arguments
        let (executable, command) =
            if let openFileLimit {
                ("/bin/sh", ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", TallyBinary.path] + serve)
            } else {
                (TallyBinary.path, serve)
            }
        process = try ChildProcess(
            executable, arguments: command, environment: ProcessInfo.processInfo.environment.filter { $0.key != "DATABASE_URL" }.merging(environment) { $1 },
            standardOutput: .file(output), standardError: .file(output))
    }

    /// Waits (up to 60 s) for the process to print the ports its two listeners listen on.
    func ports() async throws -> (api: Int, admin: Int) {
        for _ in 0..<600 {
            let log = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            if let api = Self.port(after: "tally listening on http://", in: log),
                let admin = Self.port(after: "tally admin listening on http://", in: log)
            {
                return (api, admin)
            }
            guard process.isRunning else { throw ProcessError(log: log) }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ProcessError(log: "no port after 60 s")
    }

    /// The port of the `host:port` that follows `prefix` at the start of a line of `log`.
    static func port(after prefix: String, in log: String) -> Int? {
        guard let line = log.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return line.dropFirst(prefix.count).prefix { $0 != " " }.split(separator: ":").last.flatMap { Int($0) }
    }

    /// Everything the process wrote so far.
    var log: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

    /// Sends SIGTERM (unless the process has exited) and waits; how it ended.
    @discardableResult
    func stop() -> ChildProcess.Termination {
        process.terminate()
        return process.waitUntilExit()
    }

    struct ProcessError: Error, CustomStringConvertible {
        let log: String
        var description: String { "tally serve failed:\n\(log)" }
    }
}
