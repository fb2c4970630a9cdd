import Foundation
import Hummingbird
import Logging
import NIOCore
import TallyAPI
import TallyAppStore

/// `tally-dev dev-appstore`'s HTTP API over a ``DevAppStore`` (JSON in and out; errors `{"error":{"code","message"}}`):
///
/// - `POST /purchase {productId, appAccountToken?, quantity?, type?, send?}` → `{transactionId, originalTransactionId,
///   orderId, signedTransaction, signedRenewalInfo?, notification}`; the notification is `ONE_TIME_CHARGE` for a
///   consumable, `SUBSCRIBED` for a subscription, sent to the webhook unless `send` is false. `orderId` (`MQ…`) is
///   what Look Up Order ID takes.
/// - `POST /transactions/{transactionId}/renew` (`DID_RENEW`, answered like a purchase), `…/auto-renew {enabled}`
///   (`DID_CHANGE_RENEWAL_STATUS`), `…/billing-failure {gracePeriodSeconds?, noGracePeriod?}` (`DID_FAIL_TO_RENEW`),
///   `…/grace-period-expired`, `…/expire`, `…/refund {revocationPercentage?}` (milliunits), `…/refund-reversed`,
///   `…/revoke`, `…/consumption-request {reason?}` (`CONSUMPTION_REQUEST`, `data.consumptionRequestReason` one of
///   `UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, `UNSATISFIED_WITH_PURCHASE`, `LEGAL`, `OTHER`), `…/refund-declined`
///   (`REFUND_DECLINED`) → `{notification}`; `POST /test` (`TEST`). Each takes `send` too.
/// - `POST /notifications/{notificationUUID}/send`: deliver a notification (again): a duplicate, or one held back.
/// - `GET /deliveries`: every delivery and each attempt's outcome. `GET /root.der`: the root a server must trust.
///
/// The notification object is `{notificationUUID, notificationType, subtype?, signedPayload, delivery?}`.
///
/// The App Store Server API, as Apple serves it (``DevServerAPI``), each `/inApps/` route requiring `Authorization:
/// Bearer <JWT>` signed with the store's In-App Purchase key (else 401 `Unauthenticated`, the reason in the
/// `X-Dev-AppStore-Reason` header; Apple's errors otherwise are `{errorCode, errorMessage}`):
///
/// - `PUT /inApps/v2/transactions/consumption/{transactionId} {customerConsented, deliveryStatus, sampleContentProvided,
///   consumptionPercentage?, refundPreference?}` → 202, empty (400 for a wrong member, 404 for an unknown transaction).
/// - `GET /inApps/v2/history/{transactionId}?revision&sort&productType&productId&revoked&…` → `{revision, hasMore,
///   bundleId, appAppleId?, environment, signedTransactions}`: the customer's (same `appAccountToken`) transactions,
///   20 a page.
/// - `GET /inApps/v2/refund/lookup/{transactionId}?revision` → `{signedTransactions, revision, hasMore}`: the customer's
///   refunded transactions.
/// - `GET /inApps/v1/lookup/{orderId}` → `{status: 0|1, signedTransactions}`.
/// - `POST /inApps/v1/notifications/history?paginationToken {startDate, endDate, notificationType?, notificationSubtype?,
///   onlyFailures?, transactionId?}` → `{notificationHistory: [{signedPayload, sendAttempts: [{attemptDate,
///   sendAttemptResult}]}], hasMore, paginationToken?}`; a notification never sent counts as a failure.
///
/// And its controls: `GET /server-api-key` → `{keyId, issuerId, privateKeyPEM}` (a development stand-in hands its
/// private key out so a server under test can be configured with it); `GET /server-api-rejections` → `{count,
/// rejections: [{at, method, path, reason}]}` (every 401); `GET /consumption-answers` → `{answers: [{transactionId,
/// receivedAt, body}]}`; `POST /faults {path, status, count?, retryAfter?, errorCode?}` → `{faults}`: the next `count`
/// (1) requests whose path starts with `path` are answered `status` (with `Retry-After`, and Apple's error body:
/// 4290000 for 429, 5000000 for 5xx by default) before being served normally; `GET /faults` lists those remaining,
/// `DELETE /faults` drops them.
///
/// With `appleID`, Sign in with Apple is served too, under `/auth/` (``DevAppleIDAPI``).
public func buildDevAppStoreApplication(
    store: DevAppStore, appleID: DevAppleID? = nil, host: String = "127.0.0.1", port: Int = 8092, logger: Logger,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let router = Router()
    // First: a fault answers before any route (or the authentication) sees the request.
    router.add(middleware: DevFaultMiddleware(records: store.serverAPIRecords))
    let api = DevAppStoreAPI(store: store)
    router.get("health") { _, _ in HTTPResponse.Status.ok }
    router.get("root.der") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "application/pkix-cert"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: store.authority.rootDER)))
    }
    router.post("purchase", use: api.purchase)
    router.post("test") { request, context in
        try await api.answer(request, as: DevAppStoreAPI.SendBody.self) { body in
            DevAppStoreAPI.NotificationOnly(notification: .init(notification: try store.test(send: body.send ?? true), store: store))
        }
    }
    router.post("transactions/:id/:event", use: api.transactionEvent)
    router.post("notifications/:uuid/send") { _, context in
        guard let uuid = context.parameters.get("uuid"), let notification = store.notification(uuid) else {
            return DevAppStoreAPI.error(DevAppStore.Failure(code: "unknown_notification", message: "no such notification", status: 404))
        }
        guard store.webhook != nil else {
            return DevAppStoreAPI.error(DevAppStore.Failure(code: "no_webhook", message: "start with --webhook URL to send notifications", status: 409))
        }
        let delivery = store.deliver(notification)
        return DevAppStoreAPI.json(DevAppStoreAPI.NotificationOnly(notification: .init(notification: notification, delivery: delivery)))
    }
    router.get("deliveries") { _, _ in DevAppStoreAPI.json(["deliveries": store.deliveries]) }
    DevServerAPI(store: store, api: api).add(to: router)
    DevDeviceCheckRoutes(deviceCheck: store.deviceCheck).add(to: router)
    if let appleID { DevAppleIDAPI(appleID: appleID, api: api).add(to: router) }
    DevAppAttestAPI(appAttest: store.appAttest, api: api).add(to: router)
    return Application(
        router: router, configuration: .init(address: .hostname(host, port: port), serverName: "tally-dev-appstore"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) }, logger: logger)
}

