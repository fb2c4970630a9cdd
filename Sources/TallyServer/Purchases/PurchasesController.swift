import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyAppStore
import TallyStore

/// App Store purchases: `POST /v1/purchases/apple` (a user redeems a StoreKit 2 transaction), `GET /v1/purchases`,
/// and `POST /v1/webhooks/appstore` (App Store Server Notifications V2, authenticated by their signature alone).
///
/// Nothing in a payload is believed before ``AppStoreVerifier`` has checked it (ES256, the chain to a configured root
/// with Apple's marks, at the payload's `signedDate`; the bundle id and environment). What it says is then handed to
/// the store as facts (``AppStorePayloads``), and the store credits, refunds and moves premium in one transaction each,
/// exactly once whichever of the app and Apple comes first.
struct PurchasesController {
    let store: any TallyStorage
    let clock: any TallyClock
    /// Client addresses and keyed hashes, for the throttles and their log lines.
    let keys: CallerKeys
    /// Told of the wallets a redemption changed.
    let notifier: any ChangeNotifier
    /// The products, the verifier, and the offers and App Store Server API when configured.
    let appStore: AppStoreConfiguration
    /// Takes the verified notifications the webhook receives.
    let intake: AppStoreNotificationIntake
    let throttles: PurchaseThrottles

    /// The longest signed payload taken: a StoreKit JWS is 5–8 KiB, a notification (two nested JWS) about 20 KiB.
    static let maxSignedBytes = 60 * 1024

    /// The routes of `appStore`'s purchases over `store`, their throttles built from `limits`.
    init(
        store: any TallyStorage, clock: any TallyClock, keys: CallerKeys, notifier: any ChangeNotifier, appStore: AppStoreConfiguration,
        intake: AppStoreNotificationIntake, limits: LimitsConfiguration
    ) {
        self.store = store
        self.clock = clock
        self.keys = keys
        self.notifier = notifier
        self.appStore = appStore
        self.intake = intake
        throttles = PurchaseThrottles(limits)
    }

