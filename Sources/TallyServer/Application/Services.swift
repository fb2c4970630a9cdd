import Foundation
import Logging
import Metrics
import Synchronization
import TallyAPI
import TallyAppStore
import TallyStore

/// The composition root's bookkeeping: the pieces
/// ``buildApplication(configuration:clock:logger:onServerRunning:configureRouter:)`` builds once, then takes apart to
/// give each controller what it uses (`buildRouter(services:)`, `buildAdminRouter(services:registry:console:)`); no
/// controller keeps it. It is handed to `configureRouter`, where an embedding app's routes protect themselves with
/// ``AuthMiddleware/init(services:)`` and reach the ``store``, ``clock`` and ``catalog``.
public struct TallyServices: Sendable {
    /// The database.
    public let store: any TallyStorage
    /// The clock every TTL and midnight reads.
    public let clock: any TallyClock
    /// Quotas and actions.
    public let catalog: Catalog
    let configuration: TallyConfiguration
    let tokens: TokenService
    let views: QuotaViews
    /// The paced log of `503`s for an unavailable store, shared by both routers.
    let unavailableLog: UnavailableLog
    let runner: CommandRunner
    let secrets: RuntimeSecrets
    let sessions: SessionCache
    let metrics: any MetricsFactory
    /// Where writes announce what they changed (``ChangeNotifier``).
    let notifier: any ChangeNotifier
    /// This process's event streams, which the notifier feeds.
    let events: EventHub
    /// The synced collections the configuration declares.
    let collections: DeclaredCollections
    /// Seals the sync API's cursors with the signing keys.
    let cursors = CursorKeys()
    /// Encrypts the secrets kept for third parties (Apple's refresh tokens) with keys derived from the signing keys.
    let storedSecrets = StoredSecrets()
    /// Each user's pulls in flight in this process (``SyncController/maxPullsPerUser``).
    let pulls = CallLimiter(limit: SyncController.maxPullsPerUser)
    /// Each user's pushes (``LimitsConfiguration/syncPushesPerUser``).
    let pushes: Throttle
    /// The AI gateway, when the configuration has one.
    let ai: AIGateway?
    /// The account mails (password reset and email verification codes), when the configuration has a mail hook; a
    /// service of the application.
    let mail: AccountMail?
    /// The audit rows of grants and premium changes, appended in groups.
    let audit: AuditLog
    /// Answers Apple's consumption requests, when the configuration has the App Store Server API (a service of the
    /// application).
    let consumptionAnswers: ConsumptionAnswers?

    /// `events` and `relay` make up the notifier (``EventNotifier``): with several processes on one database,
    /// `relay` carries each event to the others, and they hand what they hear to `events` (and the sessions
    /// they end to `sessions`). `logger` is the mail service's.
    init(
        store: any TallyStorage, clock: any TallyClock, configuration: TallyConfiguration, metrics: any MetricsFactory,
        events: EventHub? = nil, sessions: SessionCache? = nil, relay: (@Sendable ([ChangeEvent]) -> Void)? = nil,
        logger: Logger = Logger(label: "tally"), ready: StartupGate = StartupGate()
    ) {
        self.store = store
        self.clock = clock
        self.catalog = configuration.metering.catalog
        self.configuration = configuration
        self.tokens = TokenService(
            clock: clock, accessTokenTTL: configuration.accessTokenTTL, refreshTokenTTL: configuration.refreshTokenTTL)
        self.views = QuotaViews(
            catalog: catalog, clock: clock,
            countedForPremium: Set((configuration.ai?.models ?? []).compactMap(\.premium.quotaName)))
        self.unavailableLog = UnavailableLog(clock: clock)
        let events = events ?? EventHub(metrics: metrics)
        let notifier = EventNotifier(hub: events, relay: relay)
        self.runner = CommandRunner(
            store: store, clock: clock, inFlight: InFlightKeys(), metrics: metrics, notifier: notifier)
        let secrets = RuntimeSecrets()
        self.secrets = secrets
        self.sessions = sessions ?? SessionCache(clock: clock)
        self.metrics = metrics
        self.events = events
        self.notifier = notifier
        self.collections = DeclaredCollections(configuration.sync.collections)
        self.pushes = Throttle("sync push per user", configuration.limits.syncPushesPerUser)
        self.ai = configuration.ai.map {
            AIGateway(configuration: $0, settlements: PendingSettlements(store: store, clock: clock, notifier: notifier))
        }
        self.audit = AuditLog(store: store)
        self.mail = configuration.mail.map {
            AccountMail(configuration: $0, store: store, clock: clock, secrets: secrets, logger: logger)
        }
        self.consumptionAnswers = configuration.appStore.flatMap { appStore in
            appStore.serverAPI.map { api in
                var policy = appStore.consumption
                // Without a word from the configuration: a sample was provided when anything is given for free.
                policy.sampleContentProvided =
                    appStore.sampleContentProvided ?? (configuration.metering.catalog.signupGrant > 0 || !configuration.metering.catalog.quotas.isEmpty)
                // One attempt per pass: the queue's own backoff retries, up to Apple's deadline.
                var settings = api
                settings.configuration.maxAttempts = 1
                return ConsumptionAnswers(
                    store: store, api: settings.client(clock: clock, logger: logger), policy: policy, clock: clock, logger: logger,
                    ready: ready)
            }
        }
    }

