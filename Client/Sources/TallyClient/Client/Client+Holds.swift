import Foundation
import TallyAPI

extension Client {
    /// Reserves `amount` tokens for work whose cost is known only afterwards (an AI answer of unknown
    /// length): the wallet shows them held at once; ``capture(_:amount:)`` then charges what the work cost and
    /// returns the rest, ``release(_:)`` returns them all, and an open hold releases itself after `ttl` seconds.
    ///
    /// A refusal (not enough tokens) rolls the held tokens back and throws a ``ClientError`` with the code
    /// ``ClientError/Code/insufficientTokens`` and the server's wallet.
    /// - Parameter intent: identifies the user's intent, as in ``perform(_:intent:isLongRunning:)``: calls with
    ///   the same intent, amount and ttl are one hold, even across retries and double taps.
    @discardableResult
    public func createHold(_ amount: Int64, ttl: TimeInterval = 300, intent: String? = nil) async throws -> Hold {
        guard amount > 0 else { throw ClientError(.invalidInput, message: "hold amount must be positive") }
        guard ttl >= 1, ttl <= 86_400 else { throw ClientError(.invalidInput, message: "hold ttl must be 1 to 86,400 seconds") }
        let body = try TallyJSON.encoder().encode(CreateHoldRequest(amount: amount, ttlSeconds: Int(ttl.rounded(.up))))
        let walletQuery = self.walletQuery
        return try await mutate(
            Mutation<Hold>(
                method: "POST", path: "/v1/wallet/holds", operation: "POST /v1/wallet/holds", body: body,
                intent: intent,
                optimistic: [.update(walletQuery) { $0.holding(amount) }],
                confirm: { [Confirmation.of(walletQuery, $0.wallet)].compactMap { $0 } },
                confirmOnError: refusalConfirmations))
    }

    /// Charges `amount` (0 up to the held amount) of an open hold; the rest returns to the available tokens.
    /// The wallet shows the settled state at once. Capturing the same hold again with the same amount replays
    /// the first answer.
    @discardableResult
    public func capture(_ hold: Hold, amount: Int64) async throws -> Hold {
        guard amount >= 0, amount <= hold.amount else { throw ClientError(.invalidInput, message: "capture amount must be 0 to the held amount") }
        let path = try Self.holdPath(hold)
        let body = try TallyJSON.encoder().encode(CaptureHoldRequest(amount: amount))
        let walletQuery = self.walletQuery
        return try await mutate(
            Mutation<Hold>(
                method: "POST", path: path + "/capture", operation: "POST /v1/wallet/holds/{holdId}/capture", body: body,
                intent: "capture",  // the path names the hold and the body the amount: the key covers both
                optimistic: [.update(walletQuery) { $0.settling(held: hold.amount, charged: amount) }],
                confirm: { [Confirmation.of(walletQuery, $0.wallet)].compactMap { $0 } },
                confirmOnError: refusalConfirmations))
    }

    /// Releases an open hold: all its tokens return to the available ones (shown at once).
    @discardableResult
    public func release(_ hold: Hold) async throws -> Hold {
        let path = try Self.holdPath(hold)
        let walletQuery = self.walletQuery
        return try await mutate(
            Mutation<Hold>(
                method: "DELETE", path: path, operation: "DELETE /v1/wallet/holds/{holdId}",
                intent: "release",
                optimistic: [.update(walletQuery) { $0.settling(held: hold.amount, charged: 0) }],
                confirm: { [Confirmation.of(walletQuery, $0.wallet)].compactMap { $0 } },
                confirmOnError: refusalConfirmations))
    }

    private static func holdPath(_ hold: Hold) throws -> String {
        guard UUID(uuidString: hold.holdId) != nil else { throw ClientError(.invalidInput, message: "hold id") }
        return "/v1/wallet/holds/\(hold.holdId.lowercased())"
    }
}

extension Wallet {
    /// This wallet with `amount` more held, if available (an estimate that would overdraw is not shown:
    /// the server will refuse it).
    func holding(_ amount: Int64) -> Wallet {
        guard available >= amount else { return self }
        return Wallet(balance: balance, held: held + amount, version: version)
    }

    /// This wallet after a hold of `held` tokens settles with `charged` of them spent.
    func settling(held amount: Int64, charged: Int64) -> Wallet {
        guard held >= amount else { return self }
        return Wallet(balance: balance - charged, held: held - amount, version: version)
    }
}
