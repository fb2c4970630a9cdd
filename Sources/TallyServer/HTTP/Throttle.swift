import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization
import TallyAPI
import TallyStore

/// One named rate limit of a door (per process): a ``RateLimiter`` whose refusals become `429 rate_limited`
/// with `Retry-After`, logged once per key per period (a flood does not flood the log), with the route, the
/// limit's name and a keyed hash of the key — never the key itself.
struct Throttle: Sendable {
    /// The limit's name in logs (`sign-in per address`).
    let name: String
    let limiter: RateLimiter

    /// A throttle named `name` enforcing `rate`.
    init(_ name: String, _ rate: RateLimit) {
        self.name = name
        self.limiter = RateLimiter(rate)
    }

    /// Counts one event of `key`; over the limit, throws 429 (counting nothing).
    func acquire(_ key: String, _ door: Door) throws {
        try enforce(limiter.acquire(key, now: door.now), key: key, door)
    }

    /// Throws 429 while `key` is over the limit, counting nothing: for limits on failures, with ``record(_:_:)``.
    func check(_ key: String, _ door: Door) throws {
        try enforce(limiter.check(key, now: door.now), key: key, door)
    }

    /// Counts one failure of `key`.
    func record(_ key: String, _ door: Door) {
        limiter.record(key, now: door.now)
    }

    private func enforce(_ verdict: RateLimiter.Verdict, key: String, _ door: Door) throws {
        guard case .limited(let retryAfter, let first) = verdict else { return }
        if first { door.logRefusal(limit: name, key: key) }
        throw APIError.rateLimited(retryAfter: retryAfter)
    }
}

/// Where a request came in, for throttles and security logs: the route, the time, the logger, and how to
/// hash a key for a log line.
struct Door: Sendable {
    /// `POST /v1/auth/sign-in`.
    let route: String
    let now: Date
    let logger: Logger
    /// Hashes a key for a log line.
    let keys: CallerKeys

    /// Logs a 429 (once per key and period: the caller decides).
    func logRefusal(limit: String, key: String) {
        logger.notice(
            "rate limited",
            metadata: ["tally.route": .string(route), "tally.limit": .string(limit), "tally.key": .string(keys.logKey(key))])
    }
}

extension APIError {
    /// `429 rate_limited` with `Retry-After` in whole seconds (≥ 1).
    static func rateLimited(retryAfter seconds: Int) -> APIError {
        APIError(.rateLimited, "Too many requests; retry after \(max(1, seconds)) seconds.", headers: [.retryAfter: "\(max(1, seconds))"])
    }
}

/// How the server names a caller where it limits and logs it: the client address (through the configured trusted
/// proxies), and keyed hashes of addresses and emails under the key shared through the database.
struct CallerKeys: Sendable {
    /// The proxies whose `X-Forwarded-For` is believed (``LimitsConfiguration/trustedProxies``).
    let trustedProxies: [IPNetwork]
    /// Holds the hashing key, installed before the server serves.
    let secrets: RuntimeSecrets

    /// The client address a request is limited under (``ClientIP/limitKey``: IPv4 address or IPv6 /64),
    /// through the configured trusted proxies; `unknown` without a TCP peer.
    func clientAddress(_ request: Request, peer: SocketAddress?) -> String {
        let forwarded = request.headers[values: .xForwardedFor]
        let client = ClientAddress.resolve(
            peer: peer.flatMap(ClientIP.init), forwardedFor: forwarded, trusted: trustedProxies)
        return client?.limitKey ?? "unknown"
    }

    /// A short keyed hash of a rate-limit key (an address, an email's hash, a session) for log lines: the
    /// same key gives the same hash on every instance, and the hash reveals nothing without the server's key.
    func logKey(_ key: String) -> String {
        String(Secrets.hmac("log:" + key, key: secrets.ipHashKey.withLock { $0 }).prefix(16))
    }

    /// The keyed hash under which the database counts a low-entropy value (a client address for guest
    /// sign-ups and sign-in failures, an email for sign-in failures): the same on every instance.
    func keyedHash(_ value: String) -> String {
        Secrets.hmac(value, key: secrets.ipHashKey.withLock { $0 })
    }
}

extension HTTPField.Name {
    /// `X-Forwarded-For`.
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}
