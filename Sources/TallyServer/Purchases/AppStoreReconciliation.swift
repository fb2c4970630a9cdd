import Foundation
import Logging
import TallyAPI
import TallyAppStore
import TallyStore

/// Credits what Apple's records show and the server missed (a purchase whose notification and submission were both
/// lost), through the same paths as the app's submissions and Apple's notifications, so whatever runs twice — or at
/// the same time on two processes — applies once:
/// - ``reconcile(userId:orderId:logger:)``: the user's transaction history (Get Transaction History, from a transaction
///   the server knows or the customer's order id), each transaction whose `appAccountToken` is the user's redeemed;
/// - ``replay(_:logger:)``: Apple's notification history (failures only by default), each notification taken as the
///   webhook takes it.
struct AppStoreReconciliation {
    let store: any TallyStorage
    let clock: any TallyClock
    /// Told of the wallets a redemption changed.
    let notifier: any ChangeNotifier
    /// The products, environments and verifier.
    let appStore: AppStoreConfiguration
    /// Apple's App Store Server API.
    let api: AppStoreServerAPIClient
    /// Takes the replayed notifications as the webhook takes them.
    let intake: AppStoreNotificationIntake

    /// The most history pages read in one call (20 transactions or notifications each).
    static let maxPages = 100

    func reconcile(userId: String, orderId: String?, logger: Logger) async throws -> ReconcileReport {
        guard try await store.user(id: userId) != nil else { throw APIError(.notFound, "No such user.") }
        var signed: [String] = []
        var starts: [(transactionId: String, environment: AppStoreEnvironment)] = []
        if let orderId {
            guard !orderId.isEmpty, orderId.utf8.count <= 64 else { throw APIError(.invalidField, "'orderId' is 1 to 64 characters.") }
            for environment in appStore.environments {
                let order = try await Self.calling { try await api.lookUpOrder(orderId, environment: environment) }
                guard order.status == 0, let transactions = order.signedTransactions, !transactions.isEmpty else { continue }
                signed += transactions
                if let first = try? await appStore.verifier.verifyTransaction(transactions[0]) {
                    starts.append((first.transactionId, environment))
                }
            }
        }
        if let known = try await store.purchases(userId: userId, after: nil, limit: 1, now: clock.now).first,
            let environment = AppStoreEnvironment(rawValue: known.environment)
        {
            starts.append((known.transactionId, environment))
        }
        guard !starts.isEmpty else {
            throw APIError(.notFound, "No App Store transaction of this user is known: pass 'orderId' from the customer's receipt email.")
        }
        var seenEnvironments: Set<AppStoreEnvironment> = []
        for start in starts where seenEnvironments.insert(start.environment).inserted {
            var revision: String?
            for _ in 0..<Self.maxPages {
                let page = try await Self.calling {
                    try await api.transactionHistory(transactionId: start.transactionId, revision: revision, environment: start.environment)
                }
                signed += page.signedTransactions
                guard page.hasMore, let next = page.revision else { break }
                revision = next
            }
        }
        var report = ReconcileReport(credited: [], alreadyApplied: 0, otherAccounts: 0, refused: [])
        var seen: Set<String> = []
        for jws in signed {
            let verified = await Self.verifying { try await appStore.verifier.verifyTransaction(jws) }
            guard case .success(let payload) = verified else {
                if case .failure(let refusal) = verified { report.refused.append(refusal.code) }
                continue
            }
            guard seen.insert(payload.transactionId).inserted else { continue }
            guard payload.appAccountToken?.uuidString.lowercased() == userId else {
                report.otherAccounts += 1
                continue
            }
            do {
                let transaction = try AppStorePayloads.transaction(payload, products: appStore)
                let redemption = try await store.redeem(transaction, userId: userId, now: clock.now)
                for changed in redemption.changedUsers { notifier.walletChanged(userId: changed) }
                if redemption.changedUsers.contains(userId) {
                    report.credited.append(payload.transactionId)
                } else {
                    report.alreadyApplied += 1
                }
            } catch let error as APIError {
                report.refused.append("\(payload.transactionId): \(error.body.error.code.rawValue)")
            } catch let error as StoreError {
                report.refused.append("\(payload.transactionId): \(error.code)")
            }
        }
        logger.notice(
            "app store reconciliation",
            metadata: [
                "tally.user": .string(userId), "tally.credited": "\(report.credited.count)", "tally.already": "\(report.alreadyApplied)",
            ])
        return report
    }

    func replay(_ request: ReplayNotificationsRequest, logger: Logger) async throws -> ReplayReport {
        let now = clock.now
        let until = request.until ?? now
        guard request.since < until, until.timeIntervalSince(request.since) <= 180 * 86_400 else {
            throw APIError(.invalidField, "'since' must be before 'until' (default now), at most 180 days before it: Apple keeps no more.")
        }
        let query = NotificationHistoryQuery(start: request.since, end: until, onlyFailures: request.onlyFailures ?? true)
        var report = ReplayReport(read: 0, dispositions: [:], refused: [])
        for environment in appStore.environments {
            var token: String?
            for _ in 0..<Self.maxPages {
                let page = try await Self.calling { try await api.notificationHistory(query, paginationToken: token, environment: environment) }
                for item in page.notificationHistory {
                    report.read += 1
                    let verified = await Self.verifying { try await appStore.verifier.verifyNotification(item.signedPayload) }
                    guard case .success(let notification) = verified else {
                        if case .failure(let refusal) = verified { report.refused.append(refusal.code) }
                        continue
                    }
                    let outcome = try await intake.take(notification, logger: logger)
                    report.dispositions[outcome.disposition.rawValue, default: 0] += 1
                }
                guard page.hasMore, let next = page.paginationToken else { break }
                token = next
            }
        }
        logger.notice("app store notification replay", metadata: ["tally.read": "\(report.read)", "tally.applied": "\(report.dispositions["applied"] ?? 0)"])
        return report
    }

    /// A verification's refusal, by its code.
    struct Refusal: Error {
        let code: String
    }

    /// What `verify` verified, or why it refused.
    static func verifying<T>(_ verify: () async throws -> T) async -> Result<T, Refusal> {
        do {
            return .success(try await verify())
        } catch let error as AppStoreVerificationError {
            return .failure(Refusal(code: error.code.rawValue))
        } catch {
            return .failure(Refusal(code: "invalid_signature"))
        }
    }

    /// `call`, its failure as the API's error: Apple's answer or silence is a 502 naming it.
    static func calling<T>(_ call: () async throws -> T) async throws -> T {
        do {
            return try await call()
        } catch let error as AppStoreServerAPIError {
            throw APIError(.upstreamFailed, "The App Store Server API failed: \(error.message)")
        }
    }
}
