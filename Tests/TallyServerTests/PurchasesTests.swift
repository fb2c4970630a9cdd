import Foundation
import HTTPTypes
import TallyAPI
import TallyAppStore
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

/// App Store purchases through the real HTTP stack, on both stores, with transactions and notifications signed by
/// the local App Store stand-in (`tally-dev dev-appstore`'s library, in process, on the server's clock): each refusal
/// credits nothing; a transaction is credited once whichever of the app and Apple comes first; refunds take back what
/// was credited, below zero if it was spent; subscriptions move premium as Apple's notifications say.
@Suite("App Store purchases", .timeLimit(.minutes(2)))
struct PurchasesTests {
    /// 3 free readings a day, or 5 tokens each.
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "readings", daily: 3)],
        actions: [ActionSpec(name: "reading", quota: "readings", tokens: 5), ActionSpec(name: "ai.query", tokens: 3)])

    /// A server on `kind` selling the test products from `appStore`'s CA (Sandbox only), and a connection to it.
    static func with<T: Sendable>(
        _ kind: StoreKind, environments: [AppStoreEnvironment] = [.sandbox], configureStore: (inout DevAppStore.Configuration) -> Void = { _ in },
        _ body: @Sendable (LiveServer, DevAppStore, APIConnection) async throws -> T
    ) async throws -> T {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock, configure: configureStore)
        let root = Data(appStore.authority.rootDER)
        let products = [
            AppStoreProduct(productId: TestProducts.tokens100, grant: .tokens(100)),
            AppStoreProduct(productId: TestProducts.premiumMonthly, grant: .premium),
        ]
        let configuration = try AppStoreConfiguration(
            bundleId: TestProducts.bundleId, appAppleId: 1_234_567_890, environments: environments, rootCertificates: [root], products: products)
        // Subscriptions run for months of the test's clock: tokens that outlive them.
        return try await LiveServer.with(
            kind, catalog: catalog, accessTokenTTL: 365 * 86_400, clock: clock,
            configure: { server in
                server.appStore = configuration
                server.refreshTokenTTL = 365 * 86_400
            }
        ) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            return try await body(server, appStore, api)
        }
    }

    // MARK: Verification

    @Test("Each refusal of a signed transaction names its cause and credits nothing", arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let token = UUID(uuidString: user.userId)
            let now = server.clock.now
            let cases: [(DevSigningDefect, String)] = [
                (.otherRoot, "untrusted_chain"), (.leafWithoutAppleOID, "untrusted_chain"), (.intermediateWithoutAppleOID, "untrusted_chain"),
                (.twoCertificates, "untrusted_chain"), (.algorithm("HS256"), "unsupported_algorithm"), (.algorithm("none"), "unsupported_algorithm"),
                (.tamperedPayload, "invalid_signature"),
                (.leafValidity(notBefore: now.addingTimeInterval(-3 * 86_400), notAfter: now.addingTimeInterval(-86_400)), "untrusted_chain"),
            ]
            for (defect, code) in cases {
                let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
                let signed = try appStore.signedTransaction(purchase.transaction.transactionId, defect: defect)
                let answer = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: signed))
                #expect(answer.status == .badRequest && answer.errorCode == code, "\(defect): \(answer.status) \(answer.text)")
            }
            for garbage in ["", "not.a.jws", String(repeating: "a", count: 70_000)] {
                let answer = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: garbage))
                #expect(answer.status == .badRequest || answer.status == .contentTooLarge, "\(garbage.prefix(20)): \(answer.text)")
            }
            #expect(try await api.wallet(user).balance == 0)
            let listed: Page<Purchase> = try await api.send(.get, "/v1/purchases", token: user.accessToken).decode()
            #expect(listed.items.isEmpty)
        }
    }

    @Test("Another app's transaction and an environment the server does not accept are refused", arguments: StoreKind.allCases)
    func wrongAppAndEnvironment(kind: StoreKind) async throws {
        for (configure, code) in [
            ({ (c: inout DevAppStore.Configuration) in c.bundleId = "com.example.other" }, "wrong_bundle"),
            ({ (c: inout DevAppStore.Configuration) in c.environment = .production }, "wrong_environment"),
        ] {
            try await Self.with(kind, configureStore: configure) { _, appStore, api in
                let user = try await api.newGuest()
                let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
                let answer = try await api.send(
                    .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction))
                #expect(answer.status == .badRequest && answer.errorCode == code, "\(answer.text)")
                // The same refusal for Apple's notification: 400, nothing applied.
                let webhook = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: purchase.notification.body, as: UTF8.self))
                #expect(webhook.status == .badRequest && webhook.errorCode == code, "\(webhook.text)")
                #expect(try await api.wallet(user).balance == 0)
            }
        }
    }

    // MARK: Consumables

    @Test("A consumable is credited once: again is the same purchase, another account is refused, an unknown product too", arguments: StoreKind.allCases)
    func consumableOnce(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), quantity: 2, send: false)
            let request = RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction)
            let first = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: request)
            #expect(first.status == .ok, "\(first.text)")
            let answer: PurchaseResponse = try first.decode()
            #expect(answer.wallet.balance == 200 && answer.purchase.tokens == 200 && answer.purchase.status == .credited)
            #expect(answer.purchase.transactionId == purchase.transaction.transactionId && answer.purchase.kind == .consumable)
            let again: PurchaseResponse = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: request).decode()
            #expect(again.purchase == answer.purchase && again.wallet.balance == 200)

            let other = try await api.newGuest()
            let claimed = try await api.send(.post, "/v1/purchases/apple", token: other.accessToken, json: request)
            #expect(claimed.status == .conflict && claimed.errorCode == "purchase_claimed")
            #expect(try await api.wallet(other).balance == 0)

            let unknown = try appStore.purchase(productId: "com.example.tokens.999", send: false)
            let refused = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: unknown.signedTransaction))
            #expect(refused.status == .unprocessableContent && refused.errorCode == "unknown_product")
            #expect(try await api.wallet(user).balance == 200)
            // Apple's notification of the same purchase, after: nothing more.
            let notified = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: purchase.notification.body, as: UTF8.self))
            #expect(notified.status == .ok)
            #expect(try await api.wallet(user).balance == 200)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("A replay answers the first answer's JSON, field for field; after a refund, the refund and the wallet after it; another account 409",
        arguments: StoreKind.allCases)
    func replayAnswers(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let request = RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction)
            let first = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: request)
            #expect(first.status == .ok, "\(first.text)")
            for _ in 0..<2 {
                let again = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: request)
                let (replayed, answered) = (try Self.json(again), try Self.json(first))
                #expect(again.status == .ok && replayed == answered, "\(again.text) vs \(first.text)")
            }
            let other = try await api.newGuest()
            let claimed = try await api.send(.post, "/v1/purchases/apple", token: other.accessToken, json: request)
            #expect(claimed.status == .conflict && claimed.errorCode == "purchase_claimed")

            let refund = try appStore.refund(purchase.transaction.transactionId, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self)).status == .ok)
            let replay = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: request)
            let answer: PurchaseResponse = try replay.decode()
            let listed: Page<Purchase> = try await api.send(.get, "/v1/purchases", token: user.accessToken).decode()
            #expect(answer.purchase.status == .refunded && listed.items == [answer.purchase], "\(replay.text)")
            let wallet = try await api.wallet(user)
            #expect(answer.wallet == wallet && answer.wallet.balance == 0)
            #expect(try await api.send(.post, "/v1/purchases/apple", token: other.accessToken, json: request).status == .conflict)
            try await api.expectBooksBalance(user)
        }
    }

    /// A response body as JSON objects compare: every field, whatever its order.
    static func json(_ response: APIResponse) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? NSDictionary)
    }

    @Test("Apple's notification first credits the account its appAccountToken names; one naming nobody waits unclaimed", arguments: StoreKind.allCases)
    func notificationFirst(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let body = String(decoding: purchase.notification.body, as: UTF8.self)
            let notified = try await api.send(.post, "/v1/webhooks/appstore", raw: body)
            #expect(notified.status == .ok, "\(notified.text)")
            #expect(try await api.wallet(user).balance == 100)
            let duplicate = try await api.send(.post, "/v1/webhooks/appstore", raw: body)
            #expect(duplicate.status == .ok && duplicate.text.contains("duplicate"))
            let redeemed: PurchaseResponse = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction)).decode()
            #expect(redeemed.wallet.balance == 100)

            // No token: Apple knows no account; the first account to redeem it gets it.
            let anonymous = try appStore.purchase(productId: TestProducts.tokens100, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: anonymous.notification.body, as: UTF8.self)).status == .ok)
            let unclaimed: Page<Purchase> = try await api.send(.get, "/admin/v1/purchases/unclaimed", admin: true).decode()
            #expect(unclaimed.items.map(\.transactionId) == [anonymous.transaction.transactionId])
            let claimer = try await api.newGuest()
            let claimed: PurchaseResponse = try await api.send(
                .post, "/v1/purchases/apple", token: claimer.accessToken, json: RedeemPurchaseRequest(signedTransaction: anonymous.signedTransaction)).decode()
            #expect(claimed.wallet.balance == 100 && claimed.purchase.status == .credited)
            let after: Page<Purchase> = try await api.send(.get, "/admin/v1/purchases/unclaimed", admin: true).decode()
            #expect(after.items.isEmpty)
            let mine: Page<Purchase> = try await api.send(.get, "/admin/v1/users/\(claimer.userId)/purchases", admin: true).decode()
            #expect(mine.items.map(\.transactionId) == [anonymous.transaction.transactionId])
        }
    }

    @Test("A refund after the tokens were spent leaves a negative balance: token charges refused, free uses kept, the next purchase repays", arguments: StoreKind.allCases)
    func refundBelowZero(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let token = UUID(uuidString: user.userId)
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
            _ = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction))
            for _ in 0..<30 {  // 90 tokens spent
                #expect(try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString]).status == .ok)
            }
            let refund = try appStore.refund(purchase.transaction.transactionId, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self)).status == .ok)
            let wallet = try await api.wallet(user)
            #expect(wallet.balance == -90, "\(wallet)")
            let charge = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
            #expect(charge.status.code == 402 && charge.errorCode == "insufficient_tokens")
            let free = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
            #expect(free.status == .ok, "a free use while in debt: \(free.text)")
            // The refund again (Apple's retry): nothing more taken.
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self)).status == .ok)
            #expect(try await api.wallet(user).balance == -90)
            let next = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
            let repaid: PurchaseResponse = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: next.signedTransaction)).decode()
            #expect(repaid.wallet.balance == 10)
            let listed: Page<Purchase> = try await api.send(.get, "/v1/purchases", token: user.accessToken).decode()
            #expect(listed.items.map(\.status) == [.credited, .refunded])
            try await api.expectBooksBalance(user)
        }
    }

    // MARK: Subscriptions

    @Test("A subscription's renewal, grace period, expiry and refund move premium as Apple says, out of order too", arguments: StoreKind.allCases)
    func subscriptionLifecycle(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            func premium() async throws -> Date? {
                let me = try await api.send(.get, "/v1/me", token: user.accessToken)
                #expect(me.status == .ok, "\(me.text)")
                return try me.decode(Me.self).premiumUntil
            }
            func notify(_ notification: DevAppStore.Notification) async throws {
                let answer = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: notification.body, as: UTF8.self))
                #expect(answer.status == .ok, "\(answer.text)")
            }
            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            let redeemed: PurchaseResponse = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction)).decode()
            let firstEnd = try #require(bought.transaction.expiresDate)
            #expect(redeemed.premiumUntil == firstEnd && redeemed.purchase.kind == .subscription && redeemed.purchase.status == .active)
            try await notify(bought.notification)
            #expect(try await premium() == firstEnd)

            server.clock.advance(by: 30 * 86_400 - 60)
            let renewal = try appStore.renew(bought.transaction.transactionId, send: false)
            let secondEnd = try #require(renewal.transaction.expiresDate)
            try await notify(renewal.notification)
            #expect(try await premium() == secondEnd)
            // The first purchase's notification again, older: nothing moves back.
            try await notify(bought.notification)
            #expect(try await premium() == secondEnd)

            server.clock.advance(by: 30 * 86_400)
            let failed = try appStore.failRenewal(renewal.transaction.transactionId, send: false)
            let grace = try #require(failed.renewalInfo?.gracePeriodExpiresDate)
            try await notify(failed)
            #expect(try await premium() == grace)
            server.clock.advance(by: 16 * 86_400)
            try await notify(try appStore.expireGracePeriod(renewal.transaction.transactionId, send: false))
            let expired = try await premium()
            #expect(expired == nil || expired! <= server.clock.now)
            let (readings, _) = try await Self.readings(api, user)
            #expect(readings == 3, "three a day again")
        }
    }

    @Test("A refunded subscription ends premium at the refund; the reversal restores it", arguments: StoreKind.allCases)
    func subscriptionRefund(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            _ = try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            server.clock.advance(by: 86_400)
            let refund = try appStore.refund(bought.transaction.transactionId, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self)).status == .ok)
            let me: Me = try await api.send(.get, "/v1/me", token: user.accessToken).decode()
            #expect(me.premiumUntil.map { $0 <= server.clock.now } ?? true)
            let reversal = try appStore.reverseRefund(bought.transaction.transactionId, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: reversal.body, as: UTF8.self)).status == .ok)
            let restored: Me = try await api.send(.get, "/v1/me", token: user.accessToken).decode()
            #expect(restored.premiumUntil == bought.transaction.expiresDate)
        }
    }

    @Test("A restore on another account moves a subscription bought without an appAccountToken there; the earlier holder loses premium",
        arguments: StoreKind.allCases)
    func restoreMovesPremium(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let first = try await api.newGuest()
            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, send: false)
            let request = RedeemPurchaseRequest(signedTransaction: bought.signedTransaction)
            _ = try await api.send(.post, "/v1/purchases/apple", token: first.accessToken, json: request)
            let second = try await api.newGuest()
            let restored: PurchaseResponse = try await api.send(.post, "/v1/purchases/apple", token: second.accessToken, json: request).decode()
            #expect(restored.premiumUntil == bought.transaction.expiresDate)
            let earlier: Me = try await api.send(.get, "/v1/me", token: first.accessToken).decode()
            #expect(earlier.premiumUntil == nil || earlier.premiumUntil! <= server.clock.now)
        }
    }

    // MARK: The webhook

    @Test("The webhook answers 200 for a test notification and a duplicate, 400 for what does not verify, and changes nothing then", arguments: StoreKind.allCases)
    func webhookAnswers(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let test = try appStore.test(send: false)
            let first = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: test.body, as: UTF8.self))
            #expect(first.status == .ok && first.text.contains("ignored"), "\(first.text)")
            let again = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: test.body, as: UTF8.self))
            #expect(again.status == .ok && again.text.contains("duplicate"), "\(again.text)")
            for bad in [#"{"signedPayload":"x.y.z"}"#, #"{"signed":"x"}"#, "[]"] {
                let answer = try await api.send(.post, "/v1/webhooks/appstore", raw: bad)
                #expect(answer.status == .badRequest, "\(bad): \(answer.text)")
            }
            let forged = try appStore.test(defect: .otherRoot, send: false)
            let refused = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: forged.body, as: UTF8.self))
            #expect(refused.status == .badRequest && refused.errorCode == "untrusted_chain")
        }
    }

    /// The user's free readings left today and the quota list.
    static func readings(_ api: APIConnection, _ user: TestUser) async throws -> (Int, QuotaList) {
        let quotas: QuotaList = try await api.send(.get, "/v1/quotas", token: user.accessToken).decode()
        let readings = quotas.items.first { $0.name == "readings" }
        return (readings.map { $0.unlimited ? Int.max : $0.remaining } ?? 0, quotas)
    }
}
