import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import TallySQLite
import TallyStore

/// Builds the Tally server: opens the store named by the configuration, adds the routes, and
/// composes the services (database client, housekeeping, HTTP server) into one application.
///
/// Migrations and secrets load before the server accepts connections. `configureRouter` lets an
/// embedding app add its own routes next to Tally's, with access to the same services.
public func buildApplication(
    configuration: TallyConfiguration,
    clock: any WallClock = SystemClock(),
    logger: Logger = Logger(label: "tally"),
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in },
    configureRouter: (Router<TallyRequestContext>, TallyServices) -> Void = { _, _ in }
) throws -> some ApplicationProtocol {
    var services: [any Service] = []
    let store: any TallyStorage
    if let url = configuration.databaseURL {
        let postgres = try makePostgresStore(url: url, poolSize: configuration.postgresPoolSize, logger: logger)
        services.append(postgres.service)
        store = postgres.store
    } else {
        let narrowed = try DataDirectory.prepare(configuration.dataDirectory)
        if !narrowed.isEmpty {
            logger.warning("restricted the data directory to its owner", metadata: ["files": "\(narrowed.joined(separator: ", "))"])
        }
        let path = (configuration.dataDirectory as NSString).appendingPathComponent("tally.sqlite")
        try DataDirectory.createPrivateFile(path)
        store = try SQLiteStore(path: path)
    }
    let signing = try configuration.signingKeys.map { (keys: $0, generated: false) }
        ?? SigningKeys.resolve(configured: nil, dataDirectory: configuration.dataDirectory)
    if signing.generated {
        logger.notice("generated a token signing key", metadata: [
            "file": "\((configuration.dataDirectory as NSString).appendingPathComponent("signing-keys"))"
        ])
        if configuration.databaseURL != nil {
            logger.warning("servers sharing this PostgreSQL on other machines need the same key: set TALLY_SIGNING_KEY on every one")
        }
    }
    let registry = PrometheusCollectorRegistry()
    let tally = TallyServices(
        store: store, clock: clock, configuration: configuration, metrics: PrometheusMetricsFactory(registry: registry))
    let router = buildRouter(services: tally, registry: registry)
    configureRouter(router, tally)
    let ready = StartupGate()
    services.append(
        Housekeeping(store: store, clock: clock, interval: configuration.housekeepingInterval, logger: logger, ready: ready))
    var app = Application(
        router: router,
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "tally",
            backlog: configuration.backlog),
        services: services,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger)
    app.beforeServerStarts {
        try await whenReachable(logger: logger) { try await store.migrate() }
        try await tally.loadSecrets(signing: signing.keys)
        ready.open()
    }
    return app
}

/// The router with every Tally route; exposed for embedding and for tests.
public func buildRouter(services: TallyServices, registry: PrometheusCollectorRegistry) -> Router<TallyRequestContext> {
    let router = Router(context: TallyRequestContext.self)
    router.add(middleware: RequestMetricsMiddleware(factory: services.metrics))
    router.add(middleware: ErrorMiddleware())
    OperationsController(services: services, registry: registry).addRoutes(to: router)

    let identity = IdentityController(services: services)
    let metering = MeteringController(services: services)
    let v1 = router.group("v1")
    identity.addPublicRoutes(to: v1)
    metering.addPublicRoutes(to: v1)

    let user = router.group("v1")
        .add(middleware: AuthMiddleware(tokens: services.tokens, store: services.store, sessions: services.sessions))
        .group(context: AuthenticatedContext.self)
    identity.addRoutes(to: user)
    WalletController(services: services).addRoutes(to: user)
    metering.addRoutes(to: user)

    AdminController(services: services).addRoutes(to: router.group("admin/v1"))
    return router
}

/// Runs `work` until the database answers: a server started while PostgreSQL is down waits for it (not
/// listening meanwhile) instead of exiting, and logs that it waits once.
func whenReachable(logger: Logger, _ work: () async throws -> Void) async throws {
    var logged = false
    while true {
        do {
            return try await work()
        } catch let error as StoreError where error.code == .unavailable {
            if !logged { logger.warning("waiting for the database before serving", metadata: ["error": "\(error.underlying.map { "\($0)" } ?? "-")"]) }
            logged = true
            try await Task.sleep(for: .seconds(1))
        }
    }
}
