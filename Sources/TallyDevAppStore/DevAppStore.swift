import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyAppStore

/// A local stand-in for the App Store that speaks its protocol and signs like Apple, for development and tests: it
/// sells products (StoreKit 2 signed transactions), moves subscriptions through renewals, billing failures, grace
/// periods and expiry, refunds and revokes, and sends each event as a signed App Store Server Notification V2 to a
/// webhook, retrying failed deliveries on a compressed copy of Apple's schedule (``DevDeliverySchedule``).
///
/// Every JWS is ES256 with `x5c` [leaf, intermediate, root] from ``authority``; every date comes from the injected
/// clock. The in-process API is what the server's tests call; `tally-dev dev-appstore` serves the same over HTTP
/// (``buildDevAppStoreApplication(store:host:port:logger:onServerRunning:)``).
///
/// Each event method returns what it signed; with `send: true` (the default) and a webhook set, the notification is
/// also queued for delivery. Pass `send: false` to keep it, then ``deliver(_:)`` it later — in any order, as often as
/// wanted — to test duplicates and reordering. Deliveries happen while ``run()`` runs.
public final class DevAppStore: Sendable {
    /// How the stand-in signs and delivers.
    public struct Configuration: Sendable {
        /// The bundle id every payload names.
        public var bundleId = "com.example.oracle"
        /// The app's Apple id, written into notifications when set (a server needs it for Production notifications).
        public var appAppleId: Int64?
        /// The environment every payload names.
        public var environment: AppStoreEnvironment = .sandbox
        /// Where notifications are posted (`POST {"signedPayload": …}`); nil: none are sent.
        public var webhook: String?
        /// Seconds of the clock that stand for one hour of Apple's retry schedule (1: retries after 1, 12, 24, 48, 72 s).
        public var hour: TimeInterval = 1
        /// A subscription period's length.
        public var subscriptionPeriod: TimeInterval = 30 * 24 * 3600
        /// The billing grace period a renewal failure opens, by default.
        public var gracePeriod: TimeInterval = 16 * 24 * 3600
        /// The type of each product id (a purchase may also say its own); unlisted products are consumables.
        public var productTypes: [String: AppStoreProductType] = [:]
        /// The storefront written into transactions.
        public var storefront = "USA"
        /// The first transaction id; nil picks a random one in Apple's range, so ids from two runs do not collide.
        public var firstTransactionId: UInt64?
        /// The most one delivery attempt may take.
        public var attemptTimeout: TimeAmount = .seconds(10)
        /// The In-App Purchase key App Store Server API requests must be signed with; nil: a new one.
        public var serverAPIKey: DevServerAPIKey?

        /// The defaults: `com.example.oracle`, Sandbox, no webhook, an hour of Apple's schedule per second.
        public init() {}
    }

    /// What a purchase or a renewal signed: the transaction (as the app gets it from StoreKit) and the notification.
    public struct Purchase: Sendable, Hashable {
        /// The transaction.
        public let transaction: JWSTransactionDecodedPayload
        /// The transaction, signed: what `Transaction.jwsRepresentation` would give the app.
        public let signedTransaction: String
        /// A subscription's renewal information (nil for other products).
        public let renewalInfo: JWSRenewalInfoDecodedPayload?
        /// It signed.
        public let signedRenewalInfo: String?
        /// The notification (`ONE_TIME_CHARGE`, `SUBSCRIBED`, `DID_RENEW`).
        public let notification: Notification
    }

