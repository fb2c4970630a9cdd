import Crypto
import CryptoExtras
import Foundation
import Logging
import TallyAppleJWS

/// Apple's signing keys, fetched when first needed and kept: a token's `kid` is looked up here, and a `kid` not held
/// is fetched for again — at most once per ``minimumRefetchInterval`` (so a flood of made-up `kid`s cannot make the
/// server hammer Apple) — and then refused as ``AppleIDVerificationError/Code/unknownKey``. A key rotation at Apple is
/// so followed without a restart. A set older than ``maximumAge`` is fetched again at the next lookup (keys Apple
/// withdrew stop verifying); if that fetch fails the old set is kept.
///
/// Times are the callers' (`now`, the server's injected clock), never read here. Concurrent lookups that need a fetch
/// share one. Only RSA keys for `RS256` of at least 2048 bits are kept; others in the set are skipped.
public actor AppleKeyCache {
    /// The least time between two fetches started by lookups (not by ``refresh(now:)``).
    public nonisolated let minimumRefetchInterval: TimeInterval
    /// How long a fetched set is used before it is fetched again.
    public nonisolated let maximumAge: TimeInterval

    private let fetcher: any AppleKeyFetching
    private let logger: Logger
    private var keys: [String: _RSA.Signing.PublicKey] = [:]
    private var fetchedAt: Date?
    private var attemptedAt: Date?
    private var inFlight: Task<AppleIDVerificationError?, Never>?
    private var fetches = 0

    /// A cache fetching through `fetcher`; nothing is fetched until the first lookup or ``refresh(now:)``.
    public init(
        fetcher: any AppleKeyFetching, minimumRefetchInterval: TimeInterval = 10, maximumAge: TimeInterval = 24 * 3600,
        logger: Logger = Logger(label: "tally.apple-id")
    ) {
        self.fetcher = fetcher
        self.minimumRefetchInterval = minimumRefetchInterval
        self.maximumAge = maximumAge
        self.logger = logger
    }

    /// The `kid`s held now, sorted.
    public var keyIdentifiers: [String] { keys.keys.sorted() }

    /// How many fetches have been started.
    public var fetchCount: Int { fetches }

    /// Fetches the set now (joining a fetch under way), whatever the interval: to warm the cache at start. Throws
    /// ``AppleIDVerificationError/Code/keysUnavailable`` when it fails; the keys held stay.
    public func refresh(now: Date) async throws(AppleIDVerificationError) {
        if let failure = await fetch(now: now) { throw failure }
    }

    /// The key `kid` names, fetching the set when it is stale, or when `kid` is unknown and the interval allows.
    func key(for kid: String, now: Date) async throws(AppleIDVerificationError) -> _RSA.Signing.PublicKey {
        if isStale(now), mayFetch(now) {
            let failure = await fetch(now: now)
            if let failure, keys.isEmpty { throw failure }
        }
        if let key = keys[kid] { return key }
        if inFlight != nil || mayFetch(now) {
            let failure = await fetch(now: now)
            if let key = keys[kid] { return key }
            if let failure { throw failure }
            throw AppleIDVerificationError(.unknownKey, "the token's kid is not among Apple's keys, fetched again just now")
        }
        if keys.isEmpty {
            throw AppleIDVerificationError(.keysUnavailable, "Apple's keys could not be fetched; the next try is after the refetch interval")
        }
        throw AppleIDVerificationError(.unknownKey, "the token's kid is not among Apple's keys (fetched again less than the refetch interval ago)")
    }

    private func isStale(_ now: Date) -> Bool {
        guard let fetchedAt else { return true }
        return now.timeIntervalSince(fetchedAt) >= maximumAge || now < fetchedAt.addingTimeInterval(-maximumAge)
    }

    private func mayFetch(_ now: Date) -> Bool {
        guard let attemptedAt else { return true }
        // A clock moved back by more than the interval also allows a fetch, so a stuck attempt time never blocks.
        return abs(now.timeIntervalSince(attemptedAt)) >= minimumRefetchInterval
    }

    /// Fetches and installs the set, or joins the fetch under way; the failure, if any.
    private func fetch(now: Date) async -> AppleIDVerificationError? {
        if let inFlight { return await inFlight.value }
        attemptedAt = now
        fetches += 1
        let task = Task { await self.fetchAndInstall(now: now) }
        inFlight = task
        return await task.value
    }

    private func fetchAndInstall(now: Date) async -> AppleIDVerificationError? {
        defer { inFlight = nil }
        let set: AppleJSONWebKeySet
        do {
            set = try await fetcher.fetchKeys()
        } catch {
            logger.warning("apple-id: fetching Apple's keys failed", metadata: ["apple.error": "\(error)"])
            return AppleIDVerificationError(.keysUnavailable, "Apple's keys could not be fetched")
        }
        var usable: [String: _RSA.Signing.PublicKey] = [:]
        for jwk in set.keys {
            guard jwk.kty == "RSA", jwk.alg ?? "RS256" == "RS256", jwk.use ?? "sig" == "sig",
                let modulus = Base64URL.decode(jwk.n), let exponent = Base64URL.decode(jwk.e),
                let key = try? _RSA.Signing.PublicKey(n: modulus, e: exponent)
            else {
                logger.debug("apple-id: a key of the set is skipped (not an RS256 key of at least 2048 bits)", metadata: ["apple.kid": "\(jwk.kid)"])
                continue
            }
            usable[jwk.kid] = key
        }
        guard !usable.isEmpty else {
            logger.warning("apple-id: Apple's key set holds no usable key; the keys held are kept")
            return AppleIDVerificationError(.keysUnavailable, "Apple's key set holds no usable key")
        }
        keys = usable
        fetchedAt = now
        logger.info("apple-id: Apple's keys fetched", metadata: ["apple.kids": "\(usable.keys.sorted().joined(separator: ","))"])
        return nil
    }
}
