import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TallyAPI
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

// Every file of the target sees `StoreKind`, `postgresURL()`, `ScratchDatabase`, `LedgerInvariants` and the rest.
@_exported import TallyTestSupport

/// A Tally server running for real on loopback ports (public and admin listener), with a manual clock.
struct LiveServer: Sendable {
    let port: Int
    let adminPort: Int
    let clock: ManualClock
    let adminKey: String
    /// What the server's routes share (its store, configuration and clock).
    let services: TallyServices

    /// Runs one housekeeping sweep now, as the server's own service does every interval (on the same
    /// store, clock and retention).
    func sweep() async throws {
        let housekeeping = Housekeeping(
            store: services.store, clock: clock, interval: .seconds(3600), logger: Logger(label: "tally.test"),
            ready: StartupGate(), tombstoneRetention: services.configuration.sync.tombstoneRetention)
        _ = try await housekeeping.sweep()
    }

    /// A new HTTP connection to the server (and, on first use, one to its admin listener).
    func connection() -> APIConnection { APIConnection(port: port, adminPort: adminPort, adminKey: adminKey) }

    /// Starts a server on `kind`, runs `body`, then shuts the server down gracefully. `limits` default to
    /// production's; `logs`, when given, receives every log line of its level and above; `logger` replaces the
    /// quiet default; `configure` changes the test configuration last. On PostgreSQL the server gets a
    /// ``ScratchDatabase``; without a database the case is skipped with a warning at the caller (failed under
    /// TALLY_REQUIRE_POSTGRES=1), see ``postgresURL(sourceLocation:)``.
    static func with<T: Sendable>(
        _ kind: StoreKind, catalog: Catalog = .standard, signupsPerHour: Int = 1000, limits: LimitsConfiguration = LimitsConfiguration(),
        accessTokenTTL: TimeInterval = 30 * 86_400, start: Date = Date(timeIntervalSince1970: 1_800_000_000), clock given: ManualClock? = nil,
        logs: LogCapture? = nil, configure: @Sendable (inout TallyConfiguration) async throws -> Void = { _ in }, logger: Logger? = nil,
        sourceLocation: SourceLocation = #_sourceLocation, _ body: @Sendable (LiveServer) async throws -> T
    ) async throws -> T {
        let clock = given ?? ManualClock(start)  // by default 2027-01-15T08:00:00Z
        var configuration = TallyConfiguration()
        configuration.port = 0
        configuration.adminPort = 0
        configuration.bcryptCost = 4
        configuration.accessTokenTTL = accessTokenTTL
        configuration.housekeepingInterval = .seconds(3600)
        configuration.metering.catalog = catalog
        configuration.metering.guestSignupsPerIPPerHour = signupsPerHour
        configuration.limits = limits
        configuration.adminKey = "test-admin-key-0123456789"
        // Tests run in parallel against one PostgreSQL. Some send a thousand requests at once on two loaded cores, where a
        // lease may wait longer than the server's 5 s default: no finding of theirs (PoolSizingTests sets its own).
        configuration.postgresPoolSize = 8
        configuration.postgresLeaseTimeout = .seconds(30)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-test-\(UUID().uuidString)").path
        configuration.dataDirectory = directory
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard kind == .postgres else {
            try await configure(&configuration)
            return try await run(configuration, clock: clock, logger: logger ?? logs.map(Self.logger(capturing:)), body)
        }
        return try await ScratchDatabase.with(baseURL: try postgresURL(sourceLocation: sourceLocation)) { url in
            configuration.databaseURL = url
            try await configure(&configuration)
            return try await run(configuration, clock: clock, logger: logger ?? logs.map(Self.logger(capturing:)), body)
        }
    }

    /// A logger writing into `capture` at its level.
    static func logger(capturing capture: LogCapture) -> Logger {
        var logger = Logger(label: "tally.test") { _ in capture }
        logger.logLevel = capture.level
        return logger
    }

