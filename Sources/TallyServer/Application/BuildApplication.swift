import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallySQLite
import TallyStore

/// The ports the two listeners bound, as ``buildApplication(configuration:clock:logger:onServerRunning:configureRouter:)``
/// reports them once both listen.
public struct ListenerPorts: Sendable, Hashable {
    /// The public API (`/v1/*`, `/health`, `/ready`).
    public let port: Int
    /// The admin listener (`/metrics`, `/admin/v1/*`, `/health`, `/ready`).
    public let adminPort: Int
}

/// Builds the Tally server: opens the store named by the configuration, adds the routes, and composes
/// the services (database client, housekeeping, admin listener, public listener) into one application.
///
/// Two listeners: the public one serves the API, the admin one (loopback by default) serves `/metrics`
/// and the admin API, so a public port never exposes them. Both start after migrations and secrets have
/// loaded, and stop together on graceful shutdown. `configureRouter` lets an embedding app add its own
/// routes to the public router, with access to the same services.
public func buildApplication(
    configuration: TallyConfiguration,
    clock: any TallyClock = SystemClock(),
    logger: Logger = Logger(label: "tally"),
    onServerRunning: @escaping @Sendable (_ ports: ListenerPorts) async -> Void = { _ in },
    configureRouter: (Router<TallyRequestContext>, TallyServices) -> Void = { _, _ in }
) throws -> some ApplicationProtocol {
    var services: [any Service] = []
    let registry = PrometheusCollectorRegistry()
    let metrics = PrometheusMetricsFactory(registry: registry)
    let events = EventHub(metrics: metrics)
    let sessions = SessionCache(clock: clock)
    let store: any TallyStorage
    var relay: (@Sendable ([ChangeEvent]) -> Void)?
    var postgres: PostgresWiring?
    if let url = configuration.databaseURL {
        let wiring = try PostgresWiring(
            url: url, listenURL: configuration.listenDatabaseURL, poolSize: configuration.postgresPoolSize,
            statements: configuration.postgresStatements, leaseTimeout: configuration.postgresLeaseTimeout, clock: clock, events: events, sessions: sessions, logger: logger)
        services += wiring.services
        store = wiring.store
        relay = wiring.relay
        postgres = wiring
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
    let ready = StartupGate()
    let tally = TallyServices(
        store: store, clock: clock, configuration: configuration, metrics: metrics, events: events, sessions: sessions, relay: relay,
        logger: logger, ready: ready)
    if let answers = tally.consumptionAnswers { services.append(answers) }
    if let ai = tally.ai { services += [ai.upstream, ai.settlements, ai.bulk] }
    if let mail = tally.mail {
        services.append(mail)
    } else {
        logger.notice("no mail hook configured (mail:): password reset and email verification codes are not sent")
    }
    let router = buildRouter(services: tally)
    configureRouter(router, tally)
    let listenersReady = StartupGate()
    services.append(
        Housekeeping(
            store: store, clock: clock, interval: configuration.housekeepingInterval, logger: logger, ready: ready,
            tombstoneRetention: configuration.sync.tombstoneRetention, notifier: tally.notifier))
    let ports = PortsReport(onServerRunning)
    let connections = configuration.connections

    var admin = Application(
        router: buildAdminRouter(services: tally, registry: registry, console: true),
        server: .guardedHTTP1(
            connections,
            limiter: ConnectionLimiter(
                listener: "admin", maxTotal: ConnectionSettings.adminMaxConnections, maxPerAddress: 0, clock: clock,
                logger: logger)),
        configuration: .init(
            address: .hostname(configuration.adminHost, port: configuration.adminPort), serverName: "tally",
            availableConnectionsDelegate: SocketBudget(
                listener: "admin", budget: ConnectionSettings.adminSocketBudget, clock: clock, logger: logger)),
        onServerRunning: { channel in await ports.bound(admin: channel.localAddress?.port ?? configuration.adminPort) },
        logger: logger)
    admin.beforeServerStarts {
        await listenersReady.wait()
        try Task.checkCancellation()
    }
    services.append(admin)

    let budget = ConnectionSettings.socketBudget(
        openFileLimit: OpenFileLimit.current,
        // The pool, and the event listener's connection.
        databaseConnections: configuration.databaseURL == nil ? 0 : configuration.postgresPoolSize + 1)
    let maxConnections = connections.maxConnections ?? ConnectionSettings.derivedMaximum(socketBudget: budget)
    logger.log(
        level: maxConnections < budget ? .info : .warning,
        maxConnections < budget
            ? "connection limits" : "max connections is above what the open-file limit allows: accepting pauses first",
        metadata: [
            "max_connections": "\(maxConnections)", "max_connections_per_ip": "\(connections.maxConnectionsPerIP)",
            "socket_budget": "\(budget)",
        ])
    var app = Application(
        router: router,
        server: .guardedHTTP1(
            connections,
            limiter: ConnectionLimiter(
                listener: "public", maxTotal: maxConnections, maxPerAddress: connections.maxConnectionsPerIP, clock: clock,
                logger: logger)),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "tally",
            backlog: configuration.backlog,
            availableConnectionsDelegate: SocketBudget(
                listener: "public", budget: budget, clock: clock, logger: logger)),
        services: services,
        onServerRunning: { channel in await ports.bound(api: channel.localAddress?.port ?? configuration.port) },
        logger: logger)
    app.beforeServerStarts { [postgres] in
        try await whenReachable(logger: logger) { try await store.migrate() }
        try await tally.loadSecrets(signing: signing.keys)
        do {
            try await postgres?.join(signing: signing.keys, adminKey: configuration.adminKey, logger: logger)
        } catch let error as ConfigurationError {
            logger.critical("refusing to start: \(error)")
            throw error
        }
        ready.open()
        listenersReady.open()
    }
    return app
}

