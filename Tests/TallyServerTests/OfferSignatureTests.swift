import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import TallyAPI
import TallyAppStore
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestSupport
import Testing

/// Offer signatures (`POST /v1/purchases/apple/offers`): a promotional offer or introductory offer eligibility, signed
/// with the In-App Purchase key for the users `appStore.offers` allows, carrying the claims Apple documents, and
/// accepted once by `tally-dev dev-appstore` when a purchase presents it; an offer the configuration does not allow, or a
/// user it does not allow, gets nothing signed.
@Suite("Offer signatures", .timeLimit(.minutes(2)))
struct OfferSignatureTests {
    static let comeback = AppStoreOffer(
        productId: TestProducts.premiumMonthly, offerIdentifier: "comeback50", kind: .promotional,
        eligible: .init(expiredSubscriber: true))
    static let trial = AppStoreOffer(
        productId: TestProducts.premiumMonthly, offerIdentifier: nil, kind: .introductoryEligibility, eligible: .init(neverSubscribed: true))

    static func sign(_ api: APIConnection, _ user: TestUser, _ request: OfferSignatureRequest) async throws -> APIResponse {
        try await api.send(.post, "/v1/purchases/apple/offers", token: user.accessToken, json: request)
    }

    /// The claims of a compact JWS, undecoded.
    static func claims(_ jws: String) throws -> [String: Any] {
        let parts = jws.split(separator: ".")
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        let data = try #require(Data(base64Encoded: payload))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("A lapsed subscriber gets the comeback offer signed with Apple's claims; the App Store accepts it once", arguments: StoreKind.allCases)
    func promotional(kind: StoreKind) async throws {
        try await ConsumptionRequestTests.with(kind, offers: [Self.comeback]) { server, appStore, api in
            let user = try await api.newGuest()
            let request = OfferSignatureRequest(productId: TestProducts.premiumMonthly, offerIdentifier: "comeback50")
            let notYet = try await Self.sign(api, user, request)
            #expect(notYet.status == .forbidden && notYet.errorCode == "forbidden", "never subscribed: \(notYet.text)")

            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            let redeemed = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            #expect(redeemed.status == .ok, "\(redeemed.text)")
            #expect(try await Self.sign(api, user, request).status == .forbidden, "still subscribed")
            server.clock.advance(by: 60)
            let expired = try appStore.expire(bought.transaction.transactionId, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: expired.body, as: UTF8.self)).status == .ok)

            let signed = try await Self.sign(api, user, request)
            #expect(signed.status == .ok, "\(signed.text)")
            let offer = try signed.decode(OfferSignature.self)
            #expect(offer.kind == "promotional" && offer.offerIdentifier == "comeback50" && offer.allowIntroductoryOffer == nil)
            let claims = try Self.claims(offer.compactJWS)
            let key = appStore.serverAPIKey
            #expect(claims["aud"] as? String == "promotional-offer" && claims["bid"] as? String == TestProducts.bundleId)
            #expect(claims["iss"] as? String == key.issuerId && claims["productId"] as? String == TestProducts.premiumMonthly)
            #expect(claims["offerIdentifier"] as? String == "comeback50" && claims["exp"] == nil)
            #expect(claims["transactionId"] as? String == bought.transaction.transactionId, "the user's latest transaction")
            let nonce = try #require(claims["nonce"] as? String)
            #expect(UUID(uuidString: nonce) != nil && nonce == nonce.lowercased())
            #expect((claims["iat"] as? Int).map { abs(Double($0) - server.clock.now.timeIntervalSince1970) < 2 } == true)

            let presented = #""promotionalOffer":{"offerIdentifier":"comeback50","compactJWS":"\#(offer.compactJWS)"}"#
            let first = try await DevAppStorePurchase.post(appStore, user: user, offer: presented)
            #expect(first.status == 200, "the App Store accepts it: \(first.text)")
            let again = try await DevAppStorePurchase.post(appStore, user: user, offer: presented)
            #expect(again.status == 400 && again.text.contains("nonce"), "once: \(again.text)")
            let fresh = try await Self.sign(api, user, request).decode(OfferSignature.self)
            let otherOffer = #""promotionalOffer":{"offerIdentifier":"other","compactJWS":"\#(fresh.compactJWS)"}"#
            #expect(try await DevAppStorePurchase.post(appStore, user: user, offer: otherOffer).status == 400, "signed for another offer")
            #expect(appStore.serverAPIRecords.offersAccepted == 1)
        }
    }

    @Test("Introductory eligibility: allowed for a user who never subscribed (with StoreKit's appTransactionID), not after; unknown offers and kinds refused")
    func introductoryEligibility() async throws {
        try await ConsumptionRequestTests.with(.sqlite, offers: [Self.comeback, Self.trial]) { _, appStore, api in
            let user = try await api.newGuest()
            let request = OfferSignatureRequest(productId: TestProducts.premiumMonthly, kind: "introductoryEligibility")
            let missing = try await Self.sign(api, user, request)
            #expect(missing.status == .badRequest && missing.text.contains("appTransactionId"), "\(missing.text)")
            var withApp = request
            withApp.appTransactionId = "2000000000000042"
            let allowed = try await Self.sign(api, user, withApp).decode(OfferSignature.self)
            #expect(allowed.allowIntroductoryOffer == true)
            let claims = try Self.claims(allowed.compactJWS)
            #expect(claims["aud"] as? String == "introductory-offer-eligibility" && claims["transactionId"] as? String == "2000000000000042")
            #expect(claims["allowIntroductoryOffer"] as? Bool == true && claims["offerIdentifier"] == nil)
            let presented = #""introductoryOfferEligibility":"\#(allowed.compactJWS)""#
            #expect(try await DevAppStorePurchase.post(appStore, user: user, offer: presented).status == 200)

            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            _ = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            let after = try await Self.sign(api, user, request).decode(OfferSignature.self)
            #expect(after.allowIntroductoryOffer == false, "a subscriber is told no, signed")
            #expect(try Self.claims(after.compactJWS)["transactionId"] as? String == bought.transaction.transactionId)

            let unknown = try await Self.sign(api, user, OfferSignatureRequest(productId: TestProducts.premiumMonthly, offerIdentifier: "free-forever"))
            #expect(unknown.status == .notFound, "\(unknown.text)")
            let badKind = try await Self.sign(api, user, OfferSignatureRequest(productId: TestProducts.premiumMonthly, kind: "winback"))
            #expect(badKind.status == .badRequest && badKind.errorCode == "invalid_field", "\(badKind.text)")
        }
    }
}

/// Posts purchases to a dev App Store served for the call.
enum DevAppStorePurchase {
    /// `POST /purchase` of the subscription for `user` with `offer` (the offer's JSON fields).
    static func post(_ appStore: DevAppStore, user: TestUser, offer: String) async throws -> (status: Int, text: String) {
        try await post(appStore, #"{"productId":"\#(TestProducts.premiumMonthly)","appAccountToken":"\#(user.userId)","send":false,\#(offer)}"#)
    }

    /// `POST /purchase` with `body`, to `appStore` served on a free port for this call.
    static func post(_ appStore: DevAppStore, _ body: String) async throws -> (status: Int, text: String) {
        try await TestProducts.serving(appStore) { port in
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/purchase")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
            return (Int(response.status.code), text)
        }
    }
}