    /// Runs the configured server until `body` returns, then shuts it down gracefully.
    private static func run<T: Sendable>(
        _ configuration: TallyConfiguration, clock: ManualClock, logger: Logger?, _ body: @Sendable (LiveServer) async throws -> T
    ) async throws -> T {
        let logger = logger ?? {
            var logger = Logger(label: "tally.test")
            logger.logLevel = ProcessInfo.processInfo.environment["TALLY_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
            return logger
        }()
        let (ports, continuation) = AsyncStream.makeStream(of: ListenerPorts.self)
        var built: TallyServices?
        let app = try buildApplication(
            configuration: configuration, clock: clock, logger: logger, onServerRunning: { ports in continuation.yield(ports) },
            configureRouter: { _, services in built = services })
        let services = try #require(built)
        let adminKey = configuration.adminKey!
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let serviceGroup = ServiceGroup(configuration: .init(services: [app], logger: logger))
            group.addTask {
                // A server that fails to start ends the port stream, so the wait below ends with its error.
                defer { continuation.finish() }
                try await serviceGroup.run()
            }
            var iterator = ports.makeAsyncIterator()
            guard let bound = await iterator.next() else {
                try await group.next()
                throw CancellationError()
            }
            do {
                let value = try await body(LiveServer(port: bound.port, adminPort: bound.adminPort, clock: clock, adminKey: adminKey, services: services))
                await serviceGroup.triggerGracefulShutdown()
                return value
            } catch {
                await serviceGroup.triggerGracefulShutdown()
                throw error
            }
        }
    }
}

/// One keep-alive HTTP connection speaking the Tally API, and one to the admin listener opened on first use.
struct APIConnection: Sendable {
    /// Which listener a request goes to.
    enum Listener: Sendable {
        case api, admin
    }

    private let client: KeptAliveClient
    let adminKey: String
    /// The public listener's port (for clients other than `client`, e.g. an event stream).
    let port: Int
    private let adminClient: KeptAliveClient

    init(port: Int, adminPort: Int, adminKey: String) {
        self.port = port
        // A read waits up to 60 s, not the test client's default 15: a thousand concurrent requests from each of two tests
        // on two loaded cores took longer than 15 s for the last answers (AIDailyTests, PostgreSQL). A hang still fails.
        client = KeptAliveClient(port: port)
        adminClient = KeptAliveClient(port: adminPort)
        self.adminKey = adminKey
    }

    func close() async {
        await client.shutdown()
        await adminClient.shutdown()
    }

    /// Sends a request; `json` is encoded with the API's conventions, `raw` is sent as is. `admin` adds the
    /// admin key; `/admin/…` and `/metrics` go to the admin listener unless `listener` picks one explicitly.
    func send(
        _ method: HTTPRequest.Method, _ path: String, token: String? = nil, admin: Bool = false, json: (any Encodable)? = nil,
        raw: String? = nil, headers extra: HTTPFields = [:], on listener: Listener? = nil
    ) async throws -> APIResponse {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        if admin { headers[.authorization] = "Bearer \(adminKey)" }
        var body: ByteBuffer?
        if let json { body = ByteBuffer(bytes: try TallyJSON.encoder().encode(json)) }
        if let raw { body = ByteBuffer(string: raw) }
        if body != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        let adminRoute = admin || path.hasPrefix("/admin/") || path == "/metrics"
        let target = (listener ?? (adminRoute ? .admin : .api)) == .admin ? adminClient : client
        let response = try await target.execute(.init(path, method: method, authority: "127.0.0.1", headers: headers, body: body))
        return APIResponse(status: response.status, headers: response.headers, body: response.body.map { Array($0.readableBytesView) } ?? [])
    }
}

/// A keep-alive connection, opened on first use and opened again when the server had closed it while it was idle (its
/// `idleTimeout`, 75 s, passes between two admin requests of a slow test on loaded cores): the request was never
/// written, so sending it on a new connection is what any HTTP client does. Any other failure is the test's.
final class KeptAliveClient: Sendable {
    private let port: Int
    /// The connection and how many were opened before it.
    private let opened = Mutex<(client: TestClient?, generation: Int)>((nil, 0))

    init(port: Int) { self.port = port }

    /// The connection, opened now if there is none, and its generation.
    private var client: (client: TestClient, generation: Int) {
        opened.withLock { opened in
            if let client = opened.client { return (client, opened.generation) }
            // A read waits up to 60 s, not the test client's default 15: a thousand concurrent requests from each of
            // two tests on two loaded cores took longer than 15 s for the last answers (AIDailyTests, PostgreSQL).
            let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(60)))
            client.connect()
            opened = (client, opened.generation + 1)
            return (client, opened.generation)
        }
    }

    /// Sends `request`; once more on a new connection when this one was closed before it could be written.
    func execute(_ request: TestClient.Request) async throws -> TestClient.Response {
        let current = client
        do {
            return try await current.client.execute(request)
        } catch ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed {
            opened.withLock { if $0.generation == current.generation { $0.client = nil } }
            try? await current.client.shutdown()
            return try await client.client.execute(request)
        }
    }

    func shutdown() async { try? await opened.withLock { $0.client }?.shutdown() }
}

