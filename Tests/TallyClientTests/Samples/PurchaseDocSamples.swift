import Foundation
import TallyClient

/// The samples of the purchases client's doc comments and README's "App Store purchases", verbatim, compiled
/// (``SamplesAreCompiledTests`` checks they match).
enum PurchaseDocSamples {
    /// `PurchasesClient`: redeem a StoreKit 2 transaction.
    static func redeem(tally: Client, signedTransaction: String) async throws -> String {
        var balanceLabel = ""
        // signedTransaction: StoreKit 2's Transaction.jwsRepresentation
        let redeemed = try await tally.purchases.redeem(signedTransaction: signedTransaction)
        balanceLabel = "\(redeemed.wallet.available) tokens"     // the cached wallet already shows it
        return balanceLabel
    }
}
