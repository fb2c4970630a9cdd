import Foundation
import Logging
import TallyAPI
import TallyAppStore
import TallyStore

/// How a verified App Store Server Notification is taken, wherever it came from: the webhook (Apple posting it) or a
/// replay of Apple's notification history (``AppStoreReconciliation``). Applied once by its `notificationUUID`.
struct AppStoreNotificationIntake: Sendable {
    let store: any TallyStorage
    let clock: any TallyClock
    /// Told of the wallets a notification changed.
    let notifier: any ChangeNotifier
    /// Woken when a consumption request is queued; nil without the App Store Server API.
    let consumptionAnswers: ConsumptionAnswers?
    /// The products a notification's transactions are read against.
    let appStore: AppStoreConfiguration

    /// Takes `notification`: a consumption request queued first (a crash before the notification is recorded as seen
    /// leaves it queued, and Apple's retry finds it so: one row per notification), then the notification applied,
    /// the wallets it changed announced, and Apple's refund decision recorded beside its request.
    func take(_ notification: AppStoreNotification, logger: Logger) async throws -> NotificationOutcome {
        let verifiedNotification = AppStorePayloads.notification(notification, products: appStore)
        if let consumptionRequest = AppStorePayloads.consumptionRequest(notification),
            try await store.queueConsumptionRequest(consumptionRequest)
        {
            consumptionAnswers?.poke()
        }
        let outcome = try await store.apply(verifiedNotification, now: clock.now)
        for changed in outcome.changedUsers { notifier.walletChanged(userId: changed) }
        if let (transactionId, decision) = AppStorePayloads.refundDecision(notification) {
            try await store.recordRefundDecision(transactionId: transactionId, decision, at: notification.payload.signedDate)
        }
        logger.info(
            "app store notification",
            metadata: [
                "tally.notification": .string(verifiedNotification.type.rawValue),
                "tally.disposition": .string(outcome.disposition.rawValue),
            ])
        return outcome
    }
}
