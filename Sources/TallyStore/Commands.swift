import Foundation

/// A state change to one account, applied by a store in one transaction.
///
/// Every mutation the API offers is one case, so idempotency, hold expiry and the
/// authoritative state of the response are handled once per store, not once per endpoint.
public enum Command: Sendable, Hashable {
    /// Add tokens (`reason` goes to the ledger).
    case grant(userId: String, amount: Int64, reason: String)
    /// Reserve tokens until `expiresAt`; `note` follows the hold id in the entry's reason (what the hold is for). With
    /// `premium`, a user premium at the hold holds 0 tokens instead, free or for one use of a quota (``PremiumHold``).
    case createHold(userId: String, holdId: String, amount: Int64, expiresAt: Date, note: String? = nil, premium: PremiumHold? = nil)
    /// Charge `amount` of an open hold and release the rest; `note` follows the hold id in the entry's reason.
    case captureHold(userId: String, holdId: String, amount: Int64, note: String? = nil)
    /// Release an open hold; `note` follows the hold id in the entry's reason; `giveBack`: the quota use the hold took
    /// (``PremiumHold/quota(_:limit:)``), returned while its window is still open.
    case releaseHold(userId: String, holdId: String, note: String? = nil, giveBack: QuotaUse? = nil)
    /// Perform a metered action: a free quota use, else its token price.
    case performAction(userId: String, action: ActionSpec, quotaLimit: Int?)
    /// Set or clear the premium entitlement.
    case setPremium(userId: String, until: Date?)
    /// Change the profile; `nil` fields are left alone.
    case updateProfile(userId: String, timezone: String?, language: String?)

    /// The account the command changes.
    public var userId: String {
        switch self {
        case .grant(let userId, _, _), .createHold(let userId, _, _, _, _, _), .captureHold(let userId, _, _, _),
            .releaseHold(let userId, _, _, _), .performAction(let userId, _, _), .setPremium(let userId, _),
            .updateProfile(let userId, _, _):
            return userId
        }
    }
}

/// How a hold is paid when its user is premium at its creation (an AI model's `premium`): the hold is 0 tokens, so
/// the wallet need hold nothing, and its capture charges 0.
public enum PremiumHold: Sendable, Hashable {
    /// Nothing more.
    case free
    /// One use of `quota` (`limit` a window, counted as a quota action's are), taken with the hold: refused with
    /// `.quotaExhausted` when none is left.
    case quota(String, limit: Int)
}

/// One quota use a premium hold took: the quota and the windows it was counted in (the account's, and a guest's
/// installation's), so that its release gives it back to those windows only, never to a later one.
public struct QuotaUse: Sendable, Hashable {
    /// The quota.
    public var quota: String
    /// The end of the account's window the use was counted in.
    public var windowEnd: Date
    /// The end of the installation's window it was counted in too, for a guest.
    public var installationWindowEnd: Date?

    /// A use of `quota` counted in the windows ending at `windowEnd` (and `installationWindowEnd`).
    public init(quota: String, windowEnd: Date, installationWindowEnd: Date? = nil) {
        (self.quota, self.windowEnd, self.installationWindowEnd) = (quota, windowEnd, installationWindowEnd)
    }

    /// The use `outcome` (of a premium hold paid with `quota`) took, as its state's counters show it.
    public init?(quota: String, outcome: CommandOutcome) {
        guard outcome.payment == .useQuota, let counter = outcome.state.counters[quota] else { return nil }
        self.init(quota: quota, windowEnd: counter.windowEnd, installationWindowEnd: outcome.state.installation?.counters[quota]?.windowEnd)
    }
}

/// What a command did, with the account state right after it (read in the same transaction).
public struct CommandOutcome: Sendable, Hashable {
    /// The account after the command.
    public var state: AccountState
    /// The ledger entry written, if one was.
    public var entry: LedgerEntryRecord?
    /// The hold created or settled, if any.
    public var hold: HoldRecord?
    /// How an action was paid, for `performAction`.
    public var payment: ActionDecision?

    /// Creates an outcome.
    public init(state: AccountState, entry: LedgerEntryRecord? = nil, hold: HoldRecord? = nil, payment: ActionDecision? = nil) {
        self.state = state
        self.entry = entry
        self.hold = hold
        self.payment = payment
    }
}

/// The identity of a request under an `Idempotency-Key`.
public struct IdempotencyKey: Sendable, Hashable {
    /// Whose key: a user id, or `admin`.
    public var scope: String
    /// The client's key.
    public var key: String
    /// A hash of the method, path and body: the same key with another request is refused.
    public var fingerprint: String

    /// Creates the key.
    public init(scope: String, key: String, fingerprint: String) {
        self.scope = scope
        self.key = key
        self.fingerprint = fingerprint
    }
}

/// A rendered response, stored under its idempotency key and replayed byte for byte.
public struct StoredResponse: Sendable, Hashable {
    /// HTTP status code.
    public var status: Int
    /// The JSON body.
    public var body: [UInt8]

    /// Creates a stored response.
    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

/// The result of `execute`: the command ran now, or an earlier run's response is replayed.
public enum Execution: Sendable, Hashable {
    /// The command ran in this call.
    case executed(StoredResponse)
    /// The key was seen before with the same request: this is the first response.
    case replayed(StoredResponse)

    /// The response to send either way.
    public var response: StoredResponse {
        switch self {
        case .executed(let response), .replayed(let response): return response
        }
    }
}
