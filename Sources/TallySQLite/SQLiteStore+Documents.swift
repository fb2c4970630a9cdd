import Foundation
import TallyStore

// Placeholder until the document store lands: every call fails.
extension SQLiteStore: DocumentStore {
    /// Not yet implemented.
    public func writeDocument(
        _ mutation: DocumentMutation, userId: String, idempotency: IdempotencyKey?, now: Date,
        render: @escaping @Sendable (DocumentWriteOutcome) throws -> StoredResponse
    ) async throws -> Execution { throw StoreError(.unavailable) }

    /// Not yet implemented.
    public func push(userId: String, clientId: String, mutations: [ClientMutation], now: Date) async throws -> PushOutcome {
        throw StoreError(.unavailable)
    }

    /// Not yet implemented.
    public func document(userId: String, collection: String, id: String) async throws -> DocumentRecord? {
        throw StoreError(.unavailable)
    }

    /// Not yet implemented.
    public func documents(userId: String, query: DocumentRangeQuery) async throws -> [DocumentRecord] {
        throw StoreError(.unavailable)
    }

    /// Not yet implemented.
    public func changes(userId: String, after: Int64?, limit: Int) async throws -> ChangePage { throw StoreError(.unavailable) }

    /// Not yet implemented.
    public func purgeTombstones(before: Date, limit: Int) async throws -> Int { 0 }
}