/// A response, with JSON decoding helpers.
struct APIResponse: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: [UInt8]

    func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try TallyJSON.decoder().decode(T.self, from: Data(body))
    }

    /// The error code of an error response.
    var errorCode: String? { try? decode(ErrorResponse.self).error.code.rawValue }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A signed-in test user.
struct TestUser: Sendable {
    let userId: String
    let accessToken: String
    let refreshToken: String
}

extension APIConnection {
    /// Signs in a new guest with a fresh random device secret.
    func newGuest(deviceId: String = "device-" + UUID().uuidString) async throws -> TestUser {
        let response = try await send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: deviceId))
        #expect(response.status == .created || response.status == .ok, "guest sign-in: \(response.status) \(response.text)")
        let tokens = try response.decode(SessionTokens.self)
        return TestUser(userId: tokens.userId, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
    }

    /// Signs in a new guest and grants it `tokens` through the admin API.
    func newGuest(granted tokens: Int64) async throws -> TestUser {
        let user = try await newGuest()
        try await grant(tokens, to: user)
        return user
    }

    /// Grants tokens through the admin API.
    func grant(_ amount: Int64, to user: TestUser) async throws {
        let response = try await send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: amount, reason: "test"))
        #expect(response.status == .created, "grant: \(response.status) \(response.text)")
    }

    func wallet(_ user: TestUser) async throws -> Wallet {
        try await send(.get, "/v1/wallet", token: user.accessToken).decode()
    }

    /// Every ledger entry of the user, following cursors.
    func allEntries(_ user: TestUser) async throws -> [LedgerEntry] {
        var entries: [LedgerEntry] = []
        var cursor: String?
        repeat {
            let path = "/v1/wallet/entries?limit=100" + (cursor.map { "&cursor=\($0)" } ?? "")
            let page: Page<LedgerEntry> = try await send(.get, path, token: user.accessToken).decode()
            entries += page.items
            cursor = page.nextCursor
        } while cursor != nil
        return entries
    }

    /// Checks the books of one user over HTTP with the conformance suite's ledger invariants (``LedgerInvariants``):
    /// entries sum to the balance and held amount, each entry's `balanceAfter` follows, nothing negative, one
    /// version per entry.
    func expectBooksBalance(_ user: TestUser, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let wallet = try await wallet(user)
        let entries = try await allEntries(user)
        expectLedgerInvariants(wallet, entries, "user \(user.userId)", sourceLocation: sourceLocation)
    }
}

/// Runs `body` `count` times at once, each on a connection of its own to `server`.
func concurrently<T: Sendable>(
    _ count: Int, server: LiveServer, _ body: @escaping @Sendable (Int, APIConnection) async throws -> T
) async throws -> [T] {
    try await concurrently(count, connect: { _ in server.connection() }, body)
}

/// Runs `body` `count` times at once, the `index`th on `connect(index)`. The connections are opened first, at
/// most 100 at a time (a thousand connects at once can outlast the test client's 5 s connect timeout on a
/// loaded machine), then every `body` starts together, so the requests, not the connects, are concurrent.
func concurrently<T: Sendable>(
    _ count: Int, connect: @escaping @Sendable (Int) -> APIConnection,
    _ body: @escaping @Sendable (Int, APIConnection) async throws -> T
) async throws -> [T] {
    var connections: [APIConnection] = []
    connections.reserveCapacity(count)
    do {
        for batch in stride(from: 0, to: count, by: 100) {
            let opened = (batch..<min(batch + 100, count)).map(connect)
            connections += opened
            try await withThrowingTaskGroup(of: Void.self) { group in
                for connection in opened {
                    group.addTask {
                        let ready = try await connection.send(.get, "/ready")
                        guard ready.status == .ok else { throw ConnectFailure(status: ready.status.code) }
                    }
                }
                try await group.waitForAll()
            }
        }
        let opened = connections
        let values = try await withThrowingTaskGroup(of: (Int, T).self) { group in
            for (index, connection) in opened.enumerated() {
                group.addTask { (index, try await body(index, connection)) }
            }
            return try await group.reduce(into: [(Int, T)]()) { $0.append($1) }
        }
        for connection in connections { await connection.close() }
        return values.sorted { $0.0 < $1.0 }.map(\.1)
    } catch {
        for connection in connections { await connection.close() }
        throw error
    }
}

/// A connection of ``concurrently(_:connect:_:)`` whose `GET /ready` was not 200.
struct ConnectFailure: Error {
    let status: Int
}

extension HTTPField.Name {
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
    static let idempotentReplayed = HTTPField.Name("Idempotent-Replayed")!
    static let retryAfter = HTTPField.Name("Retry-After")!
}

extension HTTPResponse.Status {
    static let paymentRequired = HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required")
}
