import Foundation
import Logging
import TallyAPI
import TallyAppStore
import TallyStore

/// The console's App Store views: a purchase found by the order id on the customer's receipt email (Look Up Order
/// ID), and one purchase's timeline — its credit, what was spent of it, its refunds, Apple's consumption requests,
/// what Tally answered and what Apple decided.
struct ConsolePurchases: Sendable {
    let store: any TallyStorage
    let clock: any TallyClock
    /// The App Store settings, when configured (order lookup needs `appStore.serverAPI`).
    let appStore: AppStoreConfiguration?

    /// Whether `text` looks like an App Store order id (`MQ…`, the receipt email's): letters and digits, 8 to 32.
    static func isOrderId(_ text: String) -> Bool {
        (8...32).contains(text.count) && text.uppercased().hasPrefix("M") && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    /// The account holding a transaction of the order `orderId` (asked of Apple in each accepted environment), else the
    /// account its `appAccountToken` names; nil without `appStore.serverAPI`, or when Apple knows no such order.
    func user(orderId: String) async throws -> UserRecord? {
        guard let appStore, let settings = appStore.serverAPI else { return nil }
        let api = settings.client(clock: clock, logger: Logger(label: "tally.appstore-api"))
        for environment in appStore.environments {
            guard let order = try? await api.lookUpOrder(orderId, environment: environment), order.status == 0 else { continue }
            for jws in order.signedTransactions ?? [] {
                guard let payload = try? await appStore.verifier.verifyTransaction(jws) else { continue }
                if let holder = try await store.user(transactionId: payload.transactionId) { return holder }
                if let token = payload.appAccountToken?.uuidString.lowercased(), let named = try await store.user(id: token) {
                    return named
                }
            }
        }
        return nil
    }

    /// What was sent, field by field (`60.0 % consumed, DELIVERED, sample: yes, prefers DECLINE`), or why nothing was.
    static func readable(_ record: ConsumptionRequestRecord) -> String {
        guard record.status == .sent, let answer = record.answer,
            let sent = try? JSONDecoder().decode(ConsumptionInformation.self, from: Data(answer.utf8))
        else { return record.answer ?? "–" }
        var parts = ["\(Double(sent.consumptionPercentage ?? 0) / 1_000) % consumed", sent.deliveryStatus.rawValue]
        parts.append("sample: \(sent.sampleContentProvided ? "yes" : "no")")
        parts.append(sent.refundPreference.map { "prefers \($0.rawValue)" } ?? "no preference")
        return parts.joined(separator: ", ")
    }

    /// The timeline of `transactionId` as the purchase page shows it; nil when no account holds it.
    func timeline(_ transactionId: String) async throws -> [String: Any]? {
        guard let holder = try await store.user(transactionId: transactionId) else { return nil }
        let now = clock.now
        let facts = try await store.consumptionFacts(transactionId: transactionId)
        let entries = try await store.entries(userId: holder.id, before: nil, limit: 5_000).filter { entry in
            entry.reference == transactionId || entry.reference?.hasPrefix(transactionId + "#") == true
        }
        let requests = try await store.consumptionRequests(transactionId: transactionId)
        let purchase = try await store.purchases(userId: holder.id, after: nil, limit: 100, now: now)
            .first { $0.transactionId == transactionId }
        let lot = facts?.consumption.lot(of: transactionId)
        var data: [String: Any] = [
            "transactionId": transactionId, "userId": holder.id, "user": holder.email ?? "Guest \(holder.id.prefix(8))",
            "product": purchase?.productId ?? "–", "status": purchase?.status.rawValue ?? "–", "environment": purchase?.environment ?? "–",
            "bought": purchase.map { ConsoleController.format($0.purchasedAt, zone: nil) } ?? "–",
            "entries": entries.reversed().map { entry -> [String: Any] in
                [
                    "when": ConsoleController.format(entry.createdAt, zone: nil), "kind": entry.kind.rawValue, "amount": entry.amount,
                    "reason": entry.reason ?? "",
                ]
            },
            "requests": requests.map { record -> [String: Any] in
                [
                    "requested": ConsoleController.format(record.request.requestedAt, zone: nil), "reason": record.request.reason ?? "–",
                    "status": record.status.rawValue, "attempts": record.attempts,
                    "answer": Self.readable(record), "error": record.lastError ?? "",
                    "answered": record.answeredAt.map { ConsoleController.format($0, zone: nil) } ?? "–",
                    "decision": record.decision?.rawValue ?? "none yet",
                ]
            },
            "hasRequests": !requests.isEmpty,
        ]
        if let lot {
            data["spent"] = "\(lot.spent) of \(lot.credited) tokens (\(Double(lot.consumptionMilliunits) / 1_000) %)"
            data["refunded"] = lot.refunded > 0 ? "\(lot.refunded) unspent tokens taken back" : "none"
        }
        return data
    }
}
