import Foundation
import TallyAPI
import TallyAppStore
import TallyStore

/// Verified App Store payloads turned into the facts the store takes: which product of the configuration a
/// transaction is and what it gives, the Tally user its `appAccountToken` names, its dates and its refund; a
/// notification's type and its renewal state. Pure.
enum AppStorePayloads {
    /// The store's view of a verified transaction; a product the configuration does not sell, or sells as another
    /// kind than the App Store says it is, is `422 unknown_product` (nothing is credited). A Sandbox transaction carries
    /// the configuration's bound on Sandbox credits.
    static func transaction(_ payload: JWSTransactionDecodedPayload, products: AppStoreConfiguration) throws -> VerifiedTransaction {
        guard let product = product(of: payload, in: products) else {
            throw APIError(.unknownProduct, "The server sells no product \(payload.productId) of this type (appStore.products).")
        }
        return VerifiedTransaction(
            transactionId: payload.transactionId, originalTransactionId: payload.originalTransactionId, productId: payload.productId,
            product: product, quantity: max(1, payload.quantity), appAccountToken: payload.appAccountToken?.uuidString.lowercased(),
            environment: payload.environment, purchaseDate: payload.purchaseDate, originalPurchaseDate: payload.originalPurchaseDate,
            expiresDate: payload.expiresDate, revocationDate: payload.revocationDate, revocationPercentage: payload.revocationPercentage,
            signedDate: payload.signedDate,
            sandboxLimit: payload.environment == VerifiedTransaction.sandbox ? products.sandboxTokensPerAccount : nil)
    }

    /// The store's view of a verified notification. A transaction of a product the configuration does not sell is
    /// left out: the notification is then only recorded as seen.
    static func notification(_ notification: AppStoreNotification, products: AppStoreConfiguration) -> VerifiedNotification {
        let payload = notification.payload
        let transaction = notification.transaction.flatMap { try? Self.transaction($0, products: products) }
        let renewal = notification.renewalInfo.map { info in
            RenewalState(autoRenews: info.autoRenews, gracePeriodExpiresDate: info.gracePeriodExpiresDate)
        }
        return VerifiedNotification(
            notificationUUID: payload.notificationUUID, type: NotificationType(rawValue: payload.notificationType.rawValue),
            subtype: payload.subtype?.rawValue, signedDate: payload.signedDate, transaction: transaction, renewal: renewal)
    }

    /// The consumption request a `CONSUMPTION_REQUEST` notification makes, to queue; nil for any other notification
    /// (or one without its transaction).
    static func consumptionRequest(_ notification: AppStoreNotification) -> NewConsumptionRequest? {
        guard notification.payload.notificationType == .consumptionRequest, let transaction = notification.transaction else { return nil }
        return NewConsumptionRequest(
            notificationUUID: notification.payload.notificationUUID, transactionId: transaction.transactionId,
            environment: transaction.environment, reason: notification.payload.data?.consumptionRequestReason,
            requestedAt: notification.payload.signedDate)
    }

    /// Apple's decision on a refund request a notification carries: `REFUND` or `REFUND_DECLINED` of a transaction.
    static func refundDecision(_ notification: AppStoreNotification) -> (transactionId: String, RefundDecision)? {
        guard let transaction = notification.transaction else { return nil }
        switch notification.payload.notificationType {
        case .refund: return (transaction.transactionId, .refund)
        case .refundDeclined: return (transaction.transactionId, .refundDeclined)
        default: return nil
        }
    }

    /// What the configuration sells under the payload's product id, if the App Store's type agrees: a consumable
    /// gives tokens, an auto-renewable subscription premium.
    static func product(of payload: JWSTransactionDecodedPayload, in configuration: AppStoreConfiguration) -> PurchaseProduct? {
        switch configuration.product(payload.productId)?.grant {
        case .tokens(let tokens) where payload.type == .consumable: return .tokens(tokens)
        case .premium where payload.type == .autoRenewableSubscription: return .premium
        default: return nil
        }
    }
}

/// The rate limits of the purchase routes (per process; see ``LimitsConfiguration``).
struct PurchaseThrottles: Sendable {
    /// Transactions redeemed per user.
    let redeemsPerUser: Throttle
    /// Notifications per client address.
    let notificationsPerAddress: Throttle

    init(_ limits: LimitsConfiguration) {
        redeemsPerUser = Throttle("purchases per user", limits.purchasesPerUser)
        notificationsPerAddress = Throttle("app store notifications per address", limits.appStoreNotificationsPerAddress)
    }
}
