import Foundation

/// Everything a ``Client`` needs; only the server URL and a secure store are required.
public struct ClientConfiguration: Sendable {
    /// The Tally server, e.g. `https://api.example.com`.
    public var baseURL: URL
    /// Where the installation secret and the session live: ``KeychainSecureStore`` on Apple platforms
    /// (`KeychainSecureStore(appGroup:)` to share the session with the app's extensions).
    public var secureStore: any SecureStore
    /// Where cached values persist across launches, per user; nil keeps them in memory only.
    public var cacheStore: (any CacheStore)?
    /// How requests are sent; nil uses URLSession.
    public var transport: (any HTTPTransport)?
    /// The source of time for TTLs, backoff and token expiry.
    public var clock: any TallyClock
    /// Per-kind request timeouts.
    public var timeouts: Timeouts
    /// Backoff and retry rules.
    public var retry: RetryPolicy
    /// The memory cache's entry limit (the field notes' image cache: 500).
    public var cacheCountLimit: Int
    /// The memory cache's byte limit (the field notes' image cache: 100 MB).
    public var cacheByteLimit: Int
    /// Seconds the wallet and quotas count as fresh after the server last confirmed them (an answer, an action, an
    /// event): `fetch` answers a fresh value from the cache, and a staler one at once while it refetches in the
    /// background. No timer refetches them: while the app is active, the event stream confirms them live after every
    /// change on the server (a grant, another device's action); ``Client/appDidBecomeActive()`` refetches the
    /// observed ones that are stale and reopens the stream, whose first event is their state then.
    public var balanceStaleAfter: TimeInterval
    /// Where counts and latencies are recorded.
    public var metrics: ClientMetrics
    /// A uniform draw in [0, 1) for backoff jitter; tests fix it.
    public var random: @Sendable () -> Double
    /// The zone set on the user at every sign-in, so the daily quotas reset at the device's midnight
    /// (the server's default is UTC); nil leaves the zone to ``Client/updateProfile(timezone:language:)``.
    public var timeZone: TimeZone?
    /// The synced collections the app uses (as the server declares them); a collection not listed is refused.
    public var collections: [SyncedCollectionSpec]
    /// Where each signed-in user's synced documents live on the device (one file per user, removed at sign-out):
    /// nil is Application Support/Tally. An app and its widget sharing documents pass their App Group container.
    public var documentsDirectory: URL?
    /// How the server's event stream (live wallet, quotas, premium and document changes; open while a user is signed
    /// in and the app is active) is opened; nil uses URLSession.
    public var eventStreamTransport: (any EventStreamTransport)?
    /// App Attest and DeviceCheck (``AttestationConfiguration``): on Apple platforms Apple's services, used where the
    /// device supports them; nil, nothing attested, on Linux. Set a service of your own in tests, and nil in an app
    /// extension that shares the app's secure store: App Attest keys are the app's (its App ID), not the extension's.
    public var attestation: AttestationConfiguration?

    /// Creates a configuration with the defaults described on each property.
    public init(baseURL: URL, secureStore: any SecureStore, cacheStore: (any CacheStore)? = nil) {
        self.baseURL = baseURL
        self.secureStore = secureStore
        self.cacheStore = cacheStore
        transport = nil
        clock = SystemClientClock()
        timeouts = Timeouts()
        retry = RetryPolicy()
        cacheCountLimit = 500
        cacheByteLimit = 100 * 1024 * 1024
        balanceStaleAfter = 30
        metrics = ClientMetrics()
        random = { Double.random(in: 0..<1) }
        timeZone = .current
        collections = []
        documentsDirectory = nil
        eventStreamTransport = nil
        attestation = .platformDefault
    }
}