    /// A signed notification.
    public struct Notification: Sendable, Hashable {
        /// Its payload.
        public let payload: ResponseBodyV2DecodedPayload
        /// The transaction it embeds, if any.
        public let transaction: JWSTransactionDecodedPayload?
        /// The renewal information it embeds, if any.
        public let renewalInfo: JWSRenewalInfoDecodedPayload?
        /// The signed payload.
        public let signedPayload: String
        /// Its id.
        public var notificationUUID: String { payload.notificationUUID }
        /// The body posted to a webhook: `{"signedPayload":"<JWS>"}`.
        public var body: [UInt8] { Array(#"{"signedPayload":"\#(signedPayload)"}"#.utf8) }
    }

    /// A request the stand-in cannot carry out; ``status`` is what its HTTP API answers.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// A stable name: `unknown_transaction`, `not_a_subscription`, `already_revoked`, `not_revoked`, `unknown_notification`.
        public let code: String
        /// What is wrong.
        public let message: String
        /// The HTTP status for it.
        public let status: Int
        /// `code: message`.
        public var description: String { "\(code): \(message)" }

        static func unknownTransaction(_ id: String) -> Self { Self(code: "unknown_transaction", message: "no transaction \(id)", status: 404) }
        static func notASubscription(_ id: String) -> Self {
            Self(code: "not_a_subscription", message: "transaction \(id) is not an auto-renewable subscription", status: 409)
        }
    }

    /// The configuration.
    public let configuration: Configuration
    /// The certificate authority that signs.
    public let authority: DevCertificateAuthority
    /// The In-App Purchase key the App Store Server API authenticates requests with (``DevServerAPIKey``).
    public let serverAPIKey: DevServerAPIKey
    /// What the App Store Server API received and is told to do (consumption answers, 401s, faults).
    public let serverAPIRecords = DevServerAPIRecords()
    /// DeviceCheck's per-device bits and its key (``DevDeviceCheck``), on this stand-in's clock.
    public let deviceCheck: DevDeviceCheck
    /// The App Attest stand-in (its own App Attestation CA and device keys), on the same clock.
    public let appAttest: DevAppAttest
    private let clock: any TallyClock
    private let logger: Logger
    private let state: Mutex<State>
    private let queue: AsyncStream<Int>
    private let queued: AsyncStream<Int>.Continuation

    private struct Subscription {
        var latestTransactionId: String
        var autoRenew = true
        var gracePeriodExpiresDate: Date?
        var inGracePeriod = false
        var inBillingRetry = false
        var expired = false
        var revoked = false
        var recentStart: Date
    }

    private struct Waiter {
        let id: UInt64
        let until: @Sendable ([DevDelivery]) -> Bool
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var nextTransactionId: UInt64
        var nextWebOrderLineItemId: UInt64
        var webhook: String?
        var transactions: [String: JWSTransactionDecodedPayload] = [:]
        var subscriptions: [String: Subscription] = [:]
        var notifications: [String: Notification] = [:]
        var notificationOrder: [String] = []
        var deliveries: [DevDelivery] = []
        var waiters: [Waiter] = []
        var nextWaiter: UInt64 = 0
    }

    /// A stand-in signing with `authority`, on `clock`.
    public init(
        configuration: Configuration = Configuration(), authority: DevCertificateAuthority, clock: any TallyClock = DevSystemClock(),
        logger: Logger = Logger(label: "tally.dev-appstore")
    ) {
        self.configuration = configuration
        self.authority = authority
        self.serverAPIKey = configuration.serverAPIKey ?? DevServerAPIKey.generate()
        self.deviceCheck = DevDeviceCheck(clock: clock)
        self.clock = clock
        self.logger = logger
        self.appAttest = DevAppAttest(clock: clock)
        let first = configuration.firstTransactionId ?? UInt64.random(in: 2_000_000_000_000_000...2_000_900_000_000_000)
        state = Mutex(State(nextTransactionId: first, nextWebOrderLineItemId: first / 1000, webhook: configuration.webhook))
        (queue, queued) = AsyncStream.makeStream(of: Int.self)
    }

    // MARK: Events

