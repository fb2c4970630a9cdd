import Foundation
import TallyAPI

/// A server read the SDK caches: its cache key, where it is fetched from, and how long it stays fresh.
public struct Query<Value: Codable & Sendable>: Sendable {
    /// The cache key; keys sharing a prefix can be invalidated together (`"wallet"`, `"habits/…"`).
    public var key: String
    /// The path to GET, e.g. `/v1/wallet`.
    public var path: String
    /// The route template for metrics, e.g. `GET /v1/wallet`.
    public var operation: String
    /// Seconds after confirmation during which the value is fresh (served without a request).
    public var staleAfter: TimeInterval
    /// The end of a value's freshness that the value itself states, if sooner than `staleAfter` (a daily
    /// generation's ``DailyGeneration/expiresAt``, the user's next local midnight); `nil` for none.
    public var freshUntil: (@Sendable (Value) -> Date?)?
    /// Seconds after which a stale value is no longer served while revalidating: `fetch` waits for the server.
    /// Observers and synchronous reads still show it (marked stale), so no network still shows the last known value.
    public var maxAge: TimeInterval
    /// Whether a newly confirmed value may replace the current one; the wallet's version never goes back.
    public var supersedes: @Sendable (_ new: Value, _ current: Value) -> Bool
    /// False for data that belongs to no user (the price list): fetched without the session, kept across
    /// sign-out, and persisted under ``CacheNamespace/shared`` rather than the user's namespace.
    public var isUserData: Bool

    /// Creates a query.
    public init(
        key: String, path: String, operation: String? = nil, staleAfter: TimeInterval = 0, maxAge: TimeInterval = 86_400,
        isUserData: Bool = true, supersedes: @escaping @Sendable (_ new: Value, _ current: Value) -> Bool = { _, _ in true },
        freshUntil: (@Sendable (Value) -> Date?)? = nil
    ) {
        self.key = key
        self.path = path
        self.operation = operation ?? "GET \(path)"
        self.staleAfter = staleAfter
        self.freshUntil = freshUntil
        self.maxAge = maxAge
        self.isUserData = isUserData
        self.supersedes = supersedes
    }
}

extension Query where Value == Wallet {
    /// The signed-in user's wallet; a confirmation with a lower version than the shown one is ignored.
    public static func wallet(staleAfter: TimeInterval = 30) -> Self {
        Query(key: "wallet", path: "/v1/wallet", staleAfter: staleAfter) { new, current in new.version >= current.version }
    }
}

extension Query where Value == QuotaList {
    /// Today's free quotas of the signed-in user; a confirmation that is behind the shown one is ignored.
    public static func quotas(staleAfter: TimeInterval = 30) -> Self {
        Query(key: "quotas", path: "/v1/quotas", staleAfter: staleAfter) { new, current in !new.isBehind(current) }
    }
}

extension QuotaList {
    /// Whether some quota here shows an earlier window than in `other`, or fewer uses in the same window.
    ///
    /// Quotas carry no version, but within a window the server only ever counts uses up, and windows only move
    /// forward: two actions answered out of order cannot make the display go back to the older count.
    func isBehind(_ other: QuotaList) -> Bool {
        let others = Dictionary(other.items.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        return items.contains { quota in
            guard let known = others[quota.name] else { return false }
            return quota.resetsAt < known.resetsAt || (quota.resetsAt == known.resetsAt && quota.used < known.used)
        }
    }
}

extension Query where Value == ActionList {
    /// The price list: what each action costs. Changes rarely; belongs to no user (kept across sign-out).
    public static func actions(staleAfter: TimeInterval = 3600) -> Self {
        Query(key: "actions", path: "/v1/actions", staleAfter: staleAfter, maxAge: 30 * 86_400, isUserData: false)
    }
}

extension Query where Value == Me {
    /// The signed-in user's profile.
    public static func me(staleAfter: TimeInterval = 300) -> Self {
        Query(key: "me", path: "/v1/me", staleAfter: staleAfter)
    }
}

/// What an observer sees of one cached value.
public struct QueryState<Value: Sendable>: Sendable {
    /// The value to show: the last confirmed value with pending optimistic changes applied; nil before the first load.
    public var value: Value?
    /// True when the confirmed value is older than its freshness window, was invalidated, or came from disk.
    public var isStale: Bool
    /// True while a request for this key is in flight.
    public var isFetching: Bool
    /// The last fetch's failure, cleared by the next value the server confirms (a fetch, a mutation's answer)
    /// or ``Client/setValue(_:for:)``.
    public var error: ClientError?
    /// When the server last confirmed the value.
    public var confirmedAt: Date?
    /// How many optimistic changes are applied on top of the confirmed value.
    public var pendingMutations: Int

    /// Creates a state.
    @inlinable
    public init(value: Value?, isStale: Bool, isFetching: Bool, error: ClientError?, confirmedAt: Date?, pendingMutations: Int) {
        self.value = value
        self.isStale = isStale
        self.isFetching = isFetching
        self.error = error
        self.confirmedAt = confirmedAt
        self.pendingMutations = pendingMutations
    }

    /// An empty state: nothing loaded yet.
    public static var empty: Self { QueryState(value: nil, isStale: true, isFetching: false, error: nil, confirmedAt: nil, pendingMutations: 0) }
}
