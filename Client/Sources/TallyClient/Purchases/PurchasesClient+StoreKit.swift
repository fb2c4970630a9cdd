import Foundation
import TallyAPI

extension PurchasesClient {
    /// Whether a transaction whose redemption failed with `error` is finished (StoreKit stops delivering it): only
    /// when the server answered for good that it will never credit it to this user (another account has it). An
    /// offline device, a refused signature, a product the server does not sell yet, a guest told to sign in
    /// (`sign_in_required`) keep it unfinished, so the next launch (``observeTransactions()``) redeems it again. Pure,
    /// for the StoreKit layer.
    static func finishes(after error: any Error) -> Bool {
        (error as? ClientError)?.serverCode == .purchaseClaimed
    }

    /// The `appAccountToken` a purchase carries: the Tally user id (a UUID), so the server — and Apple's notification —
    /// credit this account whichever arrives first.
    static func appAccountToken(userId: String) -> UUID? { UUID(uuidString: userId) }
}

#if canImport(StoreKit)
import StoreKit

// Apple platforms only (StoreKit 2): a thin layer over `redeem(signedTransaction:)` and the rules above, which are
// tested on Linux.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
extension PurchasesClient {
    /// Buys `product` with the signed-in user's id as its `appAccountToken`, redeems the transaction on the server and
    /// finishes it only once the server has it (a crash in between redeems it at the next launch). Returns the
    /// redeemed purchase, or nil when the user cancelled or the purchase waits for approval (Ask to Buy: it arrives
    /// through ``observeTransactions()``).
    public func buy(_ product: Product) async throws -> PurchaseResponse? {
        guard let user = await client.user, let token = Self.appAccountToken(userId: user.userId) else {
            throw ClientError(.unauthorized, message: "sign in before buying")
        }
        switch try await product.purchase(options: [.appAccountToken(token)]) {
        case .success(let verification): return try await redeem(verification)
        case .userCancelled, .pending: return nil
        @unknown default: return nil
        }
    }

    /// Redeems what an earlier launch left unfinished, then each transaction StoreKit delivers (renewals, Ask to Buy,
    /// purchases on the user's other devices, refunds) until the task is cancelled. Start it once after sign-in.
    public func observeTransactions() -> Task<Void, Never> {
        Task {
            for await verification in Transaction.unfinished { _ = try? await redeem(verification) }
            for await verification in Transaction.updates { _ = try? await redeem(verification) }
        }
    }

    /// Redeems one transaction (the server verifies its signature itself: StoreKit's verdict is not trusted with
    /// money) and finishes it when the server has it or has it for another account.
    private func redeem(_ verification: VerificationResult<Transaction>) async throws -> PurchaseResponse {
        let transaction = verification.unsafePayloadValue
        do {
            let answer = try await redeem(signedTransaction: verification.jwsRepresentation)
            await transaction.finish()
            return answer
        } catch {
            if Self.finishes(after: error) { await transaction.finish() }
            throw error
        }
    }
}
#endif