/// The routes' bodies and answers.
struct DevAppStoreAPI: Sendable {
    let store: DevAppStore

    struct SendBody: Decodable {
        var send: Bool?
    }

    struct PurchaseBody: Decodable {
        var productId: String
        var appAccountToken: UUID?
        var quantity: Int?
        var type: String?
        var send: Bool?
        /// StoreKit's `.promotionalOffer(offerIdentifier, compactJWS:)`: the server-signed offer, verified.
        var promotionalOffer: PromotionalOffer?
        /// StoreKit's `.introductoryOfferEligibility(compactJWS:)`, verified.
        var introductoryOfferEligibility: String?
    }

    struct PromotionalOffer: Decodable {
        var offerIdentifier: String
        var compactJWS: String
    }

    struct EventBody: Decodable {
        var send: Bool?
        var enabled: Bool?
        var gracePeriodSeconds: Double?
        var noGracePeriod: Bool?
        var revocationPercentage: Int?
        var reason: String?
    }

    struct NotificationAnswer: Encodable {
        var notificationUUID: String
        var notificationType: String
        var subtype: String?
        var signedPayload: String
        var delivery: DevDelivery?

        init(notification: DevAppStore.Notification, delivery: DevDelivery?) {
            notificationUUID = notification.notificationUUID
            notificationType = notification.payload.notificationType.rawValue
            subtype = notification.payload.subtype?.rawValue
            signedPayload = notification.signedPayload
            self.delivery = delivery
        }

        /// The answer for a notification just made: with its delivery when one was queued.
        init(notification: DevAppStore.Notification, store: DevAppStore) {
            self.init(notification: notification, delivery: store.deliveries.last { $0.notificationUUID == notification.notificationUUID })
        }
    }

    struct PurchaseAnswer: Encodable {
        var transactionId: String
        var originalTransactionId: String
        var orderId: String
        var signedTransaction: String
        var signedRenewalInfo: String?
        var notification: NotificationAnswer
    }

    struct NotificationOnly: Encodable {
        var notification: NotificationAnswer
    }

    @Sendable func purchase(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await answer(request, as: PurchaseBody.self) { body in
            guard !body.productId.isEmpty, (body.quantity ?? 1) >= 1 else {
                throw DevAppStore.Failure(code: "bad_request", message: "productId must be set and quantity at least 1", status: 400)
            }
            try acceptOffers(body)
            let purchase = try store.purchase(
                productId: body.productId, appAccountToken: body.appAccountToken, quantity: body.quantity ?? 1,
                type: body.type.map(AppStoreProductType.init(rawValue:)), send: body.send ?? true)
            return purchaseAnswer(purchase)
        }
    }

