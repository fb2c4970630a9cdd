import Foundation
import Logging
import PostgresNIO
import TallyStore

// The writes of ``DocumentStore``: one transaction per call, on the user's sync state lock (``DocumentWriter``);
// the reads are in `PostgresStore+DocumentReads.swift`.
extension PostgresStore {
    /// A REST write in one transaction: the key claimed (a replay ends here; the same key with another request
    /// is refused, one in flight answers `.idempotencyKeyInUse`), as a ledger command claims it; then the
    /// user's sync state locked, the document read, planned and written at the next version (with the
    /// collection's action for a create) and the response stored under the key. A refusal throws, and the
    /// transaction writes nothing.
    public func writeDocument(
        _ mutation: DocumentMutation, userId: String, budget: SyncBudget, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (DocumentWriteOutcome) throws -> StoredResponse
    ) async throws -> Execution {
        try await transaction { connection in
            if let idempotency,
                case .replay(let response) = try await claim(idempotency, userId: userId, lockingWallet: false, on: connection)
            {
                return .replayed(response)
            }
            var writer = try await DocumentWriter.open(
                self, userId: userId, clientId: nil, reading: [mutation], budget: budget, now: now, on: connection)
            switch try await writer.take(mutation) {
            case .conflict(let current):
                throw StoreError(.versionConflict, current: current)
            case .refused(let error):
                throw error
            case .applied(let document, let created):
                let response: StoredResponse
                do {
                    response = try render(DocumentWriteOutcome(document: document, created: created, charged: writer.charged))
                } catch {
                    throw CallerError(error: error)
                }
                try await writer.finish()
                if let idempotency { try await remember((idempotency, response), now: now, on: connection) }
                return .executed(response)
            }
        }
    }

    /// A push in one transaction: the user's sync state locked, the client claimed and every addressed
    /// document read in one statement, the mutations above the client's last id taken in order (a conflict
    /// or a refusal is a result, and still counts as taken), then every write in one statement. A second push
    /// of the same mutations, from this process or another, waits on the lock and finds them taken.
    public func push(userId: String, clientId: String, mutations: [ClientMutation], budget: SyncBudget, now: Date) async throws
        -> PushOutcome
    {
        try await transaction { connection in
            var writer = try await DocumentWriter.open(
                self, userId: userId, clientId: clientId, reading: mutations.map(\.mutation), budget: budget,
                now: now, on: connection)
            var taking = PushTaking(after: writer.lastMutationId, count: mutations.count)
            for pushed in mutations where taking.isNew(pushed) {
                taking.record(try await writer.take(pushed.mutation))
            }
            try await writer.finish(lastMutationId: taking.lastMutationId)
            return taking.outcome(charged: writer.charged)
        }
    }
}
