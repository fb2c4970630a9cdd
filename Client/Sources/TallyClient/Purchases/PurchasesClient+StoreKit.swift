import Foundation
import TallyAPI

extension PurchasesClient {
    /// Whether a transaction whose redemption failed with `error` is finished (StoreKit stops delivering it): when the
    /// server answered for good that it will never credit it to this user — another account has it, or it refused its
    /// signature, chain, bundle or environment (``RedemptionVerdict``). An offline device, a server saying "not now", a
    /// product the server does not sell yet, a guest told to sign in (`sign_in_required`) keep it unfinished, so it is
    /// redeemed again (at the next sign the server is back, after a sign-in, at the next launch). Pure, for the
    /// StoreKit layer.
    static func finishes(after error: any Error) -> Bool {
        [.finish, .refuse].contains(RedemptionVerdict.after(error))
    }

    /// The `appAccountToken` a purchase carries: the Tally user id (a UUID), so the server — and Apple's notification —
    /// credit this account whichever arrives first.
    static func appAccountToken(userId: String) -> UUID? { UUID(uuidString: userId) }
}

#if canImport(StoreKit)
import StoreKit
#if canImport(UIKit)
import UIKit
#endif

// Apple platforms only (StoreKit 2): a thin layer over `redeem(signedTransaction:)`, ``RedemptionVerdict``, restore and
// the observer (TransactionRedemption.swift), which are tested on Linux with a stand-in store.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
extension PurchasesClient {
    /// Buys `product` with the signed-in user's id as its `appAccountToken`, redeems the transaction on the server and
    /// finishes it only once the server has it (a crash in between redeems it at the next launch). Returns the
    /// redeemed purchase, or nil when the user cancelled or the purchase waits for approval (Ask to Buy: it arrives
    /// through ``observeTransactions(onRefused:)``).
    @available(visionOS, unavailable, message: "use buy(_:confirmIn:): visionOS needs the scene that confirms the purchase")
    public func buy(_ product: Product) async throws -> PurchaseResponse? {
        let token = try await appAccountToken()
        return try await redeemed(try await product.purchase(options: [.appAccountToken(token)]))
    }

    /// Buys `product` with its promotional offer `offerIdentifier`, signed by the server for the signed-in user
    /// (``promotionalOffer(productId:offerIdentifier:)``; the server decides who is eligible), then as ``buy(_:)``.
    /// Throws `forbidden` for a user the offer is not for.
    @available(visionOS, unavailable, message: "use buy(_:confirmIn:): visionOS needs the scene that confirms the purchase")
    public func buy(_ product: Product, offer offerIdentifier: String) async throws -> PurchaseResponse? {
        let token = try await appAccountToken()
        let signed = try await promotionalOffer(productId: product.id, offerIdentifier: offerIdentifier)
        return try await redeemed(
            try await product.purchase(options: [.appAccountToken(token), .promotionalOffer(offerIdentifier, compactJWS: signed.compactJWS)]))
    }

    #if canImport(UIKit) && !os(watchOS)
    /// Buys `product` as ``buy(_:)`` does, confirmed in `scene` (`Product.purchase(confirmIn:options:)`): the call
    /// visionOS needs, and iOS 17 apps with several scenes.
    @available(iOS 17.0, visionOS 1.0, tvOS 17.0, *)
    @MainActor
    public func buy(_ product: Product, confirmIn scene: UIScene) async throws -> PurchaseResponse? {
        let token = try await appAccountToken()
        return try await redeemed(try await product.purchase(confirmIn: scene, options: [.appAccountToken(token)]))
    }
    #endif

