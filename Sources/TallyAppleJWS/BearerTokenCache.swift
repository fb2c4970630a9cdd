import Foundation
import Synchronization

/// A bearer token reused while it is young enough, shared by copies of the client that holds it: signing once per
/// window, not per call. A token is reused from the instant it was signed until `reuse` later; a clock that moved back
/// before it, a cleared cache or an older one gets a new token.
public final class BearerTokenCache: Sendable {
    private let cached = Mutex<(token: String, issuedAt: Date, reuseUntil: Date)?>(nil)

    /// An empty cache.
    public init() {}

    /// The cached token if `now` is within its reuse window; else the one `sign` makes, kept for `reuse` from `now`
    /// (never, when `reuse` is not positive).
    public func token<Failure: Error>(at now: Date, reuse: TimeInterval, sign: () throws(Failure) -> String) throws(Failure) -> String {
        let kept = cached.withLock { cached -> String? in
            guard let cached, cached.issuedAt <= now, now < cached.reuseUntil else { return nil }
            return cached.token
        }
        if let kept { return kept }
        let token = try sign()
        cached.withLock { $0 = (token, now, now.addingTimeInterval(reuse)) }
        return token
    }

    /// Forgets the token (after a refusal of the credentials: a key rotated or a clock off), so the next call signs anew.
    public func clear() { cached.withLock { $0 = nil } }
}
