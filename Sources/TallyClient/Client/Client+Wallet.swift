import Foundation
import TallyAPI

extension Client {
    /// The wallet query with this client's freshness window.
    public var walletQuery: Query<Wallet> { .wallet(staleAfter: configuration.balanceStaleAfter) }

    /// The quotas query with this client's freshness window.
    public var quotasQuery: Query<QuotaList> { .quotas(staleAfter: configuration.balanceStaleAfter) }

    /// Performs a metered action. The estimated deduction (a free use, or the action's token price)
    /// shows at once; the wallet and quotas in the server's answer then replace it, with no second request.
    /// A refusal rolls back and throws ``ClientError/insufficientTokens(wallet:quotas:)`` or
    /// ``ClientError/quotaExhausted(wallet:quotas:)`` with the server's state, ready for a paywall.
    ///
    /// - Parameter intent: identifies the user's intent (a message id, a button press); calls with the
    ///   same intent are one charge, even across retries and double taps. Nil makes every call its own intent.
    @discardableResult
    public func perform(_ action: String, intent: String? = nil, isLongRunning: Bool = false) async throws -> ActionResult {
        guard let escaped = action.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])),
            !action.isEmpty
        else { throw ClientError.invalidInput("action name") }
        if value(.actions()) == nil { _ = try? await fetch(.actions()) }
        let walletQuery = self.walletQuery
        let quotasQuery = self.quotasQuery
        let mutation = Mutation<ActionResult>(
            method: "POST", path: "/v1/actions/\(escaped)", operation: "POST /v1/actions/{name}",
            idempotencyKey: intent.map { "intent-\($0)" } ?? UUID().uuidString,
            optimistic: estimate(action),
            isLongRunning: isLongRunning,
            confirm: { result in
                [Confirmation.of(walletQuery, result.wallet), Confirmation.of(quotasQuery, QuotaList(items: result.quotas))]
                    .compactMap { $0 }
            },
            confirmOnError: { error in
                switch error {
                case .insufficientTokens(let wallet, let quotas), .quotaExhausted(let wallet, let quotas):
                    [wallet.flatMap { Confirmation.of(walletQuery, $0) }, quotas.isEmpty ? nil : Confirmation.of(quotasQuery, QuotaList(items: quotas))]
                        .compactMap { $0 }
                default: []
                }
            })
        return try await mutate(mutation)
    }

    /// What `action` will most likely cost, judged from the price list and the quotas shown now.
    func estimate(_ action: String) -> [OptimisticUpdate] {
        guard let price = value(.actions())?.items.first(where: { $0.name == action }) else { return [] }
        if let quotaName = price.quota, let quota = value(quotasQuery)?.items.first(where: { $0.name == quotaName }) {
            if quota.unlimited { return [] }
            if quota.remaining > 0 {
                return [
                    .update(quotasQuery) { list in
                        var list = list
                        if let index = list.items.firstIndex(where: { $0.name == quotaName }), list.items[index].remaining > 0 {
                            list.items[index].used += 1
                            list.items[index].remaining -= 1
                        }
                        return list
                    }
                ]
            }
        }
        guard let tokens = price.tokens, tokens > 0 else { return [] }
        // Applied in order over the confirmed wallet: an estimate that would overdraw what the earlier ones
        // left is not shown (the server will refuse it), so the balance never dips below zero on its way to a 402.
        return [
            .update(walletQuery) { wallet in
                guard wallet.available >= tokens else { return wallet }
                var wallet = wallet
                wallet.balance -= tokens
                wallet.available -= tokens
                return wallet
            }
        ]
    }
}
