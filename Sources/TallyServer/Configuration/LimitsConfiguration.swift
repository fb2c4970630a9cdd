import Foundation
import TallyStore

/// The `limits:` section of the configuration file (`TALLY_CONFIG`): rate limits on every door, the sign-in
/// lockout, the cap on sessions per user, and the proxies whose `X-Forwarded-For` is believed.
///
/// The rate limits are counted in memory per server process (with N processes behind a load balancer an
/// address gets up to N times each); the sign-in lockout and guest sign-ups per address are counted in the
/// database, shared by every process. Guest sign-ups per address stay `guestSignupsPerIPPerHour` (top level).
public struct LimitsConfiguration: Sendable {
    /// Proxies (CIDRs) whose `X-Forwarded-For` gives the client address; none by default.
    public var trustedProxies: [IPNetwork] = []
    /// Password sign-in attempts per client address.
    public var signInPerAddress = RateLimit(30, per: 60)
    /// The lockout per (email, address) and the slow-down per email.
    public var signInLockout = SignInPolicy()
    /// Link attempts per user (a `credential_in_use` answer tells a guest an email exists).
    public var linkPerUser = RateLimit(5, per: 3600)
    /// Link attempts per client address.
    public var linkPerAddress = RateLimit(20, per: 3600)
    /// Refreshes per session.
    public var refreshPerSession = RateLimit(12, per: 3600)
    /// Refused refreshes (unknown, expired, revoked or reused tokens) per client address.
    public var refreshFailuresPerAddress = RateLimit(60, per: 60)
    /// Guest sign-ins per device secret.
    public var guestSignInsPerDevice = RateLimit(20, per: 3600)
    /// Wrong admin keys per client address; beyond it the address gets 429 even with the right key.
    public var adminFailuresPerAddress = RateLimit(10, per: 60)
    /// Live sessions per user; opening one more revokes the oldest.
    public var sessionsPerUser = 50
    /// Sync pushes (`POST /v1/sync/push`, up to 100 mutations each) per user.
    public var syncPushesPerUser = RateLimit(120, per: 60)
    /// Password reset mails asked for (`POST /v1/auth/password/forgot`) per email, whether or not it has an account.
    public var passwordForgotPerEmail = RateLimit(5, per: 3600)
    /// Password reset mails asked for per client address.
    public var passwordForgotPerAddress = RateLimit(20, per: 3600)
    /// Codes presented (`POST /v1/auth/password/reset`, `POST /v1/auth/email/verify`) per client address, right or
    /// wrong; each code also dies after 5 wrong ones.
    public var codeAttemptsPerAddress = RateLimit(30, per: 900)
    /// Verification mails asked for (`POST /v1/auth/email/verify/send`) per user.
    public var verificationMailsPerUser = RateLimit(5, per: 3600)
    /// App Store transactions redeemed per user (`POST /v1/purchases/apple`): each costs signature checks.
    public var purchasesPerUser = RateLimit(60, per: 60)
    /// App Store notifications per client address (`POST /v1/webhooks/appstore`): Apple's few addresses send them
    /// all, in bursts after an outage; a flood of forgeries costs signature checks.
    public var appStoreNotificationsPerAddress = RateLimit(1_200, per: 60)
    /// Sign in with Apple account notifications per client address (`POST /v1/webhooks/apple-id`): as the App Store's.
    public var appleIDNotificationsPerAddress = RateLimit(1_200, per: 60)
    /// App Attest attestations and challenges per client address (`POST /v1/auth/attestation/challenge`, each
    /// attestation verified): each verification costs a chain build and two signature checks.
    public var attestationsPerAddress = RateLimit(60, per: 3600)

    /// The production defaults.
    public init() {}

    /// The `limits:` section as written; every key optional (missing keys keep their defaults).
    ///
    /// ```yaml
    /// limits:
    ///   trustedProxies: [10.0.0.0/8, "fd00::/8"]
    ///   signInPerAddress: {limit: 30, seconds: 60}
    ///   signInLockout: {failures: 5, seconds: 900, accountFailures: 20, maxDelaySeconds: 300}
    ///   sessionsPerUser: 50
    /// ```
    ///
    /// Its keys are ``keys``, decoded and written in that order.
    struct File: Codable, Equatable {
        var trustedProxies: [String]?
        var signInLockout: Lockout?
        var sessionsPerUser: Int?
        /// The rate limits given, by key.
        var rates: [String: Rate] = [:]

        /// A key of the section: one of the three above, or a rate limit (a ``Rate``) setting the property `path`.
        enum Key {
            case trustedProxies, signInLockout, sessionsPerUser
            case rate(any WritableKeyPath<LimitsConfiguration, RateLimit> & Sendable)
        }

        /// Every key of the section, in file order: each property of ``LimitsConfiguration`` by its name.
        static let keys: KeyValuePairs<String, Key> = [
            "trustedProxies": .trustedProxies, "signInPerAddress": .rate(\.signInPerAddress), "signInLockout": .signInLockout,
            "linkPerUser": .rate(\.linkPerUser), "linkPerAddress": .rate(\.linkPerAddress), "refreshPerSession": .rate(\.refreshPerSession),
            "refreshFailuresPerAddress": .rate(\.refreshFailuresPerAddress), "guestSignInsPerDevice": .rate(\.guestSignInsPerDevice),
            "adminFailuresPerAddress": .rate(\.adminFailuresPerAddress), "sessionsPerUser": .sessionsPerUser,
            "syncPushesPerUser": .rate(\.syncPushesPerUser), "passwordForgotPerEmail": .rate(\.passwordForgotPerEmail),
            "passwordForgotPerAddress": .rate(\.passwordForgotPerAddress), "codeAttemptsPerAddress": .rate(\.codeAttemptsPerAddress),
            "verificationMailsPerUser": .rate(\.verificationMailsPerUser), "purchasesPerUser": .rate(\.purchasesPerUser),
            "appStoreNotificationsPerAddress": .rate(\.appStoreNotificationsPerAddress),
            "appleIDNotificationsPerAddress": .rate(\.appleIDNotificationsPerAddress), "attestationsPerAddress": .rate(\.attestationsPerAddress),
        ]