    /// Sells `quantity` of `productId` (of `type`, else the configured type, else consumable) to the account
    /// `appAccountToken` names: a new transaction, and `ONE_TIME_CHARGE` (or `SUBSCRIBED`/`INITIAL_BUY` with renewal
    /// information for an auto-renewable subscription).
    public func purchase(
        productId: String, appAccountToken: UUID? = nil, quantity: Int = 1, type: AppStoreProductType? = nil,
        defect: DevSigningDefect? = nil, send: Bool = true
    ) throws -> Purchase {
        let type = type ?? configuration.productTypes[productId] ?? .consumable
        let purchase = try state.withLock { state throws -> Purchase in
            let now = Self.millis(clock.now)
            let id = Self.take(&state.nextTransactionId)
            let subscribing = type == .autoRenewableSubscription
            var transaction = JWSTransactionDecodedPayload(
                transactionId: id, originalTransactionId: id, bundleId: configuration.bundleId, productId: productId,
                purchaseDate: now, originalPurchaseDate: now, quantity: subscribing ? 1 : max(1, quantity), type: type,
                appAccountToken: appAccountToken, signedDate: now, environment: configuration.environment.rawValue,
                transactionReason: .purchase, storefront: configuration.storefront, storefrontId: "143441", price: 990, currency: "USD")
            guard subscribing else {
                state.transactions[id] = transaction
                let notification = try makeNotification(
                    .oneTimeCharge, nil, transaction: transaction, renewal: nil, status: nil, now: now, defect: defect, into: &state)
                return Purchase(
                    transaction: transaction, signedTransaction: try sign(transaction, defect), renewalInfo: nil, signedRenewalInfo: nil,
                    notification: notification)
            }
            transaction.expiresDate = Self.millis(now.addingTimeInterval(configuration.subscriptionPeriod))
            transaction.webOrderLineItemId = Self.take(&state.nextWebOrderLineItemId)
            transaction.subscriptionGroupIdentifier = "21000000"
            state.transactions[id] = transaction
            state.subscriptions[id] = Subscription(latestTransactionId: id, recentStart: now)
            return try subscriptionEvent(.subscribed, .initialBuy, originalTransactionId: id, now: now, defect: defect, into: &state)
        }
        if send { deliver(purchase.notification) }
        return purchase
    }