    /// Verifies the offer signatures a purchase presents, as the App Store does: by the In-App Purchase key, for this
    /// product, each nonce once. A refused offer refuses the purchase (400 `invalid_offer`).
    private func acceptOffers(_ body: PurchaseBody) throws {
        var offers: [(String, String, String?)] = []
        if let offer = body.promotionalOffer { offers.append((offer.compactJWS, "promotional-offer", offer.offerIdentifier)) }
        if let jws = body.introductoryOfferEligibility { offers.append((jws, "introductory-offer-eligibility", nil)) }
        for (jws, audience, offerIdentifier) in offers {
            let verified = try store.serverAPIKey.verifyOffer(
                jws, audience: audience, productId: body.productId, offerIdentifier: offerIdentifier, bundleId: store.configuration.bundleId,
                now: store.now
            ).get()
            guard store.serverAPIRecords.takeOfferNonce(verified.nonce) else {
                throw DevAppStore.Failure(code: "invalid_offer", message: "the offer signature's nonce was used before", status: 400)
            }
        }
    }

    @Sendable func transactionEvent(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = context.parameters.get("id") ?? ""
        let event = context.parameters.get("event") ?? ""
        return try await answer(request, as: EventBody.self) { body in
            let send = body.send ?? true
            let notification: DevAppStore.Notification
            switch event {
            case "renew":
                return purchaseAnswer(try store.renew(id, send: send))
            case "auto-renew":
                guard let enabled = body.enabled else {
                    throw DevAppStore.Failure(code: "bad_request", message: "auto-renew needs {\"enabled\": true|false}", status: 400)
                }
                notification = try store.setAutoRenew(id, enabled: enabled, send: send)
            case "billing-failure":
                notification = try store.failRenewal(
                    id, gracePeriod: body.gracePeriodSeconds, noGracePeriod: body.noGracePeriod ?? false, send: send)
            case "grace-period-expired":
                notification = try store.expireGracePeriod(id, send: send)
            case "expire":
                notification = try store.expire(id, send: send)
            case "refund":
                if let percentage = body.revocationPercentage, !(1...100_000).contains(percentage) {
                    throw DevAppStore.Failure(
                        code: "bad_request", message: "revocationPercentage is in milliunits, 1 to 100000", status: 400)
                }
                notification = try store.refund(id, percentage: body.revocationPercentage, send: send)
            case "refund-reversed":
                notification = try store.reverseRefund(id, send: send)
            case "revoke":
                notification = try store.revoke(id, send: send)
            case "consumption-request":
                let reasons = ["UNINTENDED_PURCHASE", "FULFILLMENT_ISSUE", "UNSATISFIED_WITH_PURCHASE", "LEGAL", "OTHER"]
                if let reason = body.reason, !reasons.contains(reason) {
                    throw DevAppStore.Failure(code: "bad_request", message: "reason is one of \(reasons.joined(separator: ", "))", status: 400)
                }
                notification = try store.requestConsumption(id, reason: body.reason, send: send)
            case "refund-declined":
                notification = try store.declineRefund(id, send: send)
            default:
                throw DevAppStore.Failure(code: "not_found", message: "no event \(event)", status: 404)
            }
            return NotificationOnly(notification: NotificationAnswer(notification: notification, store: store))
        }
    }

    func purchaseAnswer(_ purchase: DevAppStore.Purchase) -> PurchaseAnswer {
        PurchaseAnswer(
            transactionId: purchase.transaction.transactionId, originalTransactionId: purchase.transaction.originalTransactionId,
            orderId: DevAppStore.orderId(ofTransaction: purchase.transaction.transactionId),
            signedTransaction: purchase.signedTransaction, signedRenewalInfo: purchase.signedRenewalInfo,
            notification: NotificationAnswer(notification: purchase.notification, store: store))
    }

    /// Decodes the body (an empty body is `{}`), runs `make`, answers its value as JSON or its failure as an error.
    func answer<Body: Decodable>(
        _ request: Request, as _: Body.Type, _ make: (Body) async throws -> any Encodable
    ) async throws -> Response {
        let bytes = try await request.body.collect(upTo: 64 * 1024)
        let data = bytes.readableBytes == 0 ? Data("{}".utf8) : Data(bytes.readableBytesView)
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: data)
        } catch {
            return Self.error(DevAppStore.Failure(code: "bad_request", message: "the body is not the JSON this route takes", status: 400))
        }
        do {
            return Self.json(try await make(body))
        } catch let failure as DevAppStore.Failure {
            return Self.error(failure)
        }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func error(_ failure: DevAppStore.Failure) -> Response {
        json(["error": ["code": failure.code, "message": failure.message]], status: HTTPResponse.Status(code: failure.status))
    }
}
