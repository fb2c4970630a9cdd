/// A daily free quota, from the server configuration.
public struct QuotaSpec: Sendable, Hashable, Codable {
    /// Name used by actions and shown to clients.
    public var name: String
    /// Free uses per local day.
    public var daily: Int

    /// Creates a quota.
    public init(name: String, daily: Int) {
        self.name = name
        self.daily = daily
    }
}

/// A metered action, from the server configuration.
public struct ActionSpec: Sendable, Hashable, Codable {
    /// Name in `POST /v1/actions/{name}`.
    public var name: String
    /// Quota drawn on first, if any.
    public var quota: String?
    /// Token price once the quota is used up, or always; `nil` for quota-only actions.
    public var tokens: Int64?

    /// Creates an action.
    public init(name: String, quota: String? = nil, tokens: Int64? = nil) {
        self.name = name
        self.quota = quota
        self.tokens = tokens
    }
}

/// What is sold and what is free: the quotas, the actions and the sign-up grant.
public struct Catalog: Sendable, Hashable {
    /// Tokens granted to every new account.
    public var signupGrant: Int64
    /// Daily quotas, in configuration order.
    public var quotas: [QuotaSpec]
    /// Metered actions, in configuration order.
    public var actions: [ActionSpec]

    /// Creates a catalogue, checking that it is coherent.
    public init(signupGrant: Int64, quotas: [QuotaSpec], actions: [ActionSpec]) throws(CatalogError) {
        guard signupGrant >= 0, signupGrant <= Limits.maxAmount else {
            throw CatalogError("signupGrant must be between 0 and \(Limits.maxAmount)")
        }
        var quotaNames = Set<String>()
        for quota in quotas {
            guard Limits.isValidName(quota.name) else { throw CatalogError("invalid quota name '\(quota.name)'") }
            guard quotaNames.insert(quota.name).inserted else { throw CatalogError("duplicate quota '\(quota.name)'") }
            guard quota.daily >= 1, quota.daily <= 1_000_000 else {
                throw CatalogError("quota '\(quota.name)': daily must be between 1 and 1000000")
            }
        }
        var actionNames = Set<String>()
        for action in actions {
            guard Limits.isValidName(action.name) else { throw CatalogError("invalid action name '\(action.name)'") }
            guard actionNames.insert(action.name).inserted else { throw CatalogError("duplicate action '\(action.name)'") }
            if let quota = action.quota, !quotaNames.contains(quota) {
                throw CatalogError("action '\(action.name)' uses unknown quota '\(quota)'")
            }
            if let tokens = action.tokens, tokens < 1 || tokens > Limits.maxAmount {
                throw CatalogError("action '\(action.name)': tokens must be between 1 and \(Limits.maxAmount)")
            }
            if action.quota == nil, action.tokens == nil {
                throw CatalogError("action '\(action.name)' needs a quota, a token price or both")
            }
        }
        self.signupGrant = signupGrant
        self.quotas = quotas
        self.actions = actions
    }

    /// The default when no configuration is given: three free readings a day, then 5 tokens each;
    /// AI queries at 3 tokens; no sign-up grant.
    public static let standard = try! Catalog(
        signupGrant: 0,
        quotas: [QuotaSpec(name: "readings", daily: 3)],
        actions: [
            ActionSpec(name: "reading", quota: "readings", tokens: 5),
            ActionSpec(name: "ai.query", tokens: 3),
        ]
    )

    /// The action named `name`, if configured.
    public func action(named name: String) -> ActionSpec? { actions.first { $0.name == name } }

    /// The quota named `name`, if configured.
    public func quota(named name: String) -> QuotaSpec? { quotas.first { $0.name == name } }
}

/// A configuration that cannot be served.
public struct CatalogError: Error, CustomStringConvertible {
    /// What is wrong.
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Bounds on user input, shared by the server's validation and the stores' checks.
public enum Limits {
    /// The largest amount of tokens in one grant, hold or capture.
    public static let maxAmount: Int64 = 1_000_000_000
    /// The longest hold, in seconds.
    public static let maxHoldSeconds = 86_400

    /// Names of quotas and actions: 1–64 of `a-z A-Z 0-9 . _ -`.
    public static func isValidName(_ name: String) -> Bool {
        guard (1...64).contains(name.utf8.count) else { return false }
        return name.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }
}