    /// Renews the subscription `transactionId` belongs to: a new transaction for the next period and `DID_RENEW`
    /// (`BILLING_RECOVERY` after a billing failure); after expiry, `SUBSCRIBED`/`RESUBSCRIBE` from now.
    public func renew(_ transactionId: String, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Purchase {
        let purchase = try state.withLock { state throws -> Purchase in
            let now = Self.millis(clock.now)
            let original = try subscriptionId(of: transactionId, in: state)
            guard var subscription = state.subscriptions[original], let latest = state.transactions[subscription.latestTransactionId] else {
                throw Failure.notASubscription(transactionId)
            }
            let type: AppStoreNotificationType
            let subtype: AppStoreNotificationSubtype?
            let start: Date
            if subscription.expired || subscription.revoked {
                (type, subtype, start) = (.subscribed, .resubscribe, now)
                subscription.recentStart = now
            } else if subscription.inBillingRetry {
                (type, subtype, start) = (.didRenew, .billingRecovery, now)
            } else {
                (type, subtype, start) = (.didRenew, nil, latest.expiresDate ?? now)
            }
            let id = Self.take(&state.nextTransactionId)
            var transaction = latest
            transaction.transactionId = id
            transaction.purchaseDate = start
            transaction.expiresDate = Self.millis(start.addingTimeInterval(configuration.subscriptionPeriod))
            transaction.signedDate = now
            transaction.transactionReason = type == .didRenew ? .renewal : .purchase
            transaction.webOrderLineItemId = Self.take(&state.nextWebOrderLineItemId)
            transaction.revocationDate = nil
            transaction.revocationReason = nil
            transaction.revocationType = nil
            transaction.revocationPercentage = nil
            state.transactions[id] = transaction
            subscription.latestTransactionId = id
            subscription.autoRenew = true
            subscription.inBillingRetry = false
            subscription.inGracePeriod = false
            subscription.gracePeriodExpiresDate = nil
            subscription.expired = false
            subscription.revoked = false
            state.subscriptions[original] = subscription
            return try subscriptionEvent(type, subtype, originalTransactionId: original, now: now, defect: defect, into: &state)
        }
        if send { deliver(purchase.notification) }
        return purchase
    }

    /// Turns auto-renew of `transactionId`'s subscription on or off: `DID_CHANGE_RENEWAL_STATUS`
    /// (`AUTO_RENEW_ENABLED` / `AUTO_RENEW_DISABLED`).
    public func setAutoRenew(_ transactionId: String, enabled: Bool, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        try subscriptionChange(transactionId, .didChangeRenewalStatus, enabled ? .autoRenewEnabled : .autoRenewDisabled, defect, send) {
            subscription, _ in subscription.autoRenew = enabled
        }
    }

    /// Fails the renewal of `transactionId`'s subscription: `DID_FAIL_TO_RENEW`, with a grace period of `gracePeriod`
    /// from the period's end (`GRACE_PERIOD`, `gracePeriodExpiresDate`) unless it is nil (then billing retry only).
    public func failRenewal(
        _ transactionId: String, gracePeriod: TimeInterval? = nil, noGracePeriod: Bool = false, defect: DevSigningDefect? = nil,
        send: Bool = true
    ) throws -> Notification {
        let grace = noGracePeriod ? nil : (gracePeriod ?? configuration.gracePeriod)
        return try subscriptionChange(transactionId, .didFailToRenew, grace == nil ? nil : .gracePeriod, defect, send) { subscription, latest in
            subscription.inBillingRetry = true
            if let grace {
                subscription.inGracePeriod = true
                subscription.gracePeriodExpiresDate = Self.millis((latest.expiresDate ?? self.clock.now).addingTimeInterval(grace))
            }
        }
    }

    /// Ends the grace period of `transactionId`'s subscription without a renewal: `GRACE_PERIOD_EXPIRED` (billing retry goes on).
    public func expireGracePeriod(_ transactionId: String, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        try subscriptionChange(transactionId, .gracePeriodExpired, nil, defect, send) { subscription, _ in
            subscription.inGracePeriod = false
        }
    }

    /// Expires `transactionId`'s subscription: `EXPIRED`, `BILLING_RETRY` after a billing failure, else `VOLUNTARY`.
    public func expire(_ transactionId: String, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        let subtype: AppStoreNotificationSubtype = try state.withLock { state in
            let original = try subscriptionId(of: transactionId, in: state)
            return state.subscriptions[original]?.inBillingRetry == true ? .billingRetry : .voluntary
        }
        return try subscriptionChange(transactionId, .expired, subtype, defect, send) { subscription, _ in
            subscription.expired = true
            subscription.inGracePeriod = false
            if subtype == .voluntary { subscription.autoRenew = false }
        }
    }

    /// Refunds `transactionId`: `REFUND` with `revocationDate` now, `REFUND_FULL`, or `REFUND_PRORATED` with
    /// `revocationPercentage` (milliunits: 50_000 is half) when `percentage` is below 100_000.
    public func refund(_ transactionId: String, percentage: Int? = nil, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        let prorated = percentage.map { $0 < 100_000 } ?? false
        return try revocation(transactionId, .refund, defect, send) { transaction, now in
            guard transaction.revocationDate == nil else {
                throw Failure(code: "already_revoked", message: "transaction \(transactionId) is already refunded or revoked", status: 409)
            }
            transaction.revocationDate = now
            transaction.revocationReason = 0
            transaction.revocationType = prorated ? .refundProrated : .refundFull
            transaction.revocationPercentage = prorated ? percentage : nil
            return true
        }
    }

    /// Reverses the refund of `transactionId`: `REFUND_REVERSED`, the transaction without its revocation.
    public func reverseRefund(_ transactionId: String, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        try revocation(transactionId, .refundReversed, defect, send) { transaction, _ in
            guard transaction.revocationDate != nil, transaction.revocationType != .familyRevoke else {
                throw Failure(code: "not_revoked", message: "transaction \(transactionId) is not refunded", status: 409)
            }
            transaction.revocationDate = nil
            transaction.revocationReason = nil
            transaction.revocationType = nil
            transaction.revocationPercentage = nil
            return false
        }
    }

    /// Revokes `transactionId` from the user (Family Sharing stopped sharing it): `REVOKE`, `FAMILY_REVOKE`.
    public func revoke(_ transactionId: String, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        try revocation(transactionId, .revoke, defect, send) { transaction, now in
            guard transaction.revocationDate == nil else {
                throw Failure(code: "already_revoked", message: "transaction \(transactionId) is already refunded or revoked", status: 409)
            }
            transaction.revocationDate = now
            transaction.revocationType = .familyRevoke
            return true
        }
    }

    /// The customer asked Apple to refund `transactionId`: `CONSUMPTION_REQUEST`, with `consumptionRequestReason`
    /// `reason` (`UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, `UNSATISFIED_WITH_PURCHASE`, `LEGAL`, `OTHER`) when given.
    /// The server answers with Send Consumption Information (``serverAPIRecords``).
    public func requestConsumption(_ transactionId: String, reason: String? = nil, defect: DevSigningDefect? = nil, send: Bool = true) throws
        -> Notification
    {
        try transactionNotice(transactionId, .consumptionRequest, reason: reason, defect, send)
    }

    /// Apple declined the refund the customer asked for: `REFUND_DECLINED` (the transaction unchanged).
    public func declineRefund(_ transactionId: String, defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        try transactionNotice(transactionId, .refundDeclined, reason: nil, defect, send)
    }

    /// A `TEST` notification (no transaction), as App Store Connect's "Request a Test Notification" sends.
    public func test(defect: DevSigningDefect? = nil, send: Bool = true) throws -> Notification {
        let notification = try state.withLock { state in
            try makeNotification(.test, nil, transaction: nil, renewal: nil, status: nil, now: Self.millis(clock.now), defect: defect, into: &state)
        }
        if send { deliver(notification) }
        return notification
    }

    // MARK: Looking things up

    /// The transaction `transactionId` as it stands (with its revocation, if any).
    public func transaction(_ transactionId: String) -> JWSTransactionDecodedPayload? {
        state.withLock { $0.transactions[transactionId] }
    }

    /// Every transaction, in the order minted.
    public var transactions: [JWSTransactionDecodedPayload] {
        state.withLock { $0.transactions.values.sorted { (UInt64($0.transactionId) ?? 0) < (UInt64($1.transactionId) ?? 0) } }
    }

    /// Every notification signed, in the order signed.
    public var notifications: [Notification] {
        state.withLock { state in state.notificationOrder.compactMap { state.notifications[$0] } }
    }

    /// The notification `notificationUUID`, signed earlier.
    public func notification(_ notificationUUID: String) -> Notification? {
        state.withLock { $0.notifications[notificationUUID] }
    }

    /// The transaction signed again with `defect` (for tests of what a server refuses).
    public func signedTransaction(_ transactionId: String, defect: DevSigningDefect? = nil) throws -> String {
        guard let transaction = transaction(transactionId) else { throw Failure.unknownTransaction(transactionId) }
        return try sign(transaction, defect)
    }

    /// The stand-in's clock's now.
    var now: Date { clock.now }

    // MARK: Delivery

    /// The webhook notifications go to.
    public var webhook: String? { state.withLock { $0.webhook } }

    /// Sends later notifications to `webhook` (nil: to none).
    public func setWebhook(_ webhook: String?) { state.withLock { $0.webhook = webhook } }

    /// Every delivery so far, in the order queued.
    public var deliveries: [DevDelivery] { state.withLock { $0.deliveries } }

    /// Queues `notification` for delivery to the webhook (again, if it was sent before: a duplicate, with the same
    /// `notificationUUID`, as Apple's retries have). Without a webhook nothing is sent and nil is returned.
    @discardableResult
    public func deliver(_ notification: Notification) -> DevDelivery? {
        let delivery = state.withLock { state -> DevDelivery? in
            state.notifications[notification.notificationUUID] = notification
            guard let webhook = state.webhook else { return nil }
            let delivery = DevDelivery(
                id: state.deliveries.count + 1, notificationUUID: notification.notificationUUID,
                notificationType: notification.payload.notificationType.rawValue, subtype: notification.payload.subtype?.rawValue,
                webhook: webhook, state: .pending, attempts: [], nextAttemptAt: nil)
            state.deliveries.append(delivery)
            return delivery
        }
        guard let delivery else { return nil }
        changed()
        queued.yield(delivery.id)
        return delivery
    }

    /// Waits until the deliveries satisfy `until` (checked now and after every change); returns them. Throws
    /// `CancellationError` when the waiting task is cancelled (a test's time limit).
    @discardableResult
    public func waitForDeliveries(until: @escaping @Sendable ([DevDelivery]) -> Bool) async throws -> [DevDelivery] {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Bool in
                    if until(state.deliveries) || Task.isCancelled { return true }
                    state.waiters.append(Waiter(id: id, until: until, continuation: continuation))
                    return false
                }
                guard ready else { return }
                if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
        return deliveries
    }