    /// Installs the token signing keys (which seal the sync cursors and stored secrets too) and loads the IP-hash key shared through
    /// the database; run before serving.
    func loadSecrets(signing: SigningKeys) async throws {
        await tokens.install(signing)
        cursors.install(signing)
        storedSecrets.install(signing)
        let ipKey = try await store.secret(named: "ip-hash") { Secrets.random(bytes: 32) }
        secrets.ipHashKey.withLock { $0 = ipKey }
    }
}

/// Secrets read from the database at start-up.
final class RuntimeSecrets: Sendable {
    let ipHashKey = Mutex("")
}

/// The pieces several controllers share, made from the services (each a view of the same shared state: building one
/// twice builds the same thing).
extension TallyServices {
    /// Client addresses through the configured trusted proxies, and keyed hashes under the IP-hash key.
    var callerKeys: CallerKeys {
        CallerKeys(trustedProxies: configuration.limits.trustedProxies, secrets: secrets)
    }

    /// Opens and ends sessions: the token service, this process's session cache, the notifier.
    var sessionKeeper: SessionKeeper {
        SessionKeeper(tokens: tokens, cache: sessions, notifier: notifier)
    }

    /// App Attest and DeviceCheck as the configuration sets them.
    var deviceIntegrity: DeviceIntegrity {
        DeviceIntegrity(
            store: store, clock: clock, appAttest: configuration.appAttest, deviceCheck: configuration.deviceCheck,
            signupGrant: catalog.signupGrant, metrics: metrics)
    }

    /// Revokes a deleted account's Apple refresh token, with Sign in with Apple's token settings.
    var appleTokens: AppleTokenRevocation {
        AppleTokenRevocation(client: configuration.signInWithApple?.tokens, store: store, storedSecrets: storedSecrets, clock: clock)
    }

    /// What the admin API and the console act on accounts with.
    var operatorTools: OperatorTools {
        OperatorTools(store: store, clock: clock, views: views, runner: runner, audit: audit)
    }

    /// Takes `appStore`'s verified notifications (the webhook's and the replayed ones).
    func notificationIntake(_ appStore: AppStoreConfiguration) -> AppStoreNotificationIntake {
        AppStoreNotificationIntake(
            store: store, clock: clock, notifier: notifier, consumptionAnswers: consumptionAnswers, appStore: appStore)
    }
}

extension AuthMiddleware {
    /// Checks tokens with `services`' signing keys and sessions: the ones
    /// ``buildApplication(configuration:clock:logger:onServerRunning:configureRouter:)`` hands to `configureRouter`.
    public init(services: TallyServices) {
        self.init(tokens: services.tokens, store: services.store, sessions: services.sessions)
    }
}
