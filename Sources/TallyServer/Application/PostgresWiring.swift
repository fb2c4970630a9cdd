import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyPostgres
import TallyStore

/// The PostgreSQL store with the services around it: what runs its connection pool, the notifications that
/// carry change events between the processes sharing the database (what the others publish goes to `events`;
/// `relay` publishes this process's events to them), and this process's heartbeat among them. A session another
/// process ended (a sign-out, an account deleted) is first dropped from this process's caches — the store's live
/// sessions and the tokens `sessions` trusts — then its streams end: a token is refused here as soon as the
/// notification is handled, not when the caches' trust runs out.
///
/// When the listener does not hear (its self-check's probe did not come back: `LISTEN` through a transaction
/// pooler), nothing goes quiet: the revocation feed, polled every second whatever the listener hears, ends the
/// sessions it lists the same way, and ``ListenerFallbackPoller`` polls the documents and wallets of the users
/// with a stream open here, every second, until a probe is heard again.
struct PostgresWiring {
    let store: PostgresStore
    let services: [any Service]
    let relay: @Sendable ([ChangeEvent]) -> Void
    /// This process's row among the running instances, once ``join(signing:adminKey:logger:)`` wrote it.
    private let joined = JoinedInstance()

    /// Polls for the other processes' events while the listener does not hear.
    let poller: ListenerFallbackPoller

    /// The store on `url` (a pool of at most `poolSize` sending its statements as `statements` says, whose leases wait
    /// at most `leaseTimeout` for a connection), its event listener
    /// and migrations on `listenURL` when given (a transaction pooler cannot carry `LISTEN`), else on `url`. The
    /// listener checks that it hears at start and every minute of `clock` (``PostgresNotifications/SelfCheck``).
    init(
        url: String, listenURL: String? = nil, poolSize: Int, statements: PostgresStatements = .prepared,
        leaseTimeout: Duration = PostgresPool.Configuration.defaultAcquireTimeout, clock: any TallyClock,
        events: EventHub, sessions: SessionCache, logger: Logger
    ) throws {
        var pool = try PostgresStore.configuration(url: url, maximumConnections: poolSize)
        pool.statements = statements
        pool.acquireTimeout = leaseTimeout
        let direct = try listenURL.map { try PostgresStore.configuration(url: $0, maximumConnections: 1).connection }
        let store = PostgresStore(configuration: pool, direct: direct, logger: logger)
        self.store = store
        // What another process announced, heard or polled: every session the list ends is dropped from the caches
        // (the store's own, unless the revocation feed is what told: its poll already did) before any stream hears of
        // one, so a client whose stream ended is refused at once with each session ended with it (a password reset).
        let hear: @Sendable ([ChangeEvent], _ polledFeed: Bool) -> Void = { list, polledFeed in
            for event in list {
                switch event {
                case .sessionEnded(_, let sessionId):
                    if !polledFeed { store.sessionEnded(id: sessionId) }
                    sessions.evict(sessionId: sessionId)
                case .accountDeleted(let userId):
                    if !polledFeed { store.accountDeleted(userId: userId) }
                    sessions.evict(userId: userId)
                case .documents, .wallet:
                    break
                }
            }
            for event in list { events.deliver(event) }
        }
        store.onRevocationsPolled { hear($0, true) }
        let poller = ListenerFallbackPoller(store: store, clock: clock, logger: logger, watched: events.watchedUsers) { hear($0, false) }
        self.poller = poller
        let selfCheck = PostgresNotifications.SelfCheck(probingThrough: store, onDelivery: poller.set)
        let notifications = PostgresNotifications(
            connection: store.directConnection, clock: clock, logger: logger, selfCheck: selfCheck
        ) { input in
            switch input {
            case .events(let list): hear(list, false)
            case .listening(let reconnected): if reconnected { events.endAll(.stale) }
            case .eventsLost: events.endAll(.stale)
            }
        }
        // The heartbeat after the pool: it stops first, and deletes its row while the pool still runs.
        let joined = self.joined
        services = [
            PostgresPoolService(store: store), notifications, poller, InstanceHeartbeat(store: store) { joined.instance.withLock { $0 } },
        ]
        relay = notifications.publish
    }

    /// Joins the instances running on the database, unless this process's keys disagree with theirs
    /// (``KeyAgreement``): then throws a ``ConfigurationError`` naming the variable to fix. Waits for the
    /// database if it is down, as migrations do.
    func join(signing: SigningKeys, adminKey: String?, logger: Logger) async throws {
        let now = Date()
        let instance = ServerInstance(
            id: UUID().uuidString.lowercased(), host: ProcessInfo.processInfo.hostName, pid: Int(ProcessInfo.processInfo.processIdentifier),
            signingKeys: signing.keys.map { Secrets.fingerprint(ofKey: $0.secret) },
            adminKey: Secrets.fingerprint(ofKey: Array((adminKey ?? "").utf8)), startedAt: now, seenAt: now)
        try await whenReachable(logger: logger) {
            try await store.join(instance) { running in
                if let refusal = KeyAgreement.refusal(instance, running: running) { throw ConfigurationError(refusal) }
            }
        }
        joined.instance.withLock { $0 = instance }
    }
}

/// The row a process joined with, read by its heartbeat.
private final class JoinedInstance: Sendable {
    let instance = Mutex<ServerInstance?>(nil)
}

/// Runs the PostgreSQL connection pool inside the application's service group.
struct PostgresPoolService: Service {
    let store: PostgresStore
    func run() async throws { try await store.run() }
}
