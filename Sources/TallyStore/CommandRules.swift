import Foundation

// What both stores do around ``LedgerPlanner/plan(_:snapshot:now:)`` when they run a ``Command``, written once:
// which rows a command reads, the replay of an idempotency key, the plan with the state a refusal carries,
// and the outcome the response is rendered from. Each store only reads and writes its own rows.

extension Command {
    /// The existing hold the command settles (a capture or a release): the store reads it with the account.
    public var settledHoldId: String? {
        switch self {
        case .captureHold(_, let holdId, _, _), .releaseHold(_, let holdId, _, _): return holdId
        default: return nil
        }
    }

    /// The quota whose counter the command plans from (an action's, a premium hold's, or the one a release gives a use back to).
    public var quota: String? {
        switch self {
        case .performAction(_, let action, _): return action.quota
        case .createHold(_, _, _, _, _, .quota(let quota, _)?): return quota
        case .releaseHold(_, _, _, let giveBack?): return giveBack.quota
        default: return nil
        }
    }

    /// Whether the command can append a ledger entry (a store then has an entry id ready, or takes one).
    public var mayAppend: Bool {
        switch self {
        case .grant, .createHold, .captureHold, .releaseHold: return true
        case .performAction(_, let action, _): return action.tokens != nil
        case .setPremium, .updateProfile: return false
        }
    }

    /// Whether the command moves only the ledger (wallet, holds, quota counters), not the profile.
    public var isLedgerCommand: Bool {
        switch self {
        case .grant, .createHold, .captureHold, .releaseHold, .performAction: return true
        case .setPremium, .updateProfile: return false
        }
    }
}

extension LedgerSnapshot {
    /// What `command` plans from in the account `state`: the hold it names (`hold`, as read, if it exists)
    /// and the counter of its action's quota.
    public init(for command: Command, state: AccountState, hold: HoldRecord?) {
        self.init(
            user: state.user, wallet: state.wallet, hold: hold, counter: command.quota.flatMap { state.counters[$0] },
            installation: state.installation)
    }
}

extension LedgerPlanner {
    /// Plans `command` in the account `state` (with `hold`, the hold it names, as read); a refusal carries
    /// `state`, so the client is shown the account as the command found it.
    public static func plan(_ command: Command, state: AccountState, hold: HoldRecord?, now: Date) throws(StoreError) -> LedgerPlan {
        do throws(StoreError) {
            return try plan(command, snapshot: LedgerSnapshot(for: command, state: state, hold: hold), now: now)
        } catch {
            throw StoreError(error.code, state: state)
        }
    }
}

extension CommandOutcome {
    /// What `plan` does to the account `state`, exactly as its writes leave the rows (instants in whole
    /// milliseconds), so that a store can render the response before or after writing, without reading
    /// again. `hold` is the hold the command names, as read; `entryId` the id of the entry the plan appends
    /// (a plan with an entry needs one).
    public init(plan: LedgerPlan, state: AccountState, hold: HoldRecord?, entryId: Int64?, now: Date) {
        var state = state
        var entry: LedgerEntryRecord?
        if let planned = plan.entry {
            state.wallet = state.wallet.applying(planned)
            entry = entryId.map { id in
                LedgerEntryRecord(
                    id: id, kind: planned.kind, amount: planned.amount, heldChange: planned.heldChange,
                    balanceAfter: state.wallet.balance, reason: planned.reason, createdAt: now, reference: planned.reference)
            }
        }
        var changedHold = plan.newHold
        if let settle = plan.settleHold, var settled = hold {
            settled.status = settle.status
            settled.capturedAmount = settle.capturedAmount
            changedHold = settled
        }
        if let (quota, counter) = plan.counter { state.counters[quota] = counter.stored }
        if let (_, quota, counter) = plan.installationCounter { state.installation?.counters[quota] = counter.stored }
        if let user = plan.user { state.user = user.stored }
        self.init(state: state, entry: entry, hold: changedHold, payment: plan.payment)
    }
}

extension IdempotencyKey {
    /// The response to replay for this request, given the response its key stored and the fingerprint of
    /// the request that stored it; the same key with another request is refused (`.idempotencyMismatch`).
    public func replay(_ response: StoredResponse, storedFingerprint: String) throws(StoreError) -> StoredResponse {
        guard storedFingerprint == fingerprint else { throw StoreError(.idempotencyMismatch) }
        return response
    }
}
