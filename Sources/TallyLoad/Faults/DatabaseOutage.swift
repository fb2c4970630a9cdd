import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TallyAPI

/// A PostgreSQL outage in the middle of a load run: the database is stopped with a control command (e.g.
/// `pg_ctl stop -m fast`), kept down for a while, and started again, while probes measure what every server
/// answers meanwhile and how soon each serves writes again. The simulated users keep running throughout,
/// retrying their writes with the same Idempotency-Key, so the books check afterwards proves that every
/// acknowledged write is there once and nothing is half-applied.
public final class DatabaseOutage: Sendable {
    /// When and how long, and the command that stops and starts the database.
    public struct Settings: Sendable {
        /// From the start of the measured phase.
        public var at: Duration
        /// How long the database stays down.
        public var length: Duration
        /// An executable taking `stop` or `start` (scripts/with-postgres exports one as `TALLY_PG_CONTROL`).
        public var control: String
        /// The longest a request may take to be refused while the database is down.
        public var answerWithin: Duration = .seconds(1)
        /// The longest a server may take to serve writes again once the database is back.
        public var recoverWithin: Duration = .seconds(5)

        /// An outage of `length` at `at`, driven by `control`.
        public init(at: Duration, length: Duration, control: String) {
            self.at = at
            self.length = length
            self.control = control
        }
    }

    /// One server's probe: a guest of its own with tokens, on a connection of its own.
    private struct Probe: Sendable {
        let server: URL
        let token: String
        let action: String
    }

    private let settings: Settings
    private let servers: [URL]
    private let adminServers: [URL]
    private let adminKey: String
    private let probes = Mutex<[Probe]>([])
    private let measured = Mutex(OutageResult())

    /// An outage for `servers` (and their admin listeners), set up by ``prepare()``.
    public init(_ settings: Settings, servers: [URL], adminServers: [URL], adminKey: String) {
        self.settings = settings
        self.servers = servers
        self.adminServers = adminServers
        self.adminKey = adminKey
    }

    /// What was measured (complete once ``perform()`` returned).
    public var result: OutageResult { measured.withLock { $0 } }

    /// The fault to schedule in the load run.
    public var fault: ScheduledFault {
        ScheduledFault(at: settings.at, name: "PostgreSQL stopped for \(settings.length) at \(settings.at)") { try await self.perform() }
    }

    /// Signs in one probe guest per server and grants it tokens (the database is up).
    public func prepare() async throws {
        var made: [Probe] = []
        for (server, admin) in zip(servers, adminServers) {
            guard let list = await Self.json(ActionList.self, .GET, "/v1/actions", on: server),
                let action = list.items.first(where: { $0.quota == nil && $0.tokens != nil })?.name,
                let session = await Self.json(
                    SessionTokens.self, .POST, "/v1/auth/guest", on: server,
                    body: GuestSignInRequest(deviceId: "outage-probe-" + UUID().uuidString))
            else { throw LoadError("the outage probe cannot sign in at \(server)") }
            let grant = await Self.send(
                .POST, "/admin/v1/users/\(session.userId)/grants", on: admin, bearer: adminKey,
                body: GrantRequest(amount: 1_000_000, reason: "outage probe"))
            guard grant?.status == 201 else { throw LoadError("the outage probe cannot grant tokens at \(admin)") }
            made.append(Probe(server: server, token: session.accessToken, action: action))
        }
        probes.withLock { $0 = made }
    }

