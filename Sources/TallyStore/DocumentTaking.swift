import Foundation

// What both stores' document writers do around ``DocumentPlanner/plan(_:existing:liveCount:)``, written once:
// how one mutation was taken, which refusals of a metered create are answers rather than failures, and how a
// push takes its mutations in order, each at most once. Each store only reads and writes its own rows.

/// How a store's document writer took one mutation.
public enum TakenMutation: Sendable {
    /// Written at the user's next version (`created`: a live document appeared).
    case applied(DocumentRecord, created: Bool)
    /// Its precondition failed: the document as it is (`nil`: absent or deleted).
    case conflict(current: DocumentRecord?)
    /// Refused by the planner, or the collection's action could not be paid (with the account's state).
    case refused(StoreError)

    /// The push's answer for it.
    public var result: MutationResult {
        switch self {
        case .applied(let document, _): .applied(document)
        case .conflict(let current): .conflict(current: current)
        case .refused(let error): .rejected(error.code, state: error.state)
        }
    }
}

extension StoreError {
    /// Whether this refusal of a metered create's charge is the mutation's answer (the account cannot pay:
    /// `.insufficientTokens`, `.quotaExhausted`) rather than a failure of the whole write.
    public var refusesPayment: Bool { code == .insufficientTokens || code == .quotaExhausted }
}

/// A push's mutations taken in order, each at most once: one at or below the client's last mutation id was
/// taken by an earlier push and answers `.duplicate`; the others are taken and advance the id.
///
/// ```swift
/// var taking = PushTaking(after: lastMutationId, count: mutations.count)
/// for pushed in mutations where taking.isNew(pushed) {
///     taking.record(try writer.take(pushed.mutation))
/// }
/// return taking.outcome(charged: writer.charged)
/// ```
public struct PushTaking: Sendable {
    /// The client's last mutation id as the mutations taken so far left it.
    public private(set) var lastMutationId: Int64
    /// One answer per mutation looked at, in order.
    public private(set) var results: [MutationResult] = []

    /// Starts a push of `count` mutations from the client's stored last mutation id (0 for a new client).
    public init(after lastMutationId: Int64, count: Int) {
        self.lastMutationId = lastMutationId
        results.reserveCapacity(count)
    }

    /// Whether `mutation` is to be taken now; if not, it is answered `.duplicate`. A taken mutation's id
    /// becomes the client's last, whatever its answer (a conflict or a refusal is final too).
    public mutating func isNew(_ mutation: ClientMutation) -> Bool {
        guard mutation.id > lastMutationId else {
            results.append(.duplicate)
            return false
        }
        lastMutationId = mutation.id
        return true
    }

    /// Records how the writer took the mutation ``isNew(_:)`` just let through.
    public mutating func record(_ taken: TakenMutation) { results.append(taken.result) }

    /// The push's answer; `charged` is the account after the push when a metered create charged it.
    public func outcome(charged: AccountState?) -> PushOutcome {
        PushOutcome(lastMutationId: lastMutationId, results: results, charged: charged)
    }
}