/// The public router: the API under `/v1` and the probes. An embedding app adds its routes to it through
/// `buildApplication`'s `configureRouter`, which also runs what the services need before serving (migrations,
/// secrets, housekeeping). Each controller is built here with what it uses, taken from `services`.
func buildRouter(services: TallyServices) -> Router<TallyRequestContext> {
    let router = baseRouter(services: services)
    let configuration = services.configuration
    let (store, clock, runner, notifier, views) = (services.store, services.clock, services.runner, services.notifier, services.views)
    let keys = services.callerKeys
    let sessions = services.sessionKeeper
    let integrity = services.deviceIntegrity
    let auth = AuthMiddleware(services: services)
    // One set of identity throttles, shared by the identity routes (each throttle is used by one door).
    let admission = Admission(
        clock: clock, keys: keys, limits: configuration.limits, bcryptCost: configuration.bcryptCost, sessions: sessions)
    let merging = GuestMerge(store: store, sessions: sessions, notifier: notifier, auth: auth, integrity: integrity)

    let identity = IdentityController(
        store: store, admission: admission, runner: runner, integrity: integrity, merging: merging, appleTokens: services.appleTokens,
        guestSignupsPerHour: configuration.metering.guestSignupsPerIPPerHour)
    let metering = MeteringController(
        store: store, clock: clock, catalog: services.catalog, views: views, runner: runner, integrity: integrity)
    let v1 = router.group("v1")
    let recovery = AccountRecoveryController(store: store, admission: admission, mail: services.mail, secrets: services.secrets)
    let purchases = configuration.appStore.map { appStore in
        PurchasesController(
            store: store, clock: clock, keys: keys, notifier: notifier, appStore: appStore, intake: services.notificationIntake(appStore),
            limits: configuration.limits)
    }
    let attestation = AttestationController(admission: admission, integrity: integrity)
    identity.addPublicRoutes(to: v1)
    attestation.addPublicRoutes(to: v1)
    recovery.addPublicRoutes(to: v1)
    metering.addPublicRoutes(to: v1)
    purchases?.addPublicRoutes(to: v1)
    if let apple = configuration.signInWithApple {
        AppleSignInController(
            store: store, admission: admission, apple: apple, merging: merging, storedSecrets: services.storedSecrets,
            signupGrant: services.catalog.signupGrant
        ).addPublicRoutes(to: v1)
    }

    let user = router.group("v1")
        .add(middleware: auth)
        .group(context: AuthenticatedContext.self)
    identity.addRoutes(to: user)
    attestation.addRoutes(to: user)
    recovery.addRoutes(to: user)
    WalletController(store: store, clock: clock, runner: runner).addRoutes(to: user)
    metering.addRoutes(to: user)
    let sync = SyncSetup(collections: services.collections, budget: configuration.sync.budget, cursors: services.cursors)
    CollectionsController(store: store, clock: clock, runner: runner, notifier: notifier, sync: sync).addRoutes(to: user)
    SyncController(
        store: store, clock: clock, keys: keys, notifier: notifier, sync: sync, pushes: services.pushes, pulls: services.pulls
    ).addRoutes(to: user)
    SyncEventsController(
        store: store, clock: clock, events: services.events, views: views, cursors: services.cursors, tokens: services.tokens
    ).addRoutes(to: user)
    if let ai = services.ai {
        let chat = ChatCompletionsController(
            ai: ai, store: store, clock: clock, runner: runner, notifier: notifier, catalog: services.catalog)
        let daily = DailyGenerationsController(
            ai: ai, store: store, clock: clock, notifier: notifier, views: views, integrity: integrity)
        ai.addRoutes(to: user, chat: chat, daily: daily)
    }
    purchases?.addRoutes(to: user)
    return router
}

