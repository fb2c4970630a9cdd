#if canImport(StoreKit)
import StoreKit
import TallyClient
#if os(visionOS)
import UIKit
#endif

// The oracle's purchases on Apple platforms, through the SDK's StoreKit layer (`client.purchases`): a thin layer over
// what the Linux build tests — `OracleProduct.ordered(_:id:)`, `show(_:)`, `showRestored(premiumUntil:purchases:refusals:)`,
// `showRefused(productId:error:)` and `attempt(_:)` — which the screen (OracleView.swift) calls.
extension OracleSession {
    /// What the oracle sells, as the App Store has it for this user's storefront (names and prices to show), in the
    /// screen's order (`Product.products(for:)` with ``OracleProduct/all``).
    /// - Throws: the App Store's error, or a ``StorefrontError`` naming the products it did not return.
    public func loadProducts() async throws -> [Product] {
        try OracleProduct.ordered(try await Product.products(for: OracleProduct.all), id: \.id)
    }

    /// Buys `product` for this account with the SDK (`client.purchases.buy(_:)`: the user id as the `appAccountToken`,
    /// the transaction redeemed on the server and finished only once the server has it) and shows the server's answer
    /// at once, as ``buyTokens()`` does from a ``Storefront``. Nil when the user cancelled, or when the purchase waits
    /// for a parent's approval (Ask to Buy: ``observeTransactions()`` redeems it when it comes).
    @discardableResult
    public func buy(_ product: Product) async throws -> PurchaseResponse? {
        #if os(visionOS)
        // visionOS confirms a purchase in a scene (`buy(_:)` is unavailable there): the one in front.
        let scenes = UIApplication.shared.connectedScenes
        guard let scene = scenes.first(where: { $0.activationState == .foregroundActive }) ?? scenes.first else {
            throw StorefrontError(message: "There is no window to confirm the purchase in.")
        }
        let answer = try await client.purchases.buy(product, confirmIn: scene)
        #else
        let answer = try await client.purchases.buy(product)
        #endif
        if let answer { show(answer) }
        return answer
    }

    /// "Restore Purchases" (which App Review requires of an app selling a subscription): the Apple Account's running
    /// subscription redeemed for this account (`client.purchases.restore()`, which first syncs with the App Store and
    /// may ask the user to sign in to it), then shown: premium, or why the server would not give it to this account.
    public func restorePurchases() async throws {
        let restored = try await client.purchases.restore()
        showRestored(premiumUntil: restored.premiumUntil, purchases: restored.purchases.count, refusals: restored.refused.map(\.error))
    }

    /// Starts redeeming what StoreKit delivers outside a purchase — a transaction a crash left unfinished, Ask to Buy
    /// approved, a renewal, a purchase on the user's other devices — until the returned task is cancelled
    /// (`client.purchases.observeTransactions(onRefused:)`). Started at launch, before anyone is signed in (they wait
    /// for a sign-in); what they credit reaches the screen through the server's events (``follow()``). A transaction
    /// the server refuses for good is shown (``showRefused(productId:error:)``).
    public func observeTransactions() -> Task<Void, Never> {
        client.purchases.observeTransactions { [weak self] refused in
            Task { @MainActor in self?.showRefused(productId: refused.productId, error: refused.error) }
        }
    }
}
#endif
