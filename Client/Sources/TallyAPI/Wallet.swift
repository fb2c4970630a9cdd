import Foundation

/// A user's token wallet: `available = balance - held`.
public struct Wallet: Codable, Hashable, Sendable {
    /// Tokens owned, including those held.
    public var balance: Int64
    /// Tokens reserved by open holds.
    public var held: Int64
    /// Tokens that can be spent now.
    public var available: Int64
    /// Increases with every change; the `ETag` of `GET /v1/wallet`.
    public var version: Int64

    /// Creates a wallet view.
    public init(balance: Int64, held: Int64, version: Int64) {
        self.balance = balance
        self.held = held
        self.available = balance - held
        self.version = version
    }
}

/// One row of the append-only ledger.
public struct LedgerEntry: Codable, Hashable, Sendable {
    /// Ledger-wide increasing id.
    public var id: Int64
    /// `grant`, `debit`, `hold`, `capture`, `release` or `expire`.
    public var kind: String
    /// Signed change to `balance`.
    public var amount: Int64
    /// Signed change to `held`.
    public var heldChange: Int64
    /// The balance right after this entry.
    public var balanceAfter: Int64
    /// Why: the action name, the grant's reason, the hold id.
    public var reason: String?
    /// When it was written.
    public var createdAt: Date

    /// Creates an entry view.
    public init(
        id: Int64, kind: String, amount: Int64, heldChange: Int64, balanceAfter: Int64, reason: String?,
        createdAt: Date
    ) {
        self.id = id
        self.kind = kind
        self.amount = amount
        self.heldChange = heldChange
        self.balanceAfter = balanceAfter
        self.reason = reason
        self.createdAt = createdAt
    }
}

/// A page of results, newest first; pass `nextCursor` back as `cursor` for the next page.
public struct Page<Item: Codable & Hashable & Sendable>: Codable, Hashable, Sendable {
    /// The items on this page.
    public var items: [Item]
    /// Opaque cursor of the next page, `null` on the last one.
    public var nextCursor: String?
    /// Creates a page.
    public init(items: [Item], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// `POST /v1/wallet/holds`: reserve tokens for work whose cost is known afterwards.
public struct CreateHoldRequest: Codable, Hashable, Sendable {
    /// Tokens to reserve (1 to 1,000,000,000).
    public var amount: Int64
    /// Seconds until the hold releases itself (1 to 86,400).
    public var ttlSeconds: Int
    /// Creates the request.
    public init(amount: Int64, ttlSeconds: Int) {
        self.amount = amount
        self.ttlSeconds = ttlSeconds
    }
}

/// `POST /v1/wallet/holds/{id}/capture`: charge up to the held amount; the rest is released.
public struct CaptureHoldRequest: Codable, Hashable, Sendable {
    /// Tokens to charge (0 to the held amount).
    public var amount: Int64
    /// Creates the request.
    public init(amount: Int64) { self.amount = amount }
}

/// A hold and the wallet after the call that returned it.
public struct Hold: Codable, Hashable, Sendable {
    /// The hold's id.
    public var holdId: String
    /// Tokens reserved.
    public var amount: Int64
    /// `open`, `captured`, `released` or `expired`.
    public var status: String
    /// Tokens charged when captured.
    public var capturedAmount: Int64?
    /// When an open hold releases itself.
    public var expiresAt: Date
    /// The wallet after this call.
    public var wallet: Wallet

    /// Creates a hold view.
    public init(holdId: String, amount: Int64, status: String, capturedAmount: Int64?, expiresAt: Date, wallet: Wallet) {
        self.holdId = holdId
        self.amount = amount
        self.status = status
        self.capturedAmount = capturedAmount
        self.expiresAt = expiresAt
        self.wallet = wallet
    }
}

/// `POST /admin/v1/users/{userId}/grants`.
public struct GrantRequest: Codable, Hashable, Sendable {
    /// Tokens to add (1 to 1,000,000,000).
    public var amount: Int64
    /// Why, for the ledger (at most 200 characters), e.g. `purchase:tokens_100`.
    public var reason: String
    /// Creates the request.
    public init(amount: Int64, reason: String) {
        self.amount = amount
        self.reason = reason
    }
}

/// The answer to a grant: the new ledger entry and the wallet after it.
public struct GrantResponse: Codable, Hashable, Sendable {
    /// The grant entry.
    public var entry: LedgerEntry
    /// The wallet after the grant.
    public var wallet: Wallet
    /// Creates the response.
    public init(entry: LedgerEntry, wallet: Wallet) {
        self.entry = entry
        self.wallet = wallet
    }
}

/// `PUT /admin/v1/users/{userId}/premium`: `until` in the past or `null` ends premium.
public struct PremiumRequest: Codable, Hashable, Sendable {
    /// End of the premium entitlement.
    public var until: Date?
    /// Creates the request.
    public init(until: Date?) { self.until = until }
}
