import Foundation
import HTTPTypes
import TallyAPI
import TallyAppStore
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import Testing

/// The purchase rules an app and its operator see, through the real HTTP stack on both stores, with payloads signed by
/// the local App Store: a subscription's row says what `/v1/me` and the console say; a subscription stays with the
/// account its `appAccountToken` names (a guest is told to sign in); Sandbox credits are labelled and bounded; a refund
/// after a reversed refund takes the tokens back again.
@Suite("App Store purchase rules", .timeLimit(.minutes(2)))
struct PurchaseRulesTests {
    static func redeem(_ api: APIConnection, _ user: TestUser, _ signed: String) async throws -> APIResponse {
        try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: signed))
    }

    static func notify(_ api: APIConnection, _ notification: DevAppStore.Notification) async throws {
        let answer = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: notification.body, as: UTF8.self))
        #expect(answer.status == .ok, "\(answer.text)")
    }

    static func purchases(_ api: APIConnection, _ user: TestUser) async throws -> [Purchase] {
        let page: Page<Purchase> = try await api.send(.get, "/v1/purchases", token: user.accessToken).decode()
        return page.items
    }

    static func me(_ api: APIConnection, _ user: TestUser) async throws -> Me {
        try await api.send(.get, "/v1/me", token: user.accessToken).decode()
    }

    /// The console's page of `user`, signed in with the admin key.
    static func consolePage(of user: TestUser, _ api: APIConnection, _ server: LiveServer) async throws -> String {
        let (_, op) = try await ConsoleTests.signIn(api, key: server.adminKey)
        return try await ConsoleTests.get(api, "/console/users/\(user.userId)", cookie: try #require(op).cookie).text
    }

    /// A guest that linked an email: an account one can sign in to.
    static func account(_ api: APIConnection) async throws -> TestUser {
        let user = try await api.newGuest()
        let email = "buyer-\(UUID().uuidString.prefix(8))@example.com"
        let linked = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: "correct horse 1"))
        #expect(linked.status == .ok, "\(linked.text)")
        return user
    }

    @Test("A subscription is one row that says what /v1/me and the console say: renewed, then expired early", arguments: StoreKind.allCases)
    func subscriptionRowAgreesWithMe(kind: StoreKind) async throws {
        try await PurchasesTests.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            #expect(try await Self.redeem(api, user, bought.signedTransaction).status == .ok)
            var latest = bought.transaction
            for _ in 0..<2 {
                server.clock.advance(by: 30 * 86_400 - 60)
                let renewal = try appStore.renew(latest.transactionId, send: false)
                try await Self.notify(api, renewal.notification)
                latest = renewal.transaction
            }
            let renewed = try await Self.purchases(api, user)
            #expect(renewed.count == 1, "\(renewed)")
            #expect(renewed.first?.transactionId == latest.transactionId && renewed.first?.status == .active, "\(renewed)")
            #expect(renewed.first?.premiumUntil == (try await Self.me(api, user)).premiumUntil, "\(renewed)")

            server.clock.advance(by: 86_400)
            try await Self.notify(api, try appStore.expire(latest.transactionId, send: false))
            let me = try await Self.me(api, user)
            let ended = try #require(me.premiumUntil)
            #expect(ended <= server.clock.now, "premium ended: \(ended)")
            let listed = try await Self.purchases(api, user)
            #expect(listed.map(\.status) == [.expired] && listed.map(\.premiumUntil) == [ended], "\(listed)")

            let page = try await Self.consolePage(of: user, api, server)
            #expect(page.contains("<td>expired</td>") && !page.contains("<td>active</td>"), "the console's purchases table")
            #expect(page.contains("not premium (ended"), "the console's premium line")
        }
    }

    @Test("A subscription stays with the account its appAccountToken names: a guest is told to sign in, another account refused; without a token a restore moves it",
        arguments: StoreKind.allCases)
    func subscriptionFollowsItsBuyer(kind: StoreKind) async throws {
        try await PurchasesTests.with(kind) { server, appStore, api in
            let buyer = try await Self.account(api)
            let bought = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: buyer.userId), send: false)
            #expect(try await Self.redeem(api, buyer, bought.signedTransaction).status == .ok)
            let end = try #require(bought.transaction.expiresDate)

            let freshInstall = try await api.newGuest()
            let asGuest = try await Self.redeem(api, freshInstall, bought.signedTransaction)
            #expect(asGuest.status == .conflict && asGuest.errorCode == "sign_in_required", "\(asGuest.status) \(asGuest.text)")
            let other = try await Self.account(api)
            let asOther = try await Self.redeem(api, other, bought.signedTransaction)
            #expect(asOther.status == .conflict && asOther.errorCode == "purchase_claimed", "\(asOther.status) \(asOther.text)")
            #expect(try await Self.me(api, buyer).premiumUntil == end)
            #expect(try await Self.me(api, freshInstall).premiumUntil == nil)
            #expect(try await Self.me(api, other).premiumUntil == nil)
            #expect(try await Self.purchases(api, buyer).map(\.status) == [.active])

            // Bought without an appAccountToken: the last to submit holds it, the account it left lists it moved_away.
            let anonymous = try appStore.purchase(productId: TestProducts.premiumMonthly, send: false)
            #expect(try await Self.redeem(api, other, anonymous.signedTransaction).status == .ok)
            let moved = try await Self.redeem(api, freshInstall, anonymous.signedTransaction)
            #expect(moved.status == .ok, "\(moved.text)")
            #expect(try await Self.purchases(api, other).map(\.status) == [.movedAway])
            #expect(try await Self.purchases(api, freshInstall).map(\.status) == [.active])
            #expect(try await Self.me(api, other).premiumUntil == nil)
        }
    }

    @Test("Sandbox tokens are credited up to appStore.sandbox.tokensPerAccount (1,000 by default), labelled Sandbox; beyond it refused, a notification credits nothing",
        arguments: StoreKind.allCases)
    func sandboxCreditsBounded(kind: StoreKind) async throws {
        try await PurchasesTests.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let token = UUID(uuidString: user.userId)
            for _ in 0..<10 {
                let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
                let answer = try await Self.redeem(api, user, purchase.signedTransaction)
                #expect(answer.status == .ok, "\(answer.text)")
            }
            let beyond = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
            let refused = try await Self.redeem(api, user, beyond.signedTransaction)
            #expect(refused.status == .forbidden && refused.errorCode == "sandbox_limit", "\(refused.status) \(refused.text)")
            try await Self.notify(api, beyond.notification)
            let notified = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
            try await Self.notify(api, notified.notification)
            #expect(try await api.wallet(user).balance == 1_000)
            let entries = try await api.allEntries(user)
            #expect(entries.count == 10 && entries.allSatisfy { $0.kind == "purchase" && $0.reason?.hasPrefix("Sandbox ") == true }, "\(entries.map(\.reason))")

            let page = try await Self.consolePage(of: user, api, server)
            #expect(page.contains("<td>Sandbox</td>"), "the console's purchases table names the environment")
            #expect(page.contains(#"class="sandbox""#), "the console marks Sandbox entries")
            try await api.expectBooksBalance(user)
        }
    }

    @Test("REFUND, REFUND_REVERSED, REFUND again: the second refund takes the tokens back again; its reversal gives them back", arguments: StoreKind.allCases)
    func refundAfterReversal(kind: StoreKind) async throws {
        try await PurchasesTests.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            #expect(try await Self.redeem(api, user, purchase.signedTransaction).status == .ok)
            let id = purchase.transaction.transactionId
            // (the notification, the balance after it)
            let steps: [(() throws -> DevAppStore.Notification, Int64)] = [
                ({ try appStore.refund(id, send: false) }, 0), ({ try appStore.reverseRefund(id, send: false) }, 100),
                ({ try appStore.refund(id, send: false) }, 0), ({ try appStore.reverseRefund(id, send: false) }, 100),
                ({ try appStore.refund(id, percentage: 50_000, send: false) }, 50),
            ]
            for (make, balance) in steps {
                server.clock.advance(by: 60)
                let notification = try make()
                try await Self.notify(api, notification)
                try await Self.notify(api, notification)  // Apple's retry
                #expect(try await api.wallet(user).balance == balance, "\(notification.payload.notificationType)")
            }
            #expect(try await Self.purchases(api, user).map(\.status) == [.refunded])
            try await api.expectBooksBalance(user)
        }
    }
}
