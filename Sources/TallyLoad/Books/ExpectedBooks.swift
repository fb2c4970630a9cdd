import Foundation
import TallyAPI

/// What the load tool saw happen to one account: every answer it got, so the server's ledger can be
/// compared with it entry by entry.
public struct ExpectedBooks: Sendable, Codable, Hashable {
    /// What became of a hold the tool opened.
    public enum HoldFate: Sendable, Codable, Hashable {
        /// Still open (the run ended before it settled).
        case open(amount: Int64)
        /// Captured for `charged` of `amount` tokens.
        case captured(amount: Int64, charged: Int64)
        /// Released without a charge.
        case released(amount: Int64)
        /// Its capture or release got no answer: settled at most once, for at most `amount`.
        case unknown(amount: Int64)
    }

    /// The account.
    public var userId: String
    /// Admin grants that succeeded, by their unique reason.
    public var grants: [String: Int64] = [:]
    /// Actions paid in tokens that succeeded, by action name.
    public var debits: [String: Int] = [:]
    /// Actions whose outcome the tool never learnt (no answer after every retry), by action name: each
    /// charged at most once.
    public var uncertain: [String: Int] = [:]
    /// Grants that got no answer, by reason: each in the ledger at most once.
    public var uncertainGrants: [String: Int64] = [:]
    /// Holds whose creation got no answer (their ids are unknown): each opened at most once.
    public var uncertainHolds = 0
    /// Holds opened, by id.
    public var holds: [String: HoldFate] = [:]
    /// Free quota uses seen, by quota name and the end of the window they fell in.
    public var quotaUses: [String: [Date: Int]] = [:]
    /// Requests refused with a 4xx (they must leave nothing behind: any entry they made is unexpected).
    public var refused = 0
    /// Requests that got no definitive answer after every retry.
    public var unsettled = 0

    /// An empty expectation for `userId`.
    public init(userId: String) { self.userId = userId }

    /// Records a successful action: a token charge, or a free use of its quota in the window the answer names.
    public mutating func record(_ result: ActionResult, prices: PriceList) {
        switch result.paidWith {
        case .tokens: debits[result.action, default: 0] += 1
        case .quota:
            if let quota = prices.quota[result.action], let window = result.quotas.first(where: { $0.name == quota }) {
                usedQuota(quota, resetsAt: window.resetsAt)
            }
        case .premium: break
        }
    }

    /// Records one free use of `quota` in the window ending at `resetsAt`.
    public mutating func usedQuota(_ quota: String, resetsAt: Date) {
        quotaUses[quota, default: [:]][resetsAt, default: 0] += 1
    }
}

/// The price list the checker needs: what each action costs and which quota it draws on.
public struct PriceList: Sendable, Codable, Hashable {
    /// Tokens per action paid in tokens, by action name (absent for quota-only actions).
    public var tokens: [String: Int64]
    /// The quota an action draws on first, by action name.
    public var quota: [String: String]
    /// Daily free uses, by quota name.
    public var dailyLimit: [String: Int]

    /// Creates a price list.
    public init(tokens: [String: Int64], quota: [String: String], dailyLimit: [String: Int]) {
        self.tokens = tokens
        self.quota = quota
        self.dailyLimit = dailyLimit
    }
}