    func addPublicRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.post("webhooks/appstore", use: webhook)
    }

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.post("purchases/apple", use: redeem)
        group.get("purchases", use: list)
        group.post("purchases/consumption-consent", use: consent)
        group.post("purchases/apple/offers", use: offer)
    }

    /// Signs an offer the configuration allows the caller (`appStore.offers`) with the In-App Purchase key.
    @Sendable func offer(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<OfferSignatureRequest>.read(request, context: context).value
        let userId = context.identity.userId
        let door = Door(route: "POST /v1/purchases/apple/offers", now: clock.now, logger: context.logger, keys: keys)
        try throttles.redeemsPerUser.acquire(userId, door)
        guard let kind = AppStoreOffer.Kind(rawValue: body.kind ?? "promotional") else {
            throw APIError(.invalidField, "'kind' is promotional or introductoryEligibility.")
        }
        if let id = body.appTransactionId, id.isEmpty || id.utf8.count > 64 || !id.allSatisfy(\.isNumber) {
            throw APIError(.invalidField, "'appTransactionId' is StoreKit's AppTransaction.appTransactionID: digits.")
        }
        guard let settings = appStore.serverAPI,
            let offer = appStore.offers.first(where: {
                $0.productId == body.productId && $0.kind == kind && (kind == .introductoryEligibility || $0.offerIdentifier == body.offerIdentifier)
            })
        else { throw APIError(.notFound, "The server signs no such offer (appStore.offers).") }
        let now = clock.now
        let purchases = try await store.purchases(userId: userId, after: nil, limit: 100, now: now)
        let eligible = offer.eligible.holds(subscriptions: purchases.filter { $0.kind == .subscription }.map(\.status))
        let transactionId = purchases.first?.transactionId ?? body.appTransactionId
        let credentials = settings.signer.credentials
        let claims: AppStoreOfferClaims
        switch kind {
        case .promotional:
            guard eligible else { throw APIError(.forbidden, "This user is not eligible for this offer.") }
            claims = .promotional(
                productId: offer.productId, offerIdentifier: offer.offerIdentifier ?? "", transactionId: transactionId, credentials: credentials, now: now)
        case .introductoryEligibility:
            guard let transactionId else {
                throw APIError(.invalidField, "Introductory offer eligibility needs a transaction of the customer: pass 'appTransactionId'.")
            }
            claims = .introductoryEligibility(productId: offer.productId, allow: eligible, transactionId: transactionId, credentials: credentials, now: now)
        }
        let jws: String
        do {
            jws = try settings.signer.compactJWS(claims)
        } catch {
            throw APIError(.internalError, "Internal error.")
        }
        return JSONResponse.make(
            body: OfferSignature(
                kind: kind.rawValue, productId: offer.productId, offerIdentifier: claims.offerIdentifier,
                allowIntroductoryOffer: claims.allowIntroductoryOffer, compactJWS: jws))
    }

    /// Records whether the caller consents to Tally answering Apple's consumption requests about their purchases.
    @Sendable func consent(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<ConsumptionConsentRequest>.read(request, context: context).value
        let now = clock.now
        try await store.setConsumptionConsent(userId: context.identity.userId, consented: body.consented, now: now)
        return JSONResponse.make(body: ConsumptionConsent(consented: body.consented, changedAt: now))
    }

    /// Verifies and redeems a transaction for the caller; answers the purchase with the caller's wallet and premium.
    @Sendable func redeem(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<RedeemPurchaseRequest>.read(request, context: context).value
        let userId = context.identity.userId
        let door = Door(route: "POST /v1/purchases/apple", now: clock.now, logger: context.logger, keys: keys)
        try throttles.redeemsPerUser.acquire(userId, door)
        let payload = try await verified { try await appStore.verifier.verifyTransaction(try Self.bounded(body.signedTransaction)) }
        let transaction = try AppStorePayloads.transaction(payload, products: appStore)
        let redemption = try await store.redeem(transaction, userId: userId, now: clock.now)
        for changed in redemption.changedUsers { notifier.walletChanged(userId: changed) }
        let answer = PurchaseResponse(
            purchase: Purchase(redemption.purchase), wallet: Wallet(redemption.wallet),
            premiumUntil: redemption.user.combinedPremiumUntil)
        return JSONResponse.make(body: answer)
    }

    /// The caller's purchases, newest first, `limit` (1–100, default 50) a page, after `cursor`.
    @Sendable func list(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let (cursor, limit) = try Self.page(request)
        let records = try await store.purchases(userId: context.identity.userId, after: cursor, limit: limit + 1, now: clock.now)
        return JSONResponse.make(body: Self.page(records, limit: limit))
    }

    /// An App Store Server Notification V2: applied once (a duplicate, a stale one, an unknown type: 200 and nothing
    /// changes); a payload that does not verify: 400 and nothing changes; 503 only when the database cannot answer,
    /// so that Apple retries (at 1, 12, 24, 48 and 72 hours).
    @Sendable func webhook(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<AppStoreNotificationRequest>.read(request, context: context).value
        let address = keys.clientAddress(request, peer: context.peer)
        let door = Door(route: "POST /v1/webhooks/appstore", now: clock.now, logger: context.logger, keys: keys)
        try throttles.notificationsPerAddress.acquire(address, door)
        let notification = try await verified { try await appStore.verifier.verifyNotification(try Self.bounded(body.signedPayload)) }
        let outcome = try await intake.take(notification, logger: context.logger)
        return JSONResponse.make(body: NotificationReceipt(disposition: outcome.disposition.rawValue))
    }

    /// What the webhook answers: how the notification was taken (`applied`, `duplicate`, `stale`, `ignored`).
    struct NotificationReceipt: Codable {
        var disposition: String
    }

    // MARK: Helpers

    /// Runs a verification; a refusal becomes a 400 with its code (and nothing else happens).
    private func verified<T>(_ verify: () async throws -> T) async throws -> T {
        do {
            return try await verify()
        } catch let error as AppStoreVerificationError {
            throw APIError(ErrorCode(rawValue: error.code.rawValue == "malformed" ? ErrorCode.invalidSignature.rawValue : error.code.rawValue), error.message)
        }
    }

    /// `text` if it is short enough to be a signed payload.
    static func bounded(_ text: String) throws -> String {
        guard !text.isEmpty, text.utf8.count <= maxSignedBytes else {
            throw APIError(.invalidField, "A signed payload is a JWS of at most \(maxSignedBytes) bytes.")
        }
        return text
    }

    /// The `cursor` and `limit` of a list request.
    static func page(_ request: Request) throws -> (PurchaseCursor?, Int) {
        let query = request.uri.queryParameters
        var limit = 50
        if let text = query["limit"] {
            guard let value = Int(String(text)), (1...100).contains(value) else {
                throw APIError(.invalidQuery, "'limit' must be a whole number from 1 to 100.")
            }
            limit = value
        }
        guard let text = query["cursor"] else { return (nil, limit) }
        guard let cursor = PurchaseCursor(token: String(text)) else { throw APIError(.invalidCursor, "'cursor' is not one this server issued.") }
        return (cursor, limit)
    }

    /// The first `limit` of `records` (read one more, to know whether a page follows), as the API's page.
    static func page(_ records: [PurchaseRecord], limit: Int) -> Page<Purchase> {
        let shown = records.prefix(limit)
        let next = records.count > limit ? shown.last.map { PurchaseCursor(after: $0).token } : nil
        return Page(items: shown.map(Purchase.init), nextCursor: next)
    }
}

extension Purchase {
    /// The API's view of a stored purchase.
    init(_ record: PurchaseRecord) {
        self.init(
            transactionId: record.transactionId, originalTransactionId: record.originalTransactionId, productId: record.productId,
            kind: TallyAPI.PurchaseKind(rawValue: record.kind.rawValue), tokens: record.tokens, premiumUntil: record.premiumUntil,
            environment: record.environment, status: TallyAPI.PurchaseStatus(rawValue: record.status.rawValue),
            purchasedAt: record.purchasedAt)
    }
}
