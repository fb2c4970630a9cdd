import Foundation

/// One daily quota of the caller.
public struct Quota: Codable, Hashable, Sendable {
    /// The quota's name from the server configuration.
    public var name: String
    /// Free uses per day.
    public var limit: Int
    /// Free uses spent in the current window.
    public var used: Int
    /// Free uses left in the current window.
    public var remaining: Int
    /// When the current window ends: the user's next local midnight (for a guest whose installation's
    /// count limits it, the end of the installation's window).
    public var resetsAt: Date
    /// `true` while the user is premium: actions on this quota are free and uncounted.
    public var unlimited: Bool

    /// Creates a quota view.
    public init(name: String, limit: Int, used: Int, resetsAt: Date, unlimited: Bool) {
        self.name = name
        self.limit = limit
        self.used = used
        self.remaining = max(0, limit - used)
        self.resetsAt = resetsAt
        self.unlimited = unlimited
    }
}

/// `GET /v1/quotas`.
public struct QuotaList: Codable, Hashable, Sendable {
    /// Every configured quota.
    public var items: [Quota]
    /// Creates the list.
    public init(items: [Quota]) { self.items = items }
}

/// The price of one metered action.
public struct ActionPrice: Codable, Hashable, Sendable {
    /// The action's name, as in `POST /v1/actions/{name}`.
    public var name: String
    /// The daily quota it draws on first, if any.
    public var quota: String?
    /// Tokens charged once the quota is used up (or always, without a quota); `null` for quota-only actions.
    public var tokens: Int64?
    /// Creates a price.
    public init(name: String, quota: String?, tokens: Int64?) {
        self.name = name
        self.quota = quota
        self.tokens = tokens
    }
}

/// `GET /v1/actions`: the price list.
public struct ActionList: Codable, Hashable, Sendable {
    /// Every configured action.
    public var items: [ActionPrice]
    /// Creates the list.
    public init(items: [ActionPrice]) { self.items = items }
}

/// How a metered action was paid for.
public enum ActionPayment: String, Codable, Hashable, Sendable {
    /// One free use of the action's daily quota.
    case quota
    /// The action's price in tokens.
    case tokens
    /// Free under an active premium entitlement.
    case premium
}

/// `POST /v1/actions/{name}` success: how it was paid and the authoritative state after it.
public struct ActionResult: Codable, Hashable, Sendable {
    /// The action performed.
    public var action: String
    /// How it was paid.
    public var paidWith: ActionPayment
    /// Tokens charged (0 unless paid with tokens).
    public var tokensCharged: Int64
    /// The wallet after the action.
    public var wallet: Wallet
    /// Every quota after the action.
    public var quotas: [Quota]

    /// Creates the result.
    public init(action: String, paidWith: ActionPayment, tokensCharged: Int64, wallet: Wallet, quotas: [Quota]) {
        self.action = action
        self.paidWith = paidWith
        self.tokensCharged = tokensCharged
        self.wallet = wallet
        self.quotas = quotas
    }
}

/// `GET /health` and `GET /ready`.
public struct HealthStatus: Codable, Hashable, Sendable {
    /// `ok`, or what is wrong.
    public var status: String
    /// Creates the status.
    public init(status: String) { self.status = status }
}
