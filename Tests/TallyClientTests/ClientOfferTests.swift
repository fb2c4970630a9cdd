import Foundation
import TallyAPI
import TallyAppStore
@testable import TallyClient
import TallyDevAppStore
import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// `client.purchases`' offer signatures against the real server (its In-App Purchase key the local App Store's):
/// what StoreKit takes, for the users the server's `appStore.offers` allows.
@Suite("Client offers", .timeLimit(.minutes(1)))
struct ClientOfferTests {
    @Test("Introductory eligibility is signed for a user who never subscribed; a promotional offer for lapsed subscribers is refused them")
    func offers() async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        let key = appStore.serverAPIKey
        var configuration = try AppStoreConfiguration(
            bundleId: TestProducts.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox],
            rootCertificates: [Data(appStore.authority.rootDER)],
            products: [AppStoreProduct(productId: TestProducts.premiumMonthly, grant: .premium)])
        configuration.serverAPI = AppStoreServerAPISettings(
            signer: try AppStoreServerAPIToken(
                credentials: .init(keyId: key.keyId, issuerId: key.issuerId, bundleId: TestProducts.bundleId), privateKeyPEM: key.privateKeyPEM),
            configuration: AppStoreServerAPIClient.Configuration(), privateKeyEnv: "TEST_KEY")
        configuration.offers = [
            AppStoreOffer(productId: TestProducts.premiumMonthly, offerIdentifier: "comeback50", kind: .promotional, eligible: .init(expiredSubscriber: true)),
            AppStoreOffer(productId: TestProducts.premiumMonthly, offerIdentifier: nil, kind: .introductoryEligibility, eligible: .init(neverSubscribed: true)),
        ]
        let appStoreConfiguration = configuration
        try await TallyTestServer.with(.sqlite, configure: { $0.appStore = appStoreConfiguration }) { server in
            let (client, _) = server.client()
            _ = try await client.signInAsGuest()
            let eligibility = try await client.purchases.introductoryOfferEligibility(
                productId: TestProducts.premiumMonthly, appTransactionId: "2000000000000042")
            #expect(eligibility.allowIntroductoryOffer == true && eligibility.compactJWS.split(separator: ".").count == 3)
            let verified = key.verifyOffer(
                eligibility.compactJWS, audience: "introductory-offer-eligibility", productId: TestProducts.premiumMonthly, offerIdentifier: nil,
                bundleId: TestProducts.bundleId, now: clock.now)
            #expect((try? verified.get())?.allowIntroductoryOffer == true, "the App Store's check accepts it")
            do {
                _ = try await client.purchases.promotionalOffer(productId: TestProducts.premiumMonthly, offerIdentifier: "comeback50")
                Issue.record("a user who never subscribed got the comeback offer")
            } catch let error as ClientError {
                #expect(error.serverCode == .forbidden && error.status == 403, "\(error)")
            }
        }
    }
}
