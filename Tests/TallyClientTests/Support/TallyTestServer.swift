import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import TallyAPI
import TallyClient
import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// A real Tally server on loopback (embedded SQLite in a temp directory, manual clock), and clients
/// that talk to it through URLSession wrapped in a fault-injecting transport.
struct TallyTestServer: Sendable {
    let port: Int
    /// The admin listener's port (grants).
    let adminPort: Int
    /// The server's clock (moves token expiry and quota windows on the server).
    let serverClock: ManualClock
    let adminKey: String

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }
    var adminURL: URL { URL(string: "http://127.0.0.1:\(adminPort)")! }

    /// Runs `body` against a fresh server on `kind` (PostgreSQL: a scratch database of its own, the case skipped
    /// or failed by TallyTestSupport's rule without one), its configuration changed by `configure`, then shuts it down.
    static func with<T: Sendable>(
        _ kind: StoreKind = .sqlite, catalog: Catalog = .standard, configure: (inout TallyConfiguration) -> Void = { _ in },
        sourceLocation: SourceLocation = #_sourceLocation, _ body: @Sendable (TallyTestServer) async throws -> T
    ) async throws -> T {
        guard kind == .postgres else { return try await with(databaseURL: nil, catalog: catalog, configure: configure, body) }
        return try await ScratchDatabase.with(baseURL: try postgresURL(sourceLocation: sourceLocation)) { url in
            try await with(databaseURL: url, catalog: catalog, configure: configure, body)
        }
    }

    private static func with<T: Sendable>(
        databaseURL: String?, catalog: Catalog, configure: (inout TallyConfiguration) -> Void,
        _ body: @Sendable (TallyTestServer) async throws -> T
    ) async throws -> T {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        var configuration = TallyConfiguration()
        configuration.port = 0
        configuration.adminPort = 0
        configuration.bcryptCost = 4
        configuration.housekeepingInterval = .seconds(3600)
        configuration.metering.catalog = catalog
        configuration.metering.guestSignupsPerIPPerHour = 100_000
        configuration.adminKey = "client-test-admin-key-0123456789"
        configuration.databaseURL = databaseURL
        configure(&configuration)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-client-\(UUID().uuidString)").path
        configuration.dataDirectory = directory
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var logger = Logger(label: "tally.client-test")
        logger.logLevel = .warning
        let (ports, continuation) = AsyncStream.makeStream(of: ListenerPorts.self)
        let app = try buildApplication(configuration: configuration, clock: clock, logger: logger) { continuation.yield($0) }
        let adminKey = configuration.adminKey!
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(configuration: .init(services: [app], logger: logger))
            group.addTask {
                // A server that stops before it listens (an error while starting) ends the wait for its ports below.
                defer { continuation.finish() }
                try await services.run()
            }
            var iterator = ports.makeAsyncIterator()
            guard let bound = await iterator.next() else {
                try await group.waitForAll()  // its error, if it failed
                throw CancellationError()
            }
            do {
                let value = try await body(
                    TallyTestServer(port: bound.port, adminPort: bound.adminPort, serverClock: clock, adminKey: adminKey))
                await services.triggerGracefulShutdown()
                return value
            } catch {
                await services.triggerGracefulShutdown()
                throw error
            }
        }
    }

    /// A client of this server with its own clock, secure store and fault-injecting transport; `through` is where it
    /// connects instead of the server (a proxy in front of it). Without `eventStream` the client is told it is in the
    /// background before anything else (``Client/appDidEnterBackground()``), so it opens no event stream: its cached
    /// values change only by the test's own calls, which keeps request counts and state sequences exact. Tests of
    /// what arrives live pass true.
    func client(
        clock: ManualClock = ManualClock(), secureStore: any SecureStore = MemorySecureStore(), cacheStore: (any CacheStore)? = nil,
        retry: RetryPolicy = RetryPolicy(), through: URL? = nil, eventStream: Bool = false,
        configure: (inout ClientConfiguration) -> Void = { _ in }
    ) -> (Client, FaultInjectingTransport) {
        let baseURL = through ?? baseURL
        let transport = FaultInjectingTransport(wrapping: URLSessionTransport(baseURL: baseURL), clock: clock)
        var configuration = ClientConfiguration(baseURL: baseURL, secureStore: secureStore, cacheStore: cacheStore)
        configuration.transport = transport
        configuration.clock = clock
        configuration.retry = retry
        configuration.random = { 0 }  // no jitter: retries wait zero seconds unless Retry-After says otherwise
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil  // no PATCH /v1/me at sign-in unless a test asks for it (request counts stay exact)
        configure(&configuration)
        let client = Client(configuration: configuration)
        if !eventStream { client.appDidEnterBackground() }
        return (client, transport)
    }

    /// Grants `amount` tokens to `userId` through the admin listener.
    func grant(_ amount: Int64, to userId: String) async throws {
        let transport = URLSessionTransport(baseURL: adminURL)
        let body = try TallyJSON.encoder().encode(GrantRequest(amount: amount, reason: "test"))
        let response = try await transport.send(
            TransportRequest(
                method: "POST", path: "/admin/v1/users/\(userId)/grants",
                headers: ["Authorization": "Bearer \(adminKey)", "Content-Type": "application/json", "Idempotency-Key": UUID().uuidString],
                body: body, timeout: 10))
        guard response.status == 200 || response.status == 201 else { throw TestFailure("grant answered \(response.status)") }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension TallyTestServer {
    /// Sets `userId`'s premium end through the admin listener (nil revokes it).
    func setPremium(until: Date?, for userId: String) async throws {
        let transport = URLSessionTransport(baseURL: adminURL)
        let response = try await transport.send(
            TransportRequest(
                method: "PUT", path: "/admin/v1/users/\(userId)/premium",
                headers: ["Authorization": "Bearer \(adminKey)", "Content-Type": "application/json", "Idempotency-Key": UUID().uuidString],
                body: try TallyJSON.encoder().encode(PremiumRequest(until: until)), timeout: 10))
        guard (200..<300).contains(response.status) else { throw TestFailure("premium answered \(response.status)") }
    }
}