/// The admin listener's router: `/metrics`, the admin API under `/admin/v1`, the probes and, with `console`, the
/// operator's console (`/`, `/console/*`: HTML pages, not API operations, so not in openapi.yaml), which shares the
/// admin API's key check (and its count of wrong keys per address). Each controller is built here with what it uses.
func buildAdminRouter(
    services: TallyServices, registry: PrometheusCollectorRegistry, console: Bool = false
) -> Router<TallyRequestContext> {
    let router = baseRouter(services: services)
    let configuration = services.configuration
    let (store, clock) = (services.store, services.clock)
    let tools = services.operatorTools
    OperationsController(store: store).addMetricsRoute(to: router, registry: registry)
    let keyCheck = AdminKeyMiddleware(
        adminKey: configuration.adminKey ?? "", clock: clock, keys: services.callerKeys,
        failuresPerAddress: configuration.limits.adminFailuresPerAddress)
    let appStore = configuration.appStore.map { appStore in
        AppStoreAdminController(
            reconciliation: appStore.serverAPI.map { settings in
                AppStoreReconciliation(
                    store: store, clock: clock, notifier: services.notifier, appStore: appStore,
                    api: settings.client(clock: clock, logger: Logger(label: "tally.appstore-api")),
                    intake: services.notificationIntake(appStore))
            })
    }
    AdminController(tools: tools, keyCheck: keyCheck, appStore: appStore).addRoutes(to: router.group("admin/v1"))
    if console {
        let setup = ConsoleSetup(
            databaseKind: configuration.databaseURL == nil ? "SQLite" : "PostgreSQL", showsAttestation: configuration.appAttest != nil,
            trustedProxies: configuration.limits.trustedProxies)
        ConsoleController(
            tools: tools, notifier: services.notifier, userSessions: services.sessionKeeper, appleTokens: services.appleTokens,
            purchases: ConsolePurchases(store: store, clock: clock, appStore: configuration.appStore), setup: setup, keyCheck: keyCheck,
            samples: ProcessSamples(registry: registry)
        ).addRoutes(to: router)
    }
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

/// What both routers share: access log, request metrics, JSON errors, `/health` and `/ready`.
private func baseRouter(services: TallyServices) -> Router<TallyRequestContext> {
    let router = Router(context: TallyRequestContext.self)
    router.add(middleware: AccessLogMiddleware())
    router.add(middleware: RequestMetricsMiddleware(factory: services.metrics))
    router.add(middleware: ErrorMiddleware(views: services.views, unavailable: services.unavailableLog))
    OperationsController(store: services.store).addProbeRoutes(to: router)
    return router
}

/// Hands both listeners' ports to `onServerRunning` once the second one listens.
final class PortsReport: Sendable {
    private let ports = Mutex<(api: Int?, admin: Int?)>((nil, nil))
    private let report: @Sendable (ListenerPorts) async -> Void

    init(_ report: @escaping @Sendable (ListenerPorts) async -> Void) {
        self.report = report
    }

    /// Notes a listener's port; reports both when this was the second.
    func bound(api: Int? = nil, admin: Int? = nil) async {
        let both: ListenerPorts? = ports.withLock { ports in
            ports.api = api ?? ports.api
            ports.admin = admin ?? ports.admin
            guard let api = ports.api, let admin = ports.admin else { return nil }
            return ListenerPorts(port: api, adminPort: admin)
        }
        if let both { await report(both) }
    }
}
