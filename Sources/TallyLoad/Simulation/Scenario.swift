import Foundation

/// How requests arrive during the measured phase.
public enum ArrivalMode: Sendable, Hashable, Codable {
    /// Open loop: `perSecond` operations start on a fixed schedule whatever the server's speed, each
    /// measured from its scheduled start (so a slow server cannot hide queueing: no coordinated omission).
    case open(perSecond: Double)
    /// Closed loop: `workers` tasks each start the next operation when the previous one ends.
    case closed(workers: Int)
}

/// What a simulated app user does when an operation arrives for it.
public enum OperationKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// `GET /v1/wallet`, revalidating with the last `ETag` (mostly 304).
    case walletRead = "wallet.read"
    /// `GET /v1/quotas`.
    case quotasRead = "quotas.read"
    /// `POST /v1/actions/{quota action}`: free while the daily quota lasts, then tokens.
    case quotaAction = "action.quota"
    /// `POST /v1/actions/{token action}`.
    case tokenAction = "action.tokens"
    /// `POST /v1/wallet/holds`, then capture or release it.
    case hold = "hold"
    /// `POST /admin/v1/users/{id}/grants` from the app's backend.
    case grant = "admin.grant"
    /// A metered action abandoned mid-flight (connection closed), then retried with the same key.
    case abandonedAction = "action.abandoned"
    /// A request that must be refused with a 4xx and change nothing.
    case badRequest = "bad-request"
    /// An SDK app user opening a screen: wallet and quotas read by several views at once.
    case sdkScreen = "sdk.screen"
    /// An SDK app user performing an action optimistically.
    case sdkAction = "sdk.action"
    /// A syncing user making 1–5 changes to its habit log and pushing its outbox.
    case syncPush = "sync.push"
    /// A syncing user pulling from its cursor.
    case syncPull = "sync.pull"
}

/// The weights of the session mix: how often each operation is chosen, per simulated user kind.
public struct OperationMix: Sendable, Hashable, Codable {
    /// Weights for users that speak HTTP directly.
    public var raw: [OperationKind: Int]
    /// Weights for users driven through the TallyClient SDK.
    public var sdk: [OperationKind: Int]
    /// Weights for users that sync documents (each also keeps an event stream open and pulls on its events).
    public var sync: [OperationKind: Int] = [.syncPush: 60, .syncPull: 10, .walletRead: 20, .tokenAction: 10]

    /// The default mix: reads dominate (as in a real app), a quarter are metered actions.
    public static let standard = OperationMix(
        raw: [
            .walletRead: 40, .quotasRead: 12, .quotaAction: 14, .tokenAction: 14, .hold: 8, .grant: 5,
            .abandonedAction: 3, .badRequest: 4,
        ],
        sdk: [.sdkScreen: 75, .sdkAction: 25])

    /// Creates a mix.
    public init(raw: [OperationKind: Int], sdk: [OperationKind: Int]) {
        self.raw = raw
        self.sdk = sdk
    }

    /// The operation for a uniform draw `u` in [0, 1) among `weights` (pure; stable order).
    public static func pick(_ u: Double, from weights: [OperationKind: Int]) -> OperationKind {
        let ordered = OperationKind.allCases.compactMap { kind in weights[kind].flatMap { $0 > 0 ? (kind, $0) : nil } }
        let total = ordered.reduce(0) { $0 + $1.1 }
        var target = Int(u * Double(total))
        for (kind, weight) in ordered {
            if target < weight { return kind }
            target -= weight
        }
        return ordered.last?.0 ?? .walletRead
    }
}

/// The open-loop schedule: when the `index`-th operation is due, and how many are due by `elapsed` (pure).
public struct ArrivalSchedule: Sendable, Hashable {
    /// Operations per second.
    public var perSecond: Double

    /// Creates a schedule.
    public init(perSecond: Double) { self.perSecond = perSecond }

    /// The scheduled start of operation `index`, from the start of the phase.
    public func start(of index: Int) -> Duration { .nanoseconds(Int64((Double(index) / perSecond * 1e9).rounded())) }

    /// How many operations are due at `elapsed` (operation 0 is due at once).
    public func due(at elapsed: Duration) -> Int {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Int((seconds * perSecond).rounded(.down)) + 1
    }
}

/// Everything one load run needs to know.
public struct LoadOptions: Sendable {
    /// Base URLs of the servers; users are spread over them round-robin.
    public var servers: [URL]
    /// Base URLs of the servers' admin listeners, in the same order (grants and the books check go there).
    public var adminServers: [URL]
    /// Connections to each admin listener, shared by that server's users (the app's backend).
    public var adminConnections = 32
    /// The server's admin key (for grants and the books check).
    public var adminKey: String
    /// Simulated users, each with its own guest identity and connection.
    public var users = 10_000
    /// How many of them are driven through the real TallyClient SDK.
    public var sdkUsers = 200
    /// How many of them sync a habit log (push, pull, an event stream each); the server must declare
    /// ``SyncUser/collection`` (``ServerFleet/configuration`` does).
    public var syncUsers = 0
    /// Arrival mode of the measured phase.
    public var mode = ArrivalMode.open(perSecond: 2_000)
    /// Length of the measured phase.
    public var duration = Duration.seconds(60)
    /// Requests in flight at once while users sign in and get their first grant.
    public var setupConcurrency = 256
    /// Tokens each user is granted at setup.
    public var initialGrant: Int64 = 40
    /// The session mix.
    public var mix = OperationMix.standard
    /// Seed of the random choices (users, operations, amounts).
    public var seed: UInt64 = 1
    /// How long a request may take before it is abandoned and retried: the SDK's default for writes. An
    /// overloaded server then shows as latency, not as a storm of reconnects (every abandoned request is
    /// a new connection, and a server holding 10,000 of them pays for each close; see benchmarks/loadtest-runs-2026-11-22-23.md, "Reconnect storms").
    public var requestTimeout = Duration.seconds(30)
    /// How long a mutation is retried (same Idempotency-Key) before its outcome counts as unsettled.
    public var settleDeadline = Duration.seconds(90)

    /// Options for `servers` (whose admin listeners are `adminServers`) with the defaults of the 10,000-user scenario.
    public init(servers: [URL], adminServers: [URL], adminKey: String) {
        self.servers = servers
        self.adminServers = adminServers
        self.adminKey = adminKey
    }
}
