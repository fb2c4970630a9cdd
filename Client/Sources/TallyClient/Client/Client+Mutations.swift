import Foundation
import TallyAPI

extension Client {
    /// Performs `mutation`: its optimistic changes show at once; the answer's authoritative values
    /// replace them, or on failure they are removed (the shown state is exactly as before) and the error is thrown.
    @discardableResult
    public func mutate<Response>(_ mutation: Mutation<Response>) async throws -> Response {
        // The key is derived from the whole request and its intent: calls share a write only if they are the same request.
        let key = mutation.idempotencyKey
        let (body, _) = try await writes.run(key) { [self] in
            let metrics = self.metrics
            let operation = mutation.operation
            return .init(
                operation: { [self] in try await send(mutation, key: key) },
                onShared: { metrics.recordCoalesced(operation: operation, count: $0) })
        }
        return try decode(Response.self, body)
    }

    private func send<Response>(_ mutation: Mutation<Response>, key: String) async throws -> Data {
        let ticket = cache.beginMutation(mutation.optimistic.map { ($0.key, $0.apply) })
        let auth = userTokens()  // the user it was asked for: a change of user meanwhile makes it fail, not act as the next
        do {
            let response = try await inScope(mutation.scope) {
                try await executor.send(
                    Endpoint(
                        method: mutation.method, path: mutation.path, operation: mutation.operation,
                        kind: mutation.isLongRunning ? .ai : .write),
                    body: mutation.body, headers: [TallyHeader.idempotencyKey: key], auth: auth)
            }
            let decoded = try decode(Response.self, response.body)
            settle(ticket, succeeded: true, mutation.confirm(decoded))
            return response.body
        } catch {
            let failure = error as? ClientError
            settle(ticket, succeeded: false, failure.map(mutation.confirmOnError) ?? [])
            throw error
        }
    }

    private func inScope<T: Sendable>(_ scope: String?, _ body: () async throws -> T) async throws -> T {
        guard let scope else { return try await body() }
        return try await scopes.run(scope, body)
    }

    /// Confirms server values no mutation of this client asked for (a `wallet` event), judged by each query's `supersedes`.
    func confirm(_ confirmations: [Confirmation]) {
        settle(cache.beginMutation([]), succeeded: true, confirmations)
    }

    /// Applies the answer's confirmations, each confirmed now (a wallet-changing call leaves the wallet fresh), and
    /// persists what the cache stored.
    func settle(_ ticket: QueryCache.MutationTicket, succeeded: Bool, _ confirmations: [Confirmation]) {
        let now = configuration.clock.now
        let stored = cache.settleMutation(
            ticket, succeeded: succeeded,
            confirmations: confirmations.map {
                ($0.key, QueryCache.Confirmed(value: $0.value, data: $0.data, etag: nil, confirmedAt: now, fromDisk: false))
            })
        for (key, confirmed) in stored {
            persist(
                confirmed, key: key, isUserData: confirmations.first { $0.key == key }?.isUserData ?? true, generation: ticket.generation)
        }
    }
}