        /// The rate limits of ``keys``, in file order.
        static var rateKeys: [(name: String, path: WritableKeyPath<LimitsConfiguration, RateLimit>)] {
            keys.compactMap { name, key in
                guard case .rate(let path) = key else { return nil }
                return (name, path)
            }
        }

        /// The limits the section gives, the defaults for the keys it does not.
        func configuration() throws -> LimitsConfiguration {
            var limits = LimitsConfiguration()
            try apply(to: &limits)
            return limits
        }

        /// The section that gives exactly `limits`.
        init(effective limits: LimitsConfiguration) {
            trustedProxies = limits.trustedProxies.map(\.description)
            signInLockout = Lockout(effective: limits.signInLockout)
            sessionsPerUser = limits.sessionsPerUser
            for (name, path) in Self.rateKeys { rates[name] = Rate(limits[keyPath: path]) }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: ConfigurationKey.self)
            for (name, key) in Self.keys {
                let codingKey = ConfigurationKey(stringValue: name)
                switch key {
                case .trustedProxies: trustedProxies = try container.decodeIfPresent([String].self, forKey: codingKey)
                case .signInLockout: signInLockout = try container.decodeIfPresent(Lockout.self, forKey: codingKey)
                case .sessionsPerUser: sessionsPerUser = try container.decodeIfPresent(Int.self, forKey: codingKey)
                case .rate: rates[name] = try container.decodeIfPresent(Rate.self, forKey: codingKey)
                }
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: ConfigurationKey.self)
            for (name, key) in Self.keys {
                let codingKey = ConfigurationKey(stringValue: name)
                switch key {
                case .trustedProxies: try container.encodeIfPresent(trustedProxies, forKey: codingKey)
                case .signInLockout: try container.encodeIfPresent(signInLockout, forKey: codingKey)
                case .sessionsPerUser: try container.encodeIfPresent(sessionsPerUser, forKey: codingKey)
                case .rate: try container.encodeIfPresent(rates[name], forKey: codingKey)
                }
            }
        }

        private func apply(to limits: inout LimitsConfiguration) throws {
            if let trustedProxies {
                limits.trustedProxies = try trustedProxies.map { cidr in
                    guard let network = IPNetwork(cidr: cidr) else {
                        throw ConfigurationError("limits.trustedProxies: '\(cidr)' is not an IPv4 or IPv6 address or CIDR")
                    }
                    return network
                }
            }
            for (name, path) in Self.rateKeys {
                guard let rate = rates[name] else { continue }
                guard rate.limit >= 1, rate.seconds.value > 0, rate.seconds.value <= 86_400 else {
                    throw ConfigurationError("limits.\(name): limit must be at least 1 and seconds between 0 and 86400")
                }
                limits[keyPath: path] = RateLimit(rate.limit, per: rate.seconds.value)
            }
            if let signInLockout { limits.signInLockout = try signInLockout.policy() }
            if let sessionsPerUser {
                guard sessionsPerUser >= 1 else { throw ConfigurationError("limits.sessionsPerUser must be at least 1") }
                limits.sessionsPerUser = sessionsPerUser
            }
        }
    }

    /// `{limit: 30, seconds: 60}`.
    struct Rate: Codable, Equatable {
        var limit: Int
        var seconds: FileSeconds

        init(_ rate: RateLimit) { (limit, seconds) = (rate.limit, FileSeconds(rate.period)) }
    }

    /// `{failures: 5, seconds: 900, accountFailures: 20, maxDelaySeconds: 300}`; missing keys keep the defaults.
    struct Lockout: Codable, Equatable {
        var failures: Int?
        var seconds: FileSeconds?
        var accountFailures: Int?
        var maxDelaySeconds: FileSeconds?

        init(effective policy: SignInPolicy) {
            (failures, seconds) = (policy.pairFailures, FileSeconds(policy.window))
            (accountFailures, maxDelaySeconds) = (policy.accountFailures, FileSeconds(policy.maxDelay))
        }

        func policy() throws -> SignInPolicy {
            var policy = SignInPolicy()
            policy.pairFailures = failures ?? policy.pairFailures
            policy.window = seconds?.value ?? policy.window
            policy.accountFailures = accountFailures ?? policy.accountFailures
            policy.maxDelay = maxDelaySeconds?.value ?? policy.maxDelay
            // Failures are purged a day after the latest (Housekeeping), so a window cannot be longer.
            guard policy.pairFailures >= 1, policy.accountFailures >= 1, policy.window > 0, policy.window <= 86_400,
                policy.maxDelay >= 0, policy.maxDelay <= policy.window
            else {
                throw ConfigurationError(
                    "limits.signInLockout: failures and accountFailures must be at least 1, seconds between 0 and 86400, "
                        + "maxDelaySeconds between 0 and seconds")
            }
            return policy
        }
    }
}

/// A number of seconds in the file: any number, written back as a whole number when it is one (`60`, not
/// YAML's `6e+1`).
struct FileSeconds: Codable, Equatable {
    var value: Double

    init(_ value: Double) { self.value = value }

    init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(Double.self) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if abs(value) < 1e15, let whole = Int64(exactly: value) { try container.encode(whole) } else { try container.encode(value) }
    }
}
