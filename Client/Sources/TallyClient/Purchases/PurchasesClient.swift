import Foundation
import TallyAPI

extension Client {
    /// App Store purchases, redeemed on the server: tokens credited exactly once, premium while a subscription runs.
    public var purchases: PurchasesClient { PurchasesClient(client: self) }
}

/// App Store purchases (`/v1/purchases`), reached as `client.purchases`. A handle, cheap to make: it holds only the
/// client.
///
/// The server verifies each signed transaction (Apple's signature and chain, the app's bundle id and environment)
/// and credits it once, whatever arrives first — this call or Apple's notification — and however often. On Apple
/// platforms, ``buy(_:)`` buys a StoreKit `Product` with the user's id as its `appAccountToken`, redeems it, and
/// finishes the transaction only once the server has it; `observeTransactions(onRefused:)`, started at launch, redeems
/// what an earlier launch left unfinished and what StoreKit delivers meanwhile (renewals, Ask to Buy, other devices);
/// `restore()` is the "Restore Purchases" App Review asks for.
///
/// ```swift
/// // signedTransaction: StoreKit 2's Transaction.jwsRepresentation
/// let redeemed = try await tally.purchases.redeem(signedTransaction: signedTransaction)
/// balanceLabel = "\(redeemed.wallet.available) tokens"     // the cached wallet already shows it
/// ```
public struct PurchasesClient: Sendable {
    let client: Client

    /// The route template metrics record.
    static let operation = "POST /v1/purchases/apple"

    /// Redeems a StoreKit 2 transaction (`Transaction.jwsRepresentation`): the server verifies it and credits a
    /// consumable's tokens once, forever, or gives premium while a subscription runs. The answer's wallet and premium
    /// replace the cached ones at once, with no second request. Redeeming the same transaction again (a retry, a
    /// relaunch, Apple's notification having come first) returns the same purchase and credits nothing more.
    ///
    /// - Throws: a ``ClientError``: ``ClientError/Code/server`` with ``ClientError/serverCode`` `purchase_claimed`
    ///   (409: another account redeemed this consumable, or bought this subscription), `sign_in_required` (409: a
    ///   guest redeemed a subscription an account bought: sign in to that account, then redeem again),
    ///   `sandbox_limit` (403: the account has all the Sandbox tokens the server credits), `unknown_product` (422: the
    ///   server does not sell it), or a verification refusal (400: `invalid_signature`, `untrusted_chain`,
    ///   `wrong_bundle`, `wrong_environment`, …);
    ///   ``ClientError/Code/offline`` when the server could not be reached — redeem again later, the transaction stays
    ///   valid (StoreKit keeps it unfinished).
    @discardableResult
    public func redeem(signedTransaction: String) async throws -> PurchaseResponse {
        let body = try TallyJSON.encoder().encode(RedeemPurchaseRequest(signedTransaction: signedTransaction))
        let client = self.client
        let (walletQuery, meQuery) = (client.walletQuery, client.meQuery)
        return try await client.mutate(
            Mutation<PurchaseResponse>(
                method: "POST", path: "/v1/purchases/apple", operation: Self.operation, body: body,
                // One transaction is one write: a double tap or a retry after a lost answer shares it.
                intent: "redeem",
                confirm: { answer in
                    var confirmations = [Confirmation.of(walletQuery, answer.wallet)]
                    if var me = client.value(meQuery), me.premiumUntil != answer.premiumUntil {
                        me.premiumUntil = answer.premiumUntil
                        confirmations.append(Confirmation.of(meQuery, me))
                    }
                    return confirmations.compactMap { $0 }
                }))
    }

    /// Records whether the signed-in user lets the server tell Apple how much of a purchase they used, should they
    /// ask Apple for a refund (`POST /v1/purchases/consumption-consent`). Apple takes that information only with the
    /// customer's consent; ask in your own words (a settings switch, or a line in your terms) and pass the answer.
    /// Calling it again replaces the answer (false withdraws it). Returns what the server recorded, with its time.
    @discardableResult
    public func setConsumptionConsent(_ consented: Bool) async throws -> ConsumptionConsent {
        let body = try TallyJSON.encoder().encode(ConsumptionConsentRequest(consented: consented))
        let response = try await client.executor.send(
            .post("/v1/purchases/consumption-consent", operation: "POST /v1/purchases/consumption-consent"), body: body, auth: client.session)
        return try decodeAnswer(ConsumptionConsent.self, response.body)
    }

    /// The server's signature of `productId`'s promotional offer `offerIdentifier` for the signed-in user
    /// (`POST /v1/purchases/apple/offers`): StoreKit takes its `compactJWS` (``buy(_:offer:)`` on Apple platforms does
    /// all of it). Throws `forbidden` when the user is not eligible, `not_found` when the server signs no such offer.
    public func promotionalOffer(productId: String, offerIdentifier: String) async throws -> OfferSignature {
        try await offerSignature(OfferSignatureRequest(productId: productId, offerIdentifier: offerIdentifier, kind: "promotional"))
    }

    /// Whether the signed-in user may have `productId`'s introductory offer, signed by the server for StoreKit
    /// (`.introductoryOfferEligibility(compactJWS:)`). `appTransactionId` (StoreKit's `AppTransaction.appTransactionID`)
    /// stands for the customer when the user never bought anything.
    public func introductoryOfferEligibility(productId: String, appTransactionId: String? = nil) async throws -> OfferSignature {
        try await offerSignature(
            OfferSignatureRequest(productId: productId, kind: "introductoryEligibility", appTransactionId: appTransactionId))
    }

    private func offerSignature(_ request: OfferSignatureRequest) async throws -> OfferSignature {
        let body = try TallyJSON.encoder().encode(request)
        let response = try await client.executor.send(
            .post("/v1/purchases/apple/offers", operation: "POST /v1/purchases/apple/offers"), body: body, auth: client.session)
        return try decodeAnswer(OfferSignature.self, response.body)
    }

    /// The user's purchases, newest first (`GET /v1/purchases`): a page; pass its `nextCursor` to ``list(after:)``.
    public func list(after cursor: String? = nil, limit: Int = 50) async throws -> Page<Purchase> {
        var path = "/v1/purchases?limit=\(max(1, min(limit, 100)))"
        if let cursor, let escaped = cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) { path += "&cursor=\(escaped)" }
        let response = try await client.executor.send(.get(path, operation: "GET /v1/purchases"), auth: client.session)
        return try decodeAnswer(Page<Purchase>.self, response.body)
    }
}
