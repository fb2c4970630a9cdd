import Foundation

// What both stores' document writers do around ``DocumentPlanner/plan(_:existing:liveCount:)``, written once:
// how one mutation was taken, which refusals of a metered create are answers rather than failures, and how a
// push takes its mutations in order, each at most once. Each store only reads and writes its own rows.
//
// What the writers do not share, and why: SQLite's writer (`TallySQLite/DocumentWriter.swift`) is the one writer of
// the database, so it reads each document when it takes it and writes each record at once (its counts include the
// writes taken: ``DocumentTaking/counted(_:_:includesWritesTaken:)``), with nothing to lock and no transaction to run
// again. PostgreSQL's (`TallyPostgres/PostgresDocumentWriter.swift`) is one of many processes': it first locks the
// user's `sync_state` row (the order every writer of the user queues in), reads every addressed document in one
// statement, keeps each document's last state in memory and writes them all in one statement at the end (so its counts
// exclude the writes taken), takes ledger entry ids in batches, and throws `RetryTransaction` to run the whole call
// again when a row moved under it. Batching, locking and retrying are how each store reaches its rows, not rules:
// the rules (plan, count, charge, version, usage, the push's order) are here, and both writers call them.

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

extension TakenMutation {
    /// How a mutation whose charge (``DocumentTaking/Write/charge(userId:)``) threw `error` was taken: refused with
    /// it when the account cannot pay (``StoreError/refusesPayment``: nothing is written, the push goes on); `nil` when
    /// the error fails the whole call, for the writer to throw.
    public static func chargeFailed(_ error: any Error) -> TakenMutation? {
        guard let error = error as? StoreError, error.refusesPayment else { return nil }
        return .refused(error)
    }
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

/// One call's document writes for one user (a REST write, or a whole push), step by step around
/// ``DocumentPlanner``: which collections must be counted, the plan (within the user's ``SyncBudget``), the
/// collection's action a create charges, and the record written at the user's next version, with what the
/// user's documents then take. Each store's writer reads and writes its own rows between the steps:
///
/// ```swift
/// var taking = DocumentTaking(version: storedVersion, usage: storedUsage, budget: budget, now: now)
/// // for each mutation, with `existing` read:
/// if taking.needsCount(mutation, existing: existing) { taking.counted(collection, liveDocuments, includesWritesTaken: …) }
/// switch taking.plan(mutation, existing: existing) {
/// case .answered(let taken): return taken
/// case .write(let write):
///     if let command = write.charge { /* perform it; a refusal of payment answers the mutation */ }
///     let record = taking.take(write)  // then stored at record.version
/// }
/// ```
public struct DocumentTaking: Sendable {
    /// The user's version after the last write taken (the stored version before the first).
    public private(set) var version: Int64
    /// What the user's documents take of ``budget`` after the last write taken (as stored before the first).
    public private(set) var usage: SyncUsage
    /// What the user's documents may take.
    public let budget: SyncBudget
    /// When the writes happen, as a row stores it (whole milliseconds), so a record returned equals the record read back.
    public let updatedAt: Date
    /// Live documents per collection counted so far, as stored before this call.
    private var storedCounts: [String: Int] = [:]
    /// How this call's writes taken so far changed each collection's live documents.
    private var changes: [String: Int] = [:]

    /// Starts a call's writes from the user's stored version (0 for a user who never wrote a document) and
    /// usage, within `budget`.
    public init(version: Int64, usage: SyncUsage, budget: SyncBudget, now: Date) {
        self.version = version
        self.usage = usage
        self.budget = budget
        updatedAt = Date(millis: now.millis)
    }

    /// A mutation ``plan(_:existing:)`` decided to write: what to store, and the charge that comes first.
    public struct Write: Sendable, Hashable {
        /// The mutation.
        public var mutation: DocumentMutation
        /// The canonical data (empty for a tombstone) and the range value.
        public var data: [UInt8]
        public var rangeValue: String?
        /// Whether it leaves a tombstone.
        public var deleted: Bool
        /// A live document appears (counted, charged) or disappears.
        public var creates: Bool
        public var removes: Bool
        /// What the user's documents take once it is written.
        public var usage: SyncUsage

        /// The collection's action, performed before the write when the write creates a document in a metered
        /// collection; a refusal to pay (``StoreError/refusesPayment``) is the mutation's answer, and nothing is written.
        public func charge(userId: String) -> Command? {
            guard creates, let action = mutation.collection.action else { return nil }
            return .performAction(userId: userId, action: action, quotaLimit: mutation.collection.quotaLimit)
        }
    }

    /// What the plan of one mutation says.
    public enum Step: Sendable {
        /// Answered without a write: a conflict or a refusal.
        case answered(TakenMutation)
        /// To be written (after its charge, if any): ``take(_:)``.
        case write(Write)
    }

    /// Whether ``plan(_:existing:)`` needs the live documents of the mutation's collection, not counted yet
    /// in this call: only a put on a document that is not live can create one (counted even when the budget
    /// refuses it, so a collection that is full answers `.collectionFull` first, as the planner orders them).
    public func needsCount(_ mutation: DocumentMutation, existing: DocumentRecord?) -> Bool {
        guard case .put = mutation.operation, existing?.deleted ?? true else { return false }
        return storedCounts[mutation.collection.name] == nil
    }

    /// Records the live documents of `collection` as the store counted them: `includesWritesTaken` when the store
    /// writes each record as it is taken (so its count includes this call's writes so far), not when it writes
    /// them all at the end.
    public mutating func counted(_ collection: String, _ count: Int, includesWritesTaken: Bool) {
        guard storedCounts[collection] == nil else { return }
        storedCounts[collection] = includesWritesTaken ? count - changes[collection, default: 0] : count
    }

    /// The live documents of `collection` as this call's writes left them (0 when not counted: no create needs it).
    private func liveCount(_ collection: String) -> Int {
        storedCounts[collection].map { $0 + changes[collection, default: 0] } ?? 0
    }

    /// The plan of `mutation` on `existing` (its stored record as this call's writes left it; `nil` if never
    /// written), from the live count and the usage as this call's writes left them.
    public func plan(_ mutation: DocumentMutation, existing: DocumentRecord?) -> Step {
        let liveCount = liveCount(mutation.collection.name)
        switch DocumentPlanner.plan(mutation, existing: existing, liveCount: liveCount, usage: usage, budget: budget) {
        case .conflict(let current):
            return .answered(.conflict(current: current))
        case .refused(let code):
            return .answered(.refused(StoreError(code)))
        case .write(let data, let rangeValue, let deleted, let creates, let removes):
            return .write(
                Write(
                    mutation: mutation, data: data, rangeValue: rangeValue, deleted: deleted, creates: creates, removes: removes,
                    usage: usage.writing(data, over: existing)))
        }
    }

    /// Takes a planned write (its charge, if any, performed): the record at the user's next version, the live
    /// count and the usage moved with it. The store writes the record.
    public mutating func take(_ write: Write) -> DocumentRecord {
        version += 1
        usage = write.usage
        let collection = write.mutation.collection.name
        changes[collection, default: 0] += write.creates ? 1 : write.removes ? -1 : 0
        return DocumentRecord(
            collection: collection, id: write.mutation.docId, data: write.data, rangeValue: write.rangeValue, version: version,
            updatedAt: updatedAt, deleted: write.deleted)
    }
}
