import Foundation
import TallyAPI

/// One AI call's mark on the cached wallet, from its start to its settlement, through the cache's mutation
/// layers (as an action's estimate): the estimated hold shown at once over the confirmed wallet, then the wallet
/// the call's charge reports (judged by the wallet's version, like any answer), a refusal's wallet, or an exact
/// rollback. Settles once; a hold released unsettled (the app stopped reading a stream) settles as unknown.
///
/// Without an estimate the call still marks the wallet as pending (``QueryState/pendingMutations``), and a fetch
/// of the wallet already in flight, which may predate the server's hold, is discarded.
final class AIWalletHold: Sendable {
    /// How a call ended, as far as the wallet can tell.
    enum Outcome: Sendable {
        /// Charged: the wallet after the charge replaces the estimate.
        case charged(AICharge)
        /// The call ended with `error`: see ``AIWalletHold/settle(_:)`` for what each error means to the wallet.
        case failed(any Error)
        /// The call may or may not have been charged (an answer without its charge, a stream stopped or cut): the
        /// estimate goes and the wallet is refetched where it is observed.
        case unknown
    }

    private let client: Client
    private let ticket: Locked<QueryCache.MutationTicket?>

    private init(client: Client, ticket: QueryCache.MutationTicket) {
        self.client = client
        self.ticket = Locked(ticket)
    }

    /// Shows a call starting: `estimate` tokens held (when positive, and only if available: an estimate that
    /// would overdraw is not shown, as for holds) over the confirmed wallet, at once.
    static func begin(client: Client, estimate: Int64?) -> AIWalletHold {
        let walletQuery = client.walletQuery
        client.define(walletQuery)
        let amount = max(estimate ?? 0, 0)
        let layer = OptimisticUpdate.update(walletQuery) { amount > 0 ? $0.holding(amount) : $0 }
        return AIWalletHold(client: client, ticket: client.cache.beginMutation([(layer.key, layer.apply)]))
    }

    // Released unsettled: the app let go of the call without an outcome (a stream it stopped reading).
    deinit { settle(.unknown) }

    /// Settles the call's mark (later calls do nothing). A failure the server reported as a status (402, 404,
    /// 429, 502, …) charged nothing: the estimate is rolled back exactly, and a 402's wallet and quotas are
    /// confirmed. A failure that leaves the charge unknown (offline, timed out, cancelled) removes the estimate
    /// and refetches the observed wallet.
    func settle(_ outcome: Outcome) {
        guard let ticket = ticket.withLock({ ticket in defer { ticket = nil }; return ticket }) else { return }
        switch outcome {
        case .charged(let charge):
            client.settle(ticket, succeeded: true, [Confirmation.of(client.walletQuery, charge.wallet)].compactMap { $0 })
        case .failed(let error as ClientError) where error.code != .offline && error.code != .timedOut:
            client.settle(ticket, succeeded: false, client.refusalConfirmations(error))
        case .failed(is CancellationError), .failed(is ClientError), .unknown:
            // Succeeded without a confirmation: the cache removes the estimate and marks the wallet stale.
            client.settle(ticket, succeeded: true, [])
            client.invalidate(key: client.walletQuery.key)
        case .failed:
            client.settle(ticket, succeeded: false, [])  // a local failure: nothing was sent
        }
    }
}