    /// Delivers queued notifications until cancelled: each delivery on its own child task, attempts spaced by
    /// ``DevDeliverySchedule`` on the clock. Run it once (``buildDevAppStoreApplication(store:host:port:logger:onServerRunning:)``
    /// does not: the CLI runs both, tests too).
    public func run() async {
        await withDiscardingTaskGroup { group in
            for await id in queue {
                group.addTask { await self.attempts(id) }
            }
        }
    }

    private func attempts(_ id: Int) async {
        guard let (webhook, body) = state.withLock({ state -> (String, [UInt8])? in
            guard let delivery = state.deliveries.first(where: { $0.id == id }), case let webhook = delivery.webhook,
                let notification = state.notifications[delivery.notificationUUID]
            else { return nil }
            return (webhook, notification.body)
        }) else { return }
        var attempt = 0
        while !Task.isCancelled {
            attempt += 1
            let at = clock.now
            var status: Int?
            var failure: String?
            do {
                status = try await DevWebhook.post(body, to: webhook, userAgent: "tally-dev-appstore/1", timeout: configuration.attemptTimeout)
            } catch {
                if Task.isCancelled { return }
                failure = Self.describe(error)
            }
            let delivered = status.map(DevDeliverySchedule.isDelivered(status:)) ?? false
            let delay = delivered ? nil : DevDeliverySchedule.delay(afterAttempt: attempt, hour: configuration.hour)
            update(id) { delivery in
                delivery.attempts.append(DevDelivery.Attempt(at: at, status: status, error: failure))
                if delivered {
                    delivery.state = .delivered
                    delivery.nextAttemptAt = nil
                } else if let delay {
                    delivery.state = .retrying
                    delivery.nextAttemptAt = at.addingTimeInterval(delay)
                } else {
                    delivery.state = .failed
                    delivery.nextAttemptAt = nil
                }
            }
            logger.debug(
                "dev-appstore: delivery attempt",
                metadata: [
                    "appstore.delivery": "\(id)", "appstore.attempt": "\(attempt)",
                    "appstore.status": .string(status.map { "\($0)" } ?? failure ?? "-"),
                ])
            guard let delay else { return }
            do { try await clock.sleep(for: delay) } catch { return }
        }
    }

