import Foundation
import Logging
import TallyAPI
import TallyStore

/// What the identity routes (``IdentityController``, ``AccountRecoveryController``, ``AppleSignInController``,
/// ``AttestationController``) admit callers with: the clock and caller keys their throttles, lockouts and log lines
/// use, the throttles themselves (one set, per process), the limits, the bcrypt cost of new password hashes, and the
/// sessions they open and end.
struct Admission: Sendable {
    /// The clock every door and lockout reads.
    let clock: any TallyClock
    /// Client addresses and keyed hashes, for throttles, lockouts and log lines.
    let keys: CallerKeys
    /// The identity routes' rate limits (per process).
    let throttles: IdentityThrottles
    /// Sessions per user, the sign-in lockout, and the rates the throttles enforce.
    let limits: LimitsConfiguration
    /// bcrypt's cost for the password hashes the routes make.
    let bcryptCost: UInt8
    /// Opens and ends the sessions.
    let sessions: SessionKeeper

    /// Admits callers under `limits` (its throttles built from them), naming them with `keys`.
    init(clock: any TallyClock, keys: CallerKeys, limits: LimitsConfiguration, bcryptCost: UInt8, sessions: SessionKeeper) {
        self.clock = clock
        self.keys = keys
        self.throttles = IdentityThrottles(limits)
        self.limits = limits
        self.bcryptCost = bcryptCost
        self.sessions = sessions
    }

    /// Where a request to `route` came in, now.
    func door(_ route: String, logger: Logger) -> Door {
        Door(route: route, now: clock.now, logger: logger, keys: keys)
    }
}
