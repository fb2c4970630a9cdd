import Foundation
import TallyAPI

/// The Tally SDK: one per app, created at launch and injected where needed.
///
/// It signs the installation in as a guest (or a linked account), caches server reads with
/// stale-while-revalidate, and performs metered actions optimistically, reconciling with the
/// server's answer or rolling back exactly.
public final class Client: Sendable {
    /// Counts and latencies of what the SDK did.
    public let metrics: ClientMetrics
    let configuration: ClientConfiguration
    let executor: RequestExecutor
    let session: SessionManager
    @usableFromInline let cache: QueryCache
    /// Reads in flight, by key (one coalescer per value type); each hands the value shown after its answer
    /// to every caller that joined it.
    let reads = CoalescersByType<String>()
    let writes = Coalescer<String, Data>()
    let scopes = ScopeQueue()
    let userId: Locked<String?>
    /// Revalidations and refetches no caller waits for; a change of user cancels those of the user who left.
    let background: BackgroundTasks
    /// Refetchers of observed keys, by key (set by the first typed access).
    let refetchers = Locked<[String: @Sendable (Client) -> Void]>([:])
    /// The signed-in user's sync engine (synced collections) and event stream, and the app's sync status and event
    /// streams. (``sync`` is the app's handle.)
    let syncHost: SyncHost
    /// The transport AI streams open (`client.ai.stream`): the configured one, else a URLSession one made on first use.
    let streams = LazyEventStreamTransport()
    /// Whether a database of the SDK (the cache store, the synced documents) is in an App Group container: then the
    /// app's going to the background suspends GRDB's databases (``appDidEnterBackground()``).
    let sharesDatabases: Bool
    /// The AI streams in flight, by request and intent: the same request streamed again while it runs joins it.
    let aiStreams: AIStreamCalls
    /// App Attest and DeviceCheck (``ClientConfiguration/attestation``), when configured: it signs the executor's requests.
    let attestor: Attestor?

    /// Creates a client; nothing is read or sent until ``restore()`` or a sign-in.
    public init(configuration: ClientConfiguration) {
        self.configuration = configuration
        metrics = configuration.metrics
        let transport = configuration.transport ?? URLSessionTransport(baseURL: configuration.baseURL)
        // Every answer of the server is a sign that it is reachable: it ends sync's wait after an outage.
        let reachability = Reachability(clock: configuration.clock)
        let attestor = Attestor.make(configuration, transport: transport)
        self.attestor = attestor
        executor = RequestExecutor(
            transport: transport, clock: configuration.clock, retry: configuration.retry, timeouts: configuration.timeouts,
            metrics: configuration.metrics, random: configuration.random, signer: attestor,
            onResponse: { status in if SyncSchedule.isAnswer(status: status) { reachability.signal(.answered) } })
        let cache = QueryCache(
            countLimit: configuration.cacheCountLimit, costLimit: configuration.cacheByteLimit, clock: configuration.clock)
        self.cache = cache
        let userId = Locked<String?>(nil)
        self.userId = userId
        let background = BackgroundTasks()
        self.background = background
        let persistence = configuration.cacheStore
        let sync = SyncHost(reachability: reachability)
        syncHost = sync
        let aiStreams = AIStreamCalls()
        self.aiStreams = aiStreams
        let documentsFile = Self.documentsFile(configuration)
        sharesDatabases = (configuration.cacheStore as? SQLiteCacheStore)?.isShared == true
            || (!configuration.collections.isEmpty
                && (try? Self.documentsDirectory(configuration)).map { PrivateDatabaseFile.isInSharedContainer($0.path) } == true)
        session = SessionManager(
            secureStore: configuration.secureStore, clock: configuration.clock, executor: executor, reachability: reachability,
            attestor: attestor
        ) { previous, current in
            // A different user. First everything working for the one who left ends, and is waited for: their background
            // reads, AI streams, event stream and sync engine (its observations end with it) — each request of theirs
            // is cancelled, not waited for —, and their document file is closed and removed (or becomes the account's,
            // after a merge). Nothing of theirs runs, or reaches the cache, after this.
            await background.cancelUserWork()
            await aiStreams.endAll()
            await sync.leave(next: current, documentsFile: documentsFile)
            // Then nothing of theirs stays in memory or on disk (cleared under the user's lock, which a value being
            // persisted holds: see ``persist(_:key:isUserData:generation:)``), and the next user's values — what the
            // cache store kept, shown stale until revalidated —, engine and stream start.
            userId.withLock { user in
                cache.clear()
                user = current
            }
            if let current, let entries = try? persistence?.entries(userId: current) { cache.load(entries) }
            if let previous { try? persistence?.removeAll(userId: previous) }
            await sync.adopt(current)
        }
        if !configuration.collections.isEmpty {
            sync.setFactory { [weak self] userId in
                guard let self else { throw CancellationError() }
                return try self.makeSyncEngine(userId: userId)
            }
        }
        // One event stream per signed-in user while the app is active, with or without synced collections.
        sync.setLiveEvents(
            open: { [weak self] userId, lastEventId in self?.liveEventStream(userId: userId, lastEventId: lastEventId) },
            wallet: { [weak self] userId, event in self?.confirmFromServer(event, of: userId) })
    }

    /// The signed-in user's tokens, refused once that user has left: what work started for them sends, so that it
    /// never acts as the next user (``SessionManager/tokens(of:)``).
    func userTokens() -> any AccessTokenProvider {
        userId.withLock { $0 }.map { session.tokens(of: $0) } ?? session
    }

    // MARK: Session

    /// The signed-in user, if any.
    public var user: SessionUser? { get async { await session.user } }

    /// Restores the session kept in the secure store (by an earlier launch, or by the app or extension sharing
    /// it) and its cached values (shown stale until revalidated), and refreshes the price list in the background.
    /// Returns the user, or nil when the app must sign in.
    @discardableResult
    public func restore() async throws -> SessionUser? {
        preparePriceList()
        await session.scheduleRevocations()  // sessions signed out offline, before this launch
        let user = try await session.restore()
        if user != nil { await attestor?.attestInBackground(auth: userTokens()) }  // an installation not attested yet
        return user
    }

    /// Signs this installation in as its guest account (created on first use, with the sign-up grant). The
    /// installation secret that identifies the guest is kept across sign-out, so signing out and in again does
    /// not make a new guest with a fresh free quota. The device's time zone is then set on the user
    /// (``ClientConfiguration/timeZone``), so the free quotas reset at the device's midnight.
    @discardableResult
    public func signInAsGuest() async throws -> SessionUser {
        try await signedIn(session.signInAsGuest())
    }

    /// Signs in to a linked account; a wrong email or password throws ``ClientError/Code/invalidCredentials``.
    /// The device's time zone is then set on the user, as at a guest sign-in.
    @discardableResult
    public func signIn(email: String, password: String) async throws -> SessionUser {
        try await signedIn(session.signIn(email: email, password: password))
    }

    /// What follows every sign-in: the price list prepared, the device's time zone set on the user.
    func signedIn(_ user: SessionUser) async -> SessionUser {
        preparePriceList()
        await session.scheduleRevocations()  // the server answered: sessions signed out offline can be revoked now
        await attestor?.attestInBackground(auth: userTokens())  // unless the installation is attested
        await adoptDeviceTimeZone()
        return user
    }

    /// Links the current guest account to an email and password, in place (same wallet).
    @discardableResult
    public func link(email: String, password: String) async throws -> Me {
        let me = try await session.link(email: email, password: password)
        _ = cache.invalidate { $0 == "me" }
        return me
    }
}