    private func update(_ id: Int, _ change: (inout DevDelivery) -> Void) {
        state.withLock { state in
            guard let index = state.deliveries.firstIndex(where: { $0.id == id }) else { return }
            change(&state.deliveries[index])
        }
        changed()
    }

    /// Wakes the waiters whose condition now holds.
    private func changed() {
        let woken = state.withLock { state -> [Waiter] in
            let deliveries = state.deliveries
            let due = state.waiters.filter { $0.until(deliveries) }
            state.waiters.removeAll { waiter in due.contains { $0.id == waiter.id } }
            return due
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    private static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        if text.localizedCaseInsensitiveContains("refused") { return "connection refused" }
        if error is HTTPClientError, text.contains("deadlineExceeded") || text.contains("readTimeout") { return "timed out" }
        return String(text.prefix(120))
    }

    // MARK: Signing

    private func sign(_ payload: some Encodable, _ defect: DevSigningDefect?) throws -> String {
        try DevJWS.sign(payload, chain: try authority.chain(defect), defect: defect)
    }

    private func subscriptionId(of transactionId: String, in state: State) throws -> String {
        guard let transaction = state.transactions[transactionId] else { throw Failure.unknownTransaction(transactionId) }
        guard transaction.type == .autoRenewableSubscription, state.subscriptions[transaction.originalTransactionId] != nil else {
            throw Failure.notASubscription(transactionId)
        }
        return transaction.originalTransactionId
    }

    /// A change of a subscription's state that makes no new transaction, then its notification.
    private func subscriptionChange(
        _ transactionId: String, _ type: AppStoreNotificationType, _ subtype: AppStoreNotificationSubtype?,
        _ defect: DevSigningDefect?, _ send: Bool, _ change: @escaping (inout Subscription, JWSTransactionDecodedPayload) -> Void
    ) throws -> Notification {
        let notification = try state.withLock { state throws -> Notification in
            let original = try subscriptionId(of: transactionId, in: state)
            guard var subscription = state.subscriptions[original], let latest = state.transactions[subscription.latestTransactionId] else {
                throw Failure.notASubscription(transactionId)
            }
            change(&subscription, latest)
            state.subscriptions[original] = subscription
            return try subscriptionEvent(type, subtype, originalTransactionId: original, now: Self.millis(clock.now), defect: defect, into: &state)
                .notification
        }
        if send { deliver(notification) }
        return notification
    }

    /// A refund, its reversal or a revocation of one transaction (`revokes`: whether it now is revoked).
    private func revocation(
        _ transactionId: String, _ type: AppStoreNotificationType, _ defect: DevSigningDefect?, _ send: Bool,
        _ change: (inout JWSTransactionDecodedPayload, Date) throws -> Bool
    ) throws -> Notification {
        let notification = try state.withLock { state throws -> Notification in
            guard var transaction = state.transactions[transactionId] else { throw Failure.unknownTransaction(transactionId) }
            let now = Self.millis(clock.now)
            let revoked = try change(&transaction, now)
            transaction.signedDate = now
            state.transactions[transactionId] = transaction
            let original = transaction.originalTransactionId
            guard transaction.type == .autoRenewableSubscription, var subscription = state.subscriptions[original] else {
                return try makeNotification(type, nil, transaction: transaction, renewal: nil, status: nil, now: now, defect: defect, into: &state)
            }
            if subscription.latestTransactionId == transactionId { subscription.revoked = revoked }
            state.subscriptions[original] = subscription
            let renewal = renewalInfo(subscription, transaction: transaction, now: now)
            return try makeNotification(
                type, nil, transaction: transaction, renewal: renewal, status: status(subscription), now: now, defect: defect, into: &state)
        }
        if send { deliver(notification) }
        return notification
    }

    /// A notification about one transaction that changes nothing (with the subscription's renewal information and
    /// status, for a subscription's).
    private func transactionNotice(
        _ transactionId: String, _ type: AppStoreNotificationType, reason: String?, _ defect: DevSigningDefect?, _ send: Bool
    ) throws -> Notification {
        let notification = try state.withLock { state throws -> Notification in
            guard let transaction = state.transactions[transactionId] else { throw Failure.unknownTransaction(transactionId) }
            let now = Self.millis(clock.now)
            guard transaction.type == .autoRenewableSubscription, let subscription = state.subscriptions[transaction.originalTransactionId] else {
                return try makeNotification(
                    type, nil, transaction: transaction, renewal: nil, status: nil, now: now, defect: defect, reason: reason, into: &state)
            }
            return try makeNotification(
                type, nil, transaction: transaction, renewal: renewalInfo(subscription, transaction: transaction, now: now),
                status: status(subscription), now: now, defect: defect, reason: reason, into: &state)
        }
        if send { deliver(notification) }
        return notification
    }

    /// A notification about a subscription's latest transaction, with its renewal information.
    private func subscriptionEvent(
        _ type: AppStoreNotificationType, _ subtype: AppStoreNotificationSubtype?, originalTransactionId: String, now: Date,
        defect: DevSigningDefect?, into state: inout State
    ) throws -> Purchase {
        guard let subscription = state.subscriptions[originalTransactionId], var transaction = state.transactions[subscription.latestTransactionId]
        else { throw Failure.notASubscription(originalTransactionId) }
        transaction.signedDate = now
        let renewal = renewalInfo(subscription, transaction: transaction, now: now)
        let notification = try makeNotification(
            type, subtype, transaction: transaction, renewal: renewal, status: status(subscription), now: now, defect: defect, into: &state)
        return Purchase(
            transaction: transaction, signedTransaction: try sign(transaction, defect), renewalInfo: renewal,
            signedRenewalInfo: try sign(renewal, defect), notification: notification)
    }

    private func renewalInfo(_ subscription: Subscription, transaction: JWSTransactionDecodedPayload, now: Date) -> JWSRenewalInfoDecodedPayload {
        JWSRenewalInfoDecodedPayload(
            originalTransactionId: transaction.originalTransactionId, productId: transaction.productId,
            autoRenewProductId: transaction.productId, autoRenewStatus: subscription.autoRenew ? 1 : 0,
            expirationIntent: subscription.expired ? (subscription.inBillingRetry ? 2 : 1) : nil,
            gracePeriodExpiresDate: subscription.gracePeriodExpiresDate, isInBillingRetryPeriod: subscription.inBillingRetry,
            signedDate: now, environment: configuration.environment.rawValue,
            renewalDate: subscription.autoRenew && !subscription.expired ? transaction.expiresDate : nil,
            recentSubscriptionStartDate: subscription.recentStart, appAccountToken: transaction.appAccountToken)
    }

    /// `data.status`: 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
    private func status(_ subscription: Subscription) -> Int {
        if subscription.revoked { return 5 }
        if subscription.expired { return 2 }
        if subscription.inGracePeriod { return 4 }
        if subscription.inBillingRetry { return 3 }
        return 1
    }

    private func makeNotification(
        _ type: AppStoreNotificationType, _ subtype: AppStoreNotificationSubtype?, transaction: JWSTransactionDecodedPayload?,
        renewal: JWSRenewalInfoDecodedPayload?, status: Int?, now: Date, defect: DevSigningDefect?, reason: String? = nil,
        into state: inout State
    ) throws -> Notification {
        var signedTransaction = transaction
        signedTransaction?.signedDate = now
        var data = AppStoreNotificationData(
            appAppleId: configuration.appAppleId, bundleId: configuration.bundleId, bundleVersion: "1.0",
            environment: configuration.environment.rawValue, signedTransactionInfo: try signedTransaction.map { try sign($0, defect) },
            signedRenewalInfo: try renewal.map { try sign($0, defect) }, status: status)
        data.consumptionRequestReason = reason
        let payload = ResponseBodyV2DecodedPayload(
            notificationType: type, subtype: subtype, notificationUUID: UUID().uuidString.lowercased(), signedDate: now, data: data)
        let notification = Notification(
            payload: payload, transaction: signedTransaction, renewalInfo: renewal, signedPayload: try sign(payload, defect))
        state.notifications[notification.notificationUUID] = notification
        state.notificationOrder.append(notification.notificationUUID)
        return notification
    }

    private static func take(_ counter: inout UInt64) -> String {
        defer { counter += 1 }
        return String(counter)
    }

    /// `date` at whole milliseconds, exactly as a payload's date decodes (so what is returned equals what is signed).
    static func millis(_ date: Date) -> Date {
        Date(timeIntervalSince1970: TimeInterval(AppStoreJSON.milliseconds(date)) / 1000)
    }
}
