import Foundation

/// Failed sign-ins remembered for one (email, client address) pair, or for one email across every address.
public struct SignInFailures: Sendable, Hashable {
    /// Failures since the count last started over.
    public var count: Int
    /// The latest failure.
    public var lastAt: Date
    /// Until when the pair is locked (pairs only).
    public var lockedUntil: Date?

    /// Creates the record.
    public init(count: Int, lastAt: Date, lockedUntil: Date? = nil) {
        self.count = count
        self.lastAt = lastAt
        self.lockedUntil = lockedUntil
    }
}

/// What ``SignInPolicy/decide(pair:account:now:)`` answers for one sign-in attempt.
public enum SignInDecision: Sendable, Hashable {
    /// Check the password. The attempt is already counted as a failure in `pair` and `account` (the caller
    /// stores both, then forgets them if the password is right); `locksPair` when this failure locks the pair.
    case admit(pair: SignInFailures, account: SignInFailures, locksPair: Bool)
    /// Refuse without checking the password; try again after `retryAfter` seconds.
    case refuse(retryAfter: TimeInterval)
}

/// The sign-in lockout: a pure rule, applied by the stores atomically so that every server process on one
/// database (and a restarted one) counts the same failures.
///
/// - Failures of one (email, address) pair lock that pair, and only it, for ``window`` once there are
///   ``pairFailures`` of them within ``window`` of each other: an attacker locks out their own address,
///   never the account.
/// - Failures across every address beyond ``accountFailures`` slow the account down: each pair that has
///   failed must wait, after its own latest failure, `2^(failures − accountFailures)` seconds, at most
///   ``maxDelay``. An address without failures on the account is never delayed, so the real user signs in
///   from their own address while an attacker hammers the account from elsewhere.
/// - Nothing is permanent: counts start over ``window`` after their latest failure, and a correct password
///   forgets the account's count and its own pair's.
///
/// Attempts are counted *before* the password is checked, so concurrent attempts cannot outrun the count.
/// Unknown emails are counted like known ones, so a lockout reveals nothing about which emails exist.
public struct SignInPolicy: Sendable, Hashable {
    /// Failures of one pair that lock it.
    public var pairFailures = 5
    /// How long failures are remembered after the latest, and how long a lock lasts.
    public var window: TimeInterval = 15 * 60
    /// Failures of the account (every address) after which every failing pair is slowed down.
    public var accountFailures = 20
    /// The longest delay the account-wide count imposes.
    public var maxDelay: TimeInterval = 5 * 60

    /// The defaults: 5 failures lock a pair for 15 minutes; beyond 20 failures of the account, delays up to 5 minutes.
    public init() {}

    /// Whether an attempt with these stored failures may check its password now.
    public func decide(pair: SignInFailures?, account: SignInFailures?, now: Date) -> SignInDecision {
        let pair = current(pair, now: now)
        let account = current(account, now: now)
        if let lockedUntil = pair?.lockedUntil, lockedUntil > now {
            return .refuse(retryAfter: lockedUntil.timeIntervalSince(now))
        }
        if let pair, let account, account.count >= accountFailures {
            let allowedAt = pair.lastAt.addingTimeInterval(delay(afterAccountFailures: account.count))
            if allowedAt > now { return .refuse(retryAfter: allowedAt.timeIntervalSince(now)) }
        }
        let pairCount = (pair?.count ?? 0) + 1
        let locks = pairCount >= pairFailures
        return .admit(
            pair: SignInFailures(count: pairCount, lastAt: now, lockedUntil: locks ? now.addingTimeInterval(window) : nil),
            account: SignInFailures(count: (account?.count ?? 0) + 1, lastAt: now), locksPair: locks)
    }

    /// The wait after a pair's failure once the account has `failures` (≥ ``accountFailures``) in all.
    public func delay(afterAccountFailures failures: Int) -> TimeInterval {
        let exponent = min(max(failures - accountFailures, 0), 62)
        return min(maxDelay, Double(UInt64(1) << UInt64(exponent)))
    }

    /// The record as it counts at `now`: `nil` once its latest failure (and lock) is over a window old.
    func current(_ failures: SignInFailures?, now: Date) -> SignInFailures? {
        guard let failures else { return nil }
        if let lockedUntil = failures.lockedUntil { return lockedUntil > now ? failures : nil }
        return failures.lastAt.addingTimeInterval(window) > now ? failures : nil
    }
}
