import Foundation
import TallyAPI

/// What kind of product an App Store transaction is for (StoreKit's `Product.ProductType`).
enum StoreProductKind: Sendable, Hashable {
    /// Bought again and again (tokens): never restored, StoreKit forgets it once finished.
    case consumable
    /// Bought once, owned forever.
    case nonConsumable
    /// A subscription that renews by itself.
    case autoRenewable
    /// A subscription for a set time.
    case nonRenewing
}

/// One App Store transaction as restore and the transaction observer see it: StoreKit's `Transaction` on Apple
/// platforms (PurchasesClient+StoreKit.swift), a stand-in in tests.
protocol StoreTransaction: Sendable {
    /// Apple's transaction id.
    var transactionId: UInt64 { get }
    /// The product bought.
    var productId: String { get }
    /// What kind of product it is.
    var kind: StoreProductKind { get }
    /// The signed transaction the server verifies itself (`VerificationResult.jwsRepresentation`): StoreKit's own
    /// verdict is not trusted with money.
    var signedTransaction: String { get }
    /// Tells the store the purchase was delivered (`Transaction.finish()`): it stops coming back.
    func finish() async
}

/// The store's side of restore and observation: StoreKit 2 on Apple platforms (`AppStore.sync()`,
/// `Transaction.currentEntitlements`, `.unfinished`, `.updates`), a stand-in in tests.
protocol TransactionSource: Sendable {
    /// Asks the App Store for this Apple Account's transactions (`AppStore.sync()`: may ask the user to sign in to
    /// the App Store; throws when they decline).
    func sync() async throws
    /// What the Apple Account owns now: subscriptions running and non-consumables (`Transaction.currentEntitlements`).
    func currentEntitlements() -> AsyncStream<any StoreTransaction>
    /// Transactions not finished yet, by an earlier launch too (`Transaction.unfinished`).
    func unfinished() -> AsyncStream<any StoreTransaction>
    /// Transactions as they happen while the app runs: renewals, Ask to Buy, other devices, refunds
    /// (`Transaction.updates`). Never ends by itself.
    func updates() -> AsyncStream<any StoreTransaction>
}

/// What to do with a transaction after a redemption failed. Pure: the observer and restore act on it.
enum RedemptionVerdict: Sendable, Hashable {
    /// Finish it: the server will never credit it to this user, and says it (another account has it). Not reported:
    /// nothing is wrong with the transaction.
    case finish
    /// Finish it and report it: the server refused it for good (its signature, chain, bundle or environment). Kept
    /// unfinished, it would come back at every launch and be refused again.
    case refuse
    /// Redeem it again at the next sign that the server is back: no answer came, the server said "not now", or the
    /// session ended meanwhile (then once someone is signed in).
    case retry
    /// Keep it unfinished for another user or the next launch: the server wants a sign-in (a guest holding an account's
    /// subscription), or does not sell the product yet.
    case keep

    /// The verdict after `error`, the failure of a redemption.
    static func after(_ error: any Error) -> RedemptionVerdict {
        guard let error = error as? ClientError else { return .retry }
        switch error.code {
        // Unauthorized: the session ended meanwhile; tried again once someone is signed in (the same user too).
        case .offline, .timedOut, .rateLimited, .unauthorized: return .retry
        case .server:
            if let status = error.status, !SyncSchedule.isAnswer(status: status) { return .retry }
            switch error.serverCode {
            case .purchaseClaimed?: return .finish
            case .invalidSignature?, .untrustedChain?, .unsupportedAlgorithm?, .wrongBundle?, .wrongEnvironment?, .wrongApp?:
                return .refuse
            default: return .keep
            }
        default: return .keep
        }
    }
}

/// A transaction the server refused for good (``RedemptionVerdict/refuse``): finished, and reported to the app.
public struct RefusedTransaction: Sendable {
    /// Apple's transaction id.
    public var transactionId: UInt64
    /// The product bought.
    public var productId: String
    /// Why: the server's refusal (``ClientError/serverCode``: `invalid_signature`, `untrusted_chain`, `wrong_bundle`,
    /// `wrong_environment`, …).
    public var error: ClientError
}

/// What ``PurchasesClient/restore()`` restored.
public struct RestoredPurchases: Sendable {
    /// The purchases the server has for this account from the Apple Account's entitlements (subscriptions running and
    /// non-consumables), each once however often restored. Consumables are never restored: once delivered, they are
    /// spent.
    public var purchases: [Purchase] = []
    /// When the account's premium ends after the restore; nil: no premium.
    public var premiumUntil: Date?
    /// Entitlements the server would not give this account: `sign_in_required` (a guest holding a subscription an
    /// account bought: sign in to that account, then restore again), `purchase_claimed` (another account has it),
    /// a refused signature.
    public var refused: [RefusedTransaction] = []
}