    /// Restores the Apple Account's purchases ("Restore Purchases", which App Review requires of an app selling
    /// subscriptions or non-consumables): `AppStore.sync()` (the App Store may ask the user to sign in), then every
    /// entitlement (`Transaction.currentEntitlements`: subscriptions running, non-consumables) redeemed for the
    /// signed-in user. Each is credited once however often restored; consumables are never restored.
    ///
    /// - Throws: what `AppStore.sync()` throws (the user declined to sign in to the App Store), or a ``ClientError``
    ///   when the server could not be reached (restore again). Refusals (`sign_in_required`: sign in to the account
    ///   that bought the subscription first) are in the answer's ``RestoredPurchases/refused``.
    public func restore() async throws -> RestoredPurchases {
        try await restore(from: StoreKitTransactions())
    }

    /// Redeems, until the task is cancelled, what an earlier launch left unfinished and each transaction StoreKit
    /// delivers (renewals, Ask to Buy, purchases on the user's other devices, refunds), side by side. Start it once at
    /// launch, before sign-in (Apple: listen from launch): transactions wait for someone to be signed in. One whose
    /// redemption found no server is redeemed again at the next sign the server is back (any answer, the event stream,
    /// the network, ``Client/appDidBecomeActive()``); one the server refuses for good (its signature, bundle or
    /// environment) is finished and handed to `onRefused`.
    @discardableResult
    public func observeTransactions(onRefused: @escaping @Sendable (RefusedTransaction) -> Void = { _ in }) -> Task<Void, Never> {
        Task { await observe(StoreKitTransactions(), onRefused: onRefused) }
    }

    /// Shows the App Store's page where the user manages or cancels their subscriptions
    /// (`AppStore.showManageSubscriptions(in:)`): what to offer before or after ``Client/deleteAccount()``, since a
    /// deleted account's subscription keeps renewing at Apple until the user cancels it there.
    #if canImport(UIKit) && !os(watchOS) && !os(tvOS)
    @available(iOS 15.0, *)
    @MainActor
    public static func showManageSubscriptions(in scene: UIWindowScene) async throws {
        try await AppStore.showManageSubscriptions(in: scene)
    }
    #endif

    private func appAccountToken() async throws -> UUID {
        guard let user = await client.user, let token = Self.appAccountToken(userId: user.userId) else {
            throw ClientError(.unauthorized, message: "sign in before buying")
        }
        return token
    }

    private func redeemed(_ result: Product.PurchaseResult) async throws -> PurchaseResponse? {
        switch result {
        case .success(let verification): return try await redeem(StoreKitTransaction(verification))
        case .userCancelled, .pending: return nil
        @unknown default: return nil
        }
    }
}

/// A StoreKit 2 transaction as restore and the observer see it.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
struct StoreKitTransaction: StoreTransaction {
    let verification: VerificationResult<Transaction>

    init(_ verification: VerificationResult<Transaction>) { self.verification = verification }

    // The payload is read without StoreKit's verdict: the server verifies the signature itself.
    var transaction: Transaction { verification.unsafePayloadValue }
    var transactionId: UInt64 { transaction.id }
    var productId: String { transaction.productID }
    var signedTransaction: String { verification.jwsRepresentation }
    var kind: StoreProductKind {
        switch transaction.productType {
        case .consumable: .consumable
        case .nonConsumable: .nonConsumable
        case .autoRenewable: .autoRenewable
        default: .nonRenewing
        }
    }

    func finish() async { await transaction.finish() }
}

/// StoreKit 2's transaction sequences, as ``TransactionSource``.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
struct StoreKitTransactions: TransactionSource {
    func sync() async throws { try await AppStore.sync() }
    func currentEntitlements() -> AsyncStream<any StoreTransaction> { Self.stream(Transaction.currentEntitlements) }
    func unfinished() -> AsyncStream<any StoreTransaction> { Self.stream(Transaction.unfinished) }
    func updates() -> AsyncStream<any StoreTransaction> { Self.stream(Transaction.updates) }

    private static func stream(_ sequence: Transaction.Transactions) -> AsyncStream<any StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                for await verification in sequence { continuation.yield(StoreKitTransaction(verification)) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
#endif
