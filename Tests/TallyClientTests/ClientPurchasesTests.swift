import Foundation
import TallyAPI
@testable import TallyClient
import TallyDevAppStore
import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// `client.purchases` against the real server, with transactions signed by the local App Store (`tally-dev dev-appstore`'s
/// library) on the server's clock: a redemption's answer updates the cached wallet and premium with no second request,
/// a retry credits nothing more, and what StoreKit's layer must finish is decided by the server's answer.
@Suite("Client purchases", .timeLimit(.minutes(1)))
struct ClientPurchasesTests {
    /// A server on `kind` selling ``TestProducts`` from a local App Store's CA, and that App Store.
    static func with(_ kind: StoreKind, _ body: @Sendable (TallyTestServer, DevAppStore) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        let configuration = try AppStoreConfiguration(
            bundleId: TestProducts.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox],
            rootCertificates: [Data(appStore.authority.rootDER)],
            products: [
                AppStoreProduct(productId: TestProducts.tokens100, grant: .tokens(100)),
                AppStoreProduct(productId: TestProducts.premiumMonthly, grant: .premium),
            ])
        // Both clocks read the same instant and neither moves: signed dates and certificates agree with the server.
        try await TallyTestServer.with(kind, configure: { $0.appStore = configuration }) { server in try await body(server, appStore) }
    }

    @Test("Redeeming tokens updates the cached wallet at once, with no second request; a retry credits nothing more",
        arguments: StoreKind.allCases)
    func tokensAtOnce(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore in
            let (client, transport) = server.client()
            let user = try await client.signInAsGuest()
            #expect(try await client.fetch(client.walletQuery).balance == 0)
            let bought = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let walletReads = transport.count(path: "/v1/wallet")
            let redeemed = try await client.purchases.redeem(signedTransaction: bought.signedTransaction)
            #expect(redeemed.purchase.status == .credited && redeemed.purchase.tokens == 100)
            #expect(client.value(client.walletQuery)?.balance == 100, "the cached wallet shows the tokens at once")
            #expect(transport.count(path: "/v1/wallet") == walletReads, "no second request")
            // Again (a relaunch with the transaction still unfinished): the same purchase, nothing more credited.
            let again = try await client.purchases.redeem(signedTransaction: bought.signedTransaction)
            #expect(again.purchase == redeemed.purchase && again.wallet.balance == 100)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 100)
            let listed = try await client.purchases.list()
            #expect(listed.items.map(\.transactionId) == [bought.transaction.transactionId])
        }
    }

    @Test("A subscription's premium reaches premiumStatus() from the redemption's answer", arguments: StoreKind.allCases)
    func premiumAtOnce(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore in
            let (client, transport) = server.client()
            let user = try await client.signInAsGuest()
            #expect(try await client.premiumStatus().isActive == false)
            let subscribed = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            let meReads = transport.count(path: "/v1/me")
            let redeemed = try await client.purchases.redeem(signedTransaction: subscribed.signedTransaction)
            let expiry = try #require(subscribed.transaction.expiresDate)
            #expect(redeemed.purchase.status == .active && redeemed.premiumUntil == expiry)
            let premium = try await client.premiumStatus()
            #expect(premium.isActive && premium.until == expiry)
            #expect(transport.count(path: "/v1/me") == meReads, "no second request")
        }
    }

    @Test("Deleting an account with a running subscription says until when (Apple keeps billing it); the subscription stays Apple's",
        arguments: StoreKind.allCases)
    func deletionSaysSubscription(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore in
            let (client, _) = server.client()
            let user = try await client.signInAsGuest()
            let subscribed = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            try await client.purchases.redeem(signedTransaction: subscribed.signedTransaction)
            let deletion = try await client.deleteAccount()
            #expect(deletion.hadActiveSubscription && deletion.subscriptionActiveUntil == subscribed.transaction.expiresDate)
            #expect(await client.user == nil)
        }
    }

    @Test("Another account's consumable and a refused signature are refused for good (StoreKit's layer finishes them); no network is not",
        arguments: [StoreKind.sqlite])
    func refusals(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore in
            let (alice, _) = server.client()
            let (bob, bobTransport) = server.client()
            let aliceUser = try await alice.signInAsGuest()
            _ = try await bob.signInAsGuest()
            let bought = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: aliceUser.userId), send: false)
            try await alice.purchases.redeem(signedTransaction: bought.signedTransaction)

            let claimed = await #expect(throws: ClientError.self) { try await bob.purchases.redeem(signedTransaction: bought.signedTransaction) }
            #expect(claimed?.serverCode == .purchaseClaimed && PurchasesClient.finishes(after: claimed!))
            let tampered = try appStore.signedTransaction(bought.transaction.transactionId, defect: .tamperedPayload)
            let refused = await #expect(throws: ClientError.self) { try await bob.purchases.redeem(signedTransaction: tampered) }
            #expect(refused?.serverCode == .invalidSignature && PurchasesClient.finishes(after: refused!), "refused for good: finished")
            bobTransport.enqueue(Array(repeating: .offline, count: 20), forPathPrefix: "/v1/purchases/apple")
            let offline = await #expect(throws: ClientError.self) { try await bob.purchases.redeem(signedTransaction: bought.signedTransaction) }
            #expect(offline.map { !PurchasesClient.finishes(after: $0) } == true)
            bobTransport.clearFaults()
            #expect(try await bob.fetch(bob.walletQuery, forceRefresh: true).balance == 0)
            #expect(PurchasesClient.appAccountToken(userId: aliceUser.userId) == UUID(uuidString: aliceUser.userId))
        }
    }

    @Test("A guest restoring an account's subscription is told to sign in (sign_in_required, not finished); signed in, it is redeemed",
        arguments: [StoreKind.sqlite])
    func restoreAsGuest(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore in
            let (buyer, _) = server.client()
            let buyerUser = try await buyer.signInAsGuest()
            try await buyer.link(email: "buyer@example.com", password: "correct horse 1")
            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: buyerUser.userId), send: false)
            try await buyer.purchases.redeem(signedTransaction: bought.signedTransaction)

            // A fresh install starts as a guest, and StoreKit hands it the subscription.
            let (device, _) = server.client()
            _ = try await device.signInAsGuest()
            let refused = await #expect(throws: ClientError.self) { try await device.purchases.redeem(signedTransaction: bought.signedTransaction) }
            #expect(refused?.status == 409 && refused?.serverCode == ErrorCode(rawValue: "sign_in_required"), "\(String(describing: refused))")
            #expect(refused.map { !PurchasesClient.finishes(after: $0) } == true, "kept unfinished, to redeem once signed in")
            #expect(try await device.premiumStatus().isActive == false)
            _ = try await device.signIn(email: "buyer@example.com", password: "correct horse 1")
            let redeemed = try await device.purchases.redeem(signedTransaction: bought.signedTransaction)
            #expect(redeemed.purchase.status == .active && redeemed.premiumUntil == bought.transaction.expiresDate)
        }
    }
}
