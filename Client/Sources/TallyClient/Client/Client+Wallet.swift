import Foundation
import TallyAPI

extension Client {
    /// The wallet query with this client's freshness window.
    public var walletQuery: Query<Wallet> { .wallet(staleAfter: configuration.balanceStaleAfter) }

    /// The quotas query with this client's freshness window.
    public var quotasQuery: Query<QuotaList> { .quotas(staleAfter: configuration.balanceStaleAfter) }

    /// Performs a metered action. The estimated deduction (a free use, or the action's token price)
    /// shows at once; the wallet and quotas in the server's answer then replace it (confirmed now: fresh), with
    /// no second request. A refusal rolls back and throws a ``ClientError`` with the code
    /// ``ClientError/Code/insufficientTokens`` or ``ClientError/Code/quotaExhausted`` and the server's wallet and
    /// quotas, ready for a paywall.
    ///
    /// The estimate needs the price list and, for an action with a free quota, the quotas: the price list is
    /// fetched at ``restore()`` and sign-in and kept on disk; without it (or without the quotas) nothing is
    /// estimated, and the action is never delayed to fetch them.
    ///
    /// - Parameter intent: the user's intent in any words (a message id, the question asked); calls of the
    ///   same action with the same intent are one charge, even across retries and double taps. The same intent
    ///   on another action is another charge. Nil makes every call its own intent.
    @discardableResult
    public func perform(_ action: String, intent: String? = nil, isLongRunning: Bool = false) async throws -> ActionResult {
        guard let escaped = action.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])),
            !action.isEmpty
        else { throw ClientError(.invalidInput, message: "action name") }
        let walletQuery = self.walletQuery
        let quotasQuery = self.quotasQuery
        let mutation = Mutation<ActionResult>(
            method: "POST", path: "/v1/actions/\(escaped)", operation: "POST /v1/actions/{name}",
            intent: intent,
            optimistic: estimate(action),
            isLongRunning: isLongRunning,
            confirm: { result in
                [Confirmation.of(walletQuery, result.wallet), Confirmation.of(quotasQuery, QuotaList(items: result.quotas))]
                    .compactMap { $0 }
            },
            confirmOnError: refusalConfirmations)
        return try await mutate(mutation)
    }

    /// What `action` will most likely cost, judged from the price list and the quotas shown now; nothing when
    /// either is unknown (a guess would flicker: a free use shown as a token charge, then given back).
    func estimate(_ action: String) -> [OptimisticUpdate] {
        let prices = Query<ActionList>.actions()
        guard let list = value(prices) else {
            revalidateInBackground(prices)  // for the next action; this one does not wait
            return []
        }
        guard let price = list.items.first(where: { $0.name == action }) else { return [] }
        if let quotaName = price.quota {
            guard let quota = value(quotasQuery)?.items.first(where: { $0.name == quotaName }) else { return [] }
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

    /// Shows the data that belongs to no user (the price list): from disk if memory has none, then refreshed in
    /// the background when stale. Called at restore and sign-in; never awaited by anything.
    func preparePriceList() {
        let prices = Query<ActionList>.actions()
        if value(prices) == nil, let entries = try? configuration.cacheStore?.entries(userId: CacheNamespace.shared) {
            cache.load(entries, shared: true)
        }
        if state(prices).isStale { revalidateInBackground(prices) }
    }

    /// The authoritative wallet and quotas a refusal (402) carries, confirmed in place of the optimistic change:
    /// the shown state is the server's, ready for a paywall, with no second request.
    var refusalConfirmations: @Sendable (ClientError) -> [Confirmation] {
        let walletQuery = self.walletQuery
        let quotasQuery = self.quotasQuery
        return { error in
            guard error.code == .insufficientTokens || error.code == .quotaExhausted else { return [] }
            return [
                error.wallet.flatMap { Confirmation.of(walletQuery, $0) },
                error.quotas.isEmpty ? nil : Confirmation.of(quotasQuery, QuotaList(items: error.quotas)),
            ].compactMap { $0 }
        }
    }
}