    /// Stops the database, probes every server until `length` has passed, starts the database again and
    /// waits for every server to serve a write.
    public func perform() async throws {
        let probes = self.probes.withLock { $0 }
        try await control("stop")
        let clock = ContinuousClock()
        let down = clock.now
        var round = 0
        while clock.now - down < settings.length {
            round += 1
            let key = "outage-\(round)"
            let answers = await withTaskGroup(of: ProbeAnswer.self) { group in
                for probe in probes {
                    group.addTask { await Self.probeWrite(probe, key: key) }
                    group.addTask { await Self.probeReady(probe) }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            measured.withLock { result in for answer in answers { result.record(duringOutage: answer) } }
            try? await Task.sleep(for: .milliseconds(100))
        }
        try await control("start")
        let back = clock.now
        measured.withLock { $0.downSeconds = ProcessSampler.seconds(back - down) }
        let recoveries = await withTaskGroup(of: Double?.self) { group in
            for probe in probes {
                group.addTask {
                    var attempt = 0
                    while clock.now - back < .seconds(60) {
                        attempt += 1
                        if await Self.probeWrite(probe, key: "recovery-\(attempt)").status == 200 {
                            return ProcessSampler.seconds(clock.now - back)
                        }
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                    return nil
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        measured.withLock { $0.recoverySeconds = recoveries.map { $0 ?? .infinity } }
        measured.withLock { $0.answerWithinSeconds = ProcessSampler.seconds(settings.answerWithin) }
        measured.withLock { $0.recoverWithinSeconds = ProcessSampler.seconds(settings.recoverWithin) }
    }

    /// Runs the control command with `verb` (`stop` or `start`) and waits for it; its output goes to this
    /// process's.
    ///
    /// A `ChildProcess`, which waits for the command's own exit: Foundation's `Process.waitUntilExit` never
    /// returned here once `pg_ctl start` had left the server running in the background (seen on Linux).
    public func control(_ verb: String) async throws {
        let command = try ChildProcess(
            settings.control, arguments: [verb], environment: ProcessInfo.processInfo.environment, standardOutput: .inherit,
            standardError: .inherit)
        let termination = await command.wait()
        guard termination == .exited(0) else { throw LoadError("\(settings.control) \(verb) ended with \(termination)") }
    }

    // MARK: Probing

    private static func probeWrite(_ probe: Probe, key: String) async -> ProbeAnswer {
        await ProbeAnswer.timing("write") {
            await send(.POST, "/v1/actions/\(probe.action)", on: probe.server, bearer: probe.token, headers: [(TallyHeader.idempotencyKey, key)])
        }
    }

    private static func probeReady(_ probe: Probe) async -> ProbeAnswer {
        await ProbeAnswer.timing("ready") { await send(.GET, "/ready", on: probe.server) }
    }

    /// One request on a connection of its own, with a 10 s limit; nil when no answer came.
    private static func send(
        _ method: HTTPMethod, _ path: String, on server: URL, bearer: String? = nil, headers: [(String, String)] = [],
        body: (some Encodable)? = String?.none
    ) async -> LoadResponse? {
        guard let (host, port) = try? LoadRun.address(server) else { return nil }
        let connection = LoadConnection(host: host, port: port, group: MultiThreadedEventLoopGroup.singleton)
        var headers = headers
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        let request = LoadRequest(method, path, headers: headers, body: body.map { APICaller.json($0) })
        let response = try? await connection.send(request, timeout: .seconds(10))
        await connection.close()
        return response
    }

    private static func json<T: Decodable>(
        _ type: T.Type, _ method: HTTPMethod, _ path: String, on server: URL, body: (some Encodable)? = String?.none
    ) async -> T? {
        guard let response = await send(method, path, on: server, body: body), (200..<300).contains(response.status) else { return nil }
        return APICaller.decode(type, response)
    }
}

/// One probe request's answer.
struct ProbeAnswer: Sendable {
    let kind: String
    let status: Int?
    let retryAfter: Bool
    let seconds: Double

    static func timing(_ kind: String, _ send: () async -> LoadResponse?) async -> ProbeAnswer {
        let start = ContinuousClock.now
        let response = await send()
        return ProbeAnswer(
            kind: kind, status: response?.status, retryAfter: response?.headers.first(name: "Retry-After").flatMap(Int.init).map { $0 >= 1 } ?? false,
            seconds: ProcessSampler.seconds(.now - start))
    }
}

/// What the servers did through a database outage, and whether that is what Tally promises: every request
/// refused fast with `503` and `Retry-After`, `/ready` saying not ready, and writes served again soon after
/// the database returns.
public struct OutageResult: Sendable, Codable, Hashable {
    /// How long the database was down.
    public var downSeconds = 0.0
    /// Probe writes and `/ready` calls answered while it was down, by status (`none`: no answer).
    public var writes: [String: Int] = [:], ready: [String: Int] = [:]
    /// Refused writes without a `Retry-After` of at least one second (`/ready` needs none).
    public var withoutRetryAfter = 0
    /// The slowest probe answer while it was down, seconds.
    public var slowestSeconds = 0.0
    /// Per server, seconds from the database's return to the first write served (infinity: never, within 60 s).
    public var recoverySeconds: [Double] = []
    /// Per server, seconds from SIGTERM to exit (filled by whoever stops the servers).
    public var shutdownSeconds: [Double] = []
    /// The limits the result is judged by.
    public var answerWithinSeconds = 1.0, recoverWithinSeconds = 5.0, shutdownWithinSeconds = 17.0

    /// Whether every promise held.
    public var passed: Bool { failures.isEmpty }

    /// The promises that did not hold, in words.
    public var failures: [String] {
        var failures: [String] = []
        let writeCount = writes.values.reduce(0, +)
        if writeCount == 0 { failures.append("no request was made while the database was down") }
        if writes.keys.contains(where: { $0 != "503" }) { failures.append("writes during the outage answered \(writes), not only 503") }
        if ready.keys.contains(where: { $0 != "503" }) { failures.append("/ready during the outage answered \(ready), not only 503") }
        if withoutRetryAfter > 0 { failures.append("\(withoutRetryAfter) 503s without Retry-After") }
        if slowestSeconds > answerWithinSeconds { failures.append("slowest answer during the outage \(slowestSeconds) s > \(answerWithinSeconds) s") }
        if recoverySeconds.isEmpty || recoverySeconds.contains(where: { $0 > recoverWithinSeconds }) {
            failures.append("recovery \(recoverySeconds) s, limit \(recoverWithinSeconds) s")
        }
        if shutdownSeconds.contains(where: { $0 > shutdownWithinSeconds }) {
            failures.append("SIGTERM took \(shutdownSeconds) s, limit \(shutdownWithinSeconds) s")
        }
        return failures
    }

    mutating func record(duringOutage answer: ProbeAnswer) {
        let label = answer.status.map(String.init) ?? "none"
        if answer.kind == "ready" { ready[label, default: 0] += 1 } else { writes[label, default: 0] += 1 }
        if answer.kind == "write", answer.status == 503, !answer.retryAfter { withoutRetryAfter += 1 }
        slowestSeconds = max(slowestSeconds, answer.seconds)
    }
}
