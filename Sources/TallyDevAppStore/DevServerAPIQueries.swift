import Crypto
import Foundation
import TallyAppStore

/// One notification as Get Notification History answers it (`NotificationHistoryResponseItem`).
public struct DevNotificationHistoryItem: Sendable, Hashable, Codable {
    /// One attempt to send it (`SendAttemptItem`).
    public struct SendAttempt: Sendable, Hashable, Codable {
        /// When, in milliseconds since 1970.
        public var attemptDate: Int64
        /// `SUCCESS`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`, `TIMED_OUT`, `SOCKET_ISSUE` or `OTHER`.
        public var sendAttemptResult: String
    }

    /// The notification as signed.
    public var signedPayload: String
    /// Every attempt to send it, in order (none when it was never sent).
    public var sendAttempts: [SendAttempt]
}

/// What the App Store Server API answers from, over the transactions and notifications the store made.
///
/// A **customer** is an `appAccountToken`: the transactions minted with the same token are one customer's (renewals
/// keep their subscription's token); the purchases made without one are the store's one anonymous customer's.
extension DevAppStore {
    /// The order id of the purchase (or renewal) that made `transactionId`, like Apple's receipt's: `MQ` and eight
    /// more letters and digits, derived from the transaction id (so it is the same wherever it is asked for).
    public static func orderId(ofTransaction transactionId: String) -> String {
        let alphabet = Array("0123456789BCDFGHJKLMNPQRSTVWXZ")
        let digest = SHA256.hash(data: Data("dev-appstore order \(transactionId)".utf8))
        return "MQ" + String(digest.prefix(8).map { alphabet[Int($0) % alphabet.count] })
    }

    /// The customer `transaction` belongs to: its `appAccountToken`, or "" for the anonymous customer.
    static func customer(of transaction: JWSTransactionDecodedPayload) -> String {
        transaction.appAccountToken?.uuidString.lowercased() ?? ""
    }

    /// Every transaction of the customer `transactionId` belongs to, in the order minted; nil when there is no such
    /// transaction.
    public func customerTransactions(of transactionId: String) -> [JWSTransactionDecodedPayload]? {
        guard let transaction = transaction(transactionId) else { return nil }
        let customer = Self.customer(of: transaction)
        return transactions.filter { Self.customer(of: $0) == customer }
    }

    /// The transactions the order `orderId` made (none for an unknown order).
    public func transactions(inOrder orderId: String) -> [JWSTransactionDecodedPayload] {
        transactions.filter { Self.orderId(ofTransaction: $0.transactionId) == orderId }
    }

    /// Whether `transaction` was refunded (and the refund not reversed): revoked other than by Family Sharing.
    static func isRefunded(_ transaction: JWSTransactionDecodedPayload) -> Bool {
        transaction.revocationDate != nil && transaction.revocationType != .familyRevoke
    }

    /// Get Notification History's records: every notification signed from `start` to `end` (inclusive), in the order
    /// signed, of `type` (and `subtype`) when given, about the customer of `transactionId` when given, and with
    /// `onlyFailures` only those no attempt delivered (a notification never sent, held back with `send: false` or
    /// made without a webhook, is one: Apple never reached the server with it).
    public func notificationHistory(
        from start: Date, to end: Date, type: String? = nil, subtype: String? = nil, transactionId: String? = nil, onlyFailures: Bool = false
    ) -> [DevNotificationHistoryItem] {
        var customer: String?
        if let transactionId {
            guard let transaction = transaction(transactionId) else { return [] }
            customer = Self.customer(of: transaction)
        }
        let deliveries = self.deliveries
        return notifications.compactMap { notification -> DevNotificationHistoryItem? in
            let payload = notification.payload
            guard payload.signedDate >= start, payload.signedDate <= end else { return nil }
            if let type, payload.notificationType.rawValue != type { return nil }
            if let subtype, payload.subtype?.rawValue != subtype { return nil }
            if let customer {
                guard let transaction = notification.transaction, Self.customer(of: transaction) == customer else { return nil }
            }
            let attempts = deliveries.filter { $0.notificationUUID == notification.notificationUUID }.flatMap(\.attempts).map { attempt in
                DevNotificationHistoryItem.SendAttempt(
                    attemptDate: AppStoreJSON.milliseconds(attempt.at), sendAttemptResult: Self.sendAttemptResult(attempt))
            }
            if onlyFailures, attempts.contains(where: { $0.sendAttemptResult == "SUCCESS" }) { return nil }
            return DevNotificationHistoryItem(signedPayload: notification.signedPayload, sendAttempts: attempts)
        }
    }

    /// Apple's `sendAttemptResult` for a delivery attempt.
    static func sendAttemptResult(_ attempt: DevDelivery.Attempt) -> String {
        if let status = attempt.status {
            return DevDeliverySchedule.isDelivered(status: status) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        }
        switch attempt.error {
        case "timed out": return "TIMED_OUT"
        case "connection refused": return "SOCKET_ISSUE"
        default: return "OTHER"
        }
    }
}
