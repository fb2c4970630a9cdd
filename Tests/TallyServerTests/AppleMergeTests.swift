import Foundation
import TallyAPI
import TallyAppleID
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

/// The issue's example of a guest that signs in with Apple to the account it turns out to belong to, through the real
/// HTTP stack with the local App Store and the Sign in with Apple stand-in: on each store in process, and across two
/// `tally serve` processes on one PostgreSQL. The guest has 30 tokens (20 of them bought, 5 held by an open hold), two
/// documents and two of three free readings used today; the account 10 tokens, a document of the same id and one
/// reading used. After the merge the account has 40 tokens and nothing held, three documents (the guest's `a` beside
/// its own), the purchase and two readings used; the guest's token is refused, a refund of the guest's purchase lands
/// on the account, and the merge retried or raced answers the same and moves nothing again.
@Suite("Sign in with Apple: a guest merged into its account", .timeLimit(.minutes(4)))
struct AppleMergeTests {
    static let clientId = "com.example.oracle"
    /// A consumable of 20 tokens.
    static let tokens20 = "com.example.tokens.20"
    /// Three free readings a day, then 5 tokens.
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "readings", daily: 3)], actions: [ActionSpec(name: "reading", quota: "readings", tokens: 5)])
    static let collections = "collections:\n  - {name: notes}\n"

    /// The example's two users before the merge, and what the guest bought.
    struct Example {
        let sub: String
        let account: TestUser
        let guest: TestUser
        let purchase: DevAppStore.Purchase

        /// Sets the example up, the account through `accountAPI` and the guest through `guestAPI` (two processes, or one).
        static func make(accountAPI: APIConnection, guestAPI: APIConnection, appleID: DevAppleID, appStore: DevAppStore) async throws -> Example {
            let sub = "001234." + UUID().uuidString.prefix(8).lowercased()
            let signedUp = try await AppleMergeTests.signIn(accountAPI, appleID, sub: sub)
            #expect(signedUp.status == .created, "\(signedUp.text)")
            let account = try signedUp.testUser()
            try await accountAPI.grant(10, to: account)
            #expect(try await accountAPI.putDocument(account, "notes", "a", jsonValue(#"{"by":"account"}"#)).status == .created)
            try await AppleMergeTests.read(accountAPI, account)

            let guest = try await guestAPI.newGuest()
            let purchase = try appStore.purchase(productId: tokens20, appAccountToken: UUID(uuidString: guest.userId), send: false)
            let redeemed = try await guestAPI.send(
                .post, "/v1/purchases/apple", token: guest.accessToken, json: RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction))
            #expect(redeemed.status == .ok, "\(redeemed.text)")
            try await guestAPI.grant(10, to: guest)
            let hold = try await guestAPI.send(.post, "/v1/wallet/holds", token: guest.accessToken, json: CreateHoldRequest(amount: 5, ttlSeconds: 600))
            #expect(hold.status == .created, "\(hold.text)")
            for _ in 0..<2 { try await AppleMergeTests.read(guestAPI, guest) }
            let pushed = try await guestAPI.push(
                guest, clientId: "guest-installation-0001",
                [SyncMutation(id: 1, op: .put, collection: "notes", docId: "a", data: jsonValue(#"{"by":"guest","n":1}"#)),
                 SyncMutation(id: 2, op: .put, collection: "notes", docId: "b", data: jsonValue(#"{"by":"guest","n":2}"#))])
            #expect(pushed.status == .ok, "\(pushed.text)")
            let before = try await guestAPI.wallet(guest)
            #expect(before.balance == 30 && before.held == 5, "the guest before: \(before)")
            return Example(sub: sub, account: account, guest: guest, purchase: purchase)
        }

        /// The merge's summary, as the issue's example must move it.
        func expectSummary(_ merged: MergeSummary?, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(merged?.guestUserId == guest.userId && merged?.tokensMoved == 30 && merged?.holdsMoved == 1 && merged?.holdsReleased == 0, sourceLocation: sourceLocation)
            #expect(merged?.documentsMoved == 2 && merged?.purchasesMoved == 1, sourceLocation: sourceLocation)
            #expect(merged?.conflicts.map(\.documentId) == ["a"], sourceLocation: sourceLocation)
        }

        /// What the account must hold after the merge, read through `api` as `account` (a session of the account), with
        /// `balance` tokens (40, less a refund since).
        func expectMerged(_ api: APIConnection, as account: TestUser, balance: Int64, purchaseStatus: TallyAPI.PurchaseStatus) async throws {
            let wallet = try await api.wallet(account)
            #expect(wallet.balance == balance && wallet.held == 5, "the tokens moved, the guest's hold with them: \(wallet)")
            let notes = try await api.state(account).values.filter { $0.collection == "notes" }.sorted { $0.id < $1.id }
            #expect(notes.count == 3, "\(notes.map(\.id))")
            #expect(notes.first { $0.id == "a" }?.data.text == #"{"by":"account"}"#, "the account's own document kept")
            #expect(Set(notes.map(\.data.text)) == [#"{"by":"account"}"#, #"{"by":"guest","n":1}"#, #"{"by":"guest","n":2}"#], "the guest's two beside it")
            let purchases: Page<Purchase> = try await api.send(.get, "/v1/purchases", token: account.accessToken).decode()
            #expect(purchases.items.map(\.transactionId) == [purchase.transaction.transactionId])
            #expect(purchases.items.first?.status == purchaseStatus)
            let quotas: QuotaList = try await api.send(.get, "/v1/quotas", token: account.accessToken).decode()
            #expect(quotas.items.first { $0.name == "readings" }?.used == 2, "the larger of 2 and 1, not the sum")
            #expect(try await api.send(.get, "/v1/wallet", token: guest.accessToken).status == .unauthorized, "the guest's token is refused")
            try await api.expectBooksBalance(account)
            try await api.expectAdminBooks(guest.userId, balance: 0)
        }
    }

    /// Signs in with a token the stand-in mints for `sub`, as `caller` if given.
    static func signIn(_ api: APIConnection, _ appleID: DevAppleID, sub: String, caller: TestUser? = nil, merge: Bool? = nil) async throws -> APIResponse {
        let nonce = AppleNonce.make().raw
        let minted = try await appleID.identityToken(sub: sub, nonce: nonce)
        return try await api.send(
            .post, "/v1/auth/apple", token: caller?.accessToken, json: AppleSignInRequest(identityToken: minted.identityToken, nonce: nonce, merge: merge))
    }

    /// One reading (a free use of today's quota while one is left).
    static func read(_ api: APIConnection, _ user: TestUser) async throws {
        let answer = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
        #expect(answer.status == .ok, "\(answer.text)")
    }

    /// The App Store configuration selling ``tokens20`` from `appStore`'s CA.
    static func appStoreConfiguration(_ appStore: DevAppStore) throws -> AppStoreConfiguration {
        try AppStoreConfiguration(
            bundleId: TestProducts.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox], rootCertificates: [Data(appStore.authority.rootDER)],
            products: [AppStoreProduct(productId: tokens20, grant: .tokens(20))])
    }

    @Test("The issue's example: asked first, then merged once; a refund of the guest's purchase lands on the account; a retry with the guest's old token answers the same",
        arguments: StoreKind.allCases)
    func example(kind: StoreKind) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        try await AppleIDStandIn.serving(clientId: Self.clientId, clock: clock) { appleID, keysURL in
            let apple = try SignInWithAppleConfiguration(audiences: [Self.clientId], keysURL: keysURL)
            let sync = try TallyConfiguration(file: Self.collections, catalog: Self.catalog).sync
            let store = try Self.appStoreConfiguration(appStore)
            try await LiveServer.with(kind, catalog: Self.catalog, clock: clock, configure: {
                ($0.signInWithApple, $0.appStore, $0.sync) = (apple, store, sync)
            }) { server in
                let api = server.connection()
                defer { Task { await api.close() } }
                let example = try await Example.make(accountAPI: api, guestAPI: api, appleID: appleID, appStore: appStore)

                let asked = try await Self.signIn(api, appleID, sub: example.sub, caller: example.guest)
                #expect(asked.status == .conflict && asked.errorCode == "account_exists", "\(asked.text)")
                #expect(try asked.decode(ErrorResponse.self).guest == GuestProgress(balance: 30, documents: 2, purchases: 1))
                let unmoved = try await api.wallet(example.guest)
                #expect(unmoved.balance == 30 && unmoved.held == 5, "asking moved nothing: \(unmoved)")

                let answer = try await Self.signIn(api, appleID, sub: example.sub, caller: example.guest, merge: true)
                #expect(answer.status == .ok, "\(answer.text)")
                let tokens = try answer.decode(SessionTokens.self)
                #expect(tokens.userId == example.account.userId && !tokens.isGuest)
                example.expectSummary(tokens.merged)
                let account = try answer.testUser()
                try await example.expectMerged(api, as: account, balance: 40, purchaseStatus: .credited)

                // Apple refunds the guest's purchase afterwards: the account pays it back.
                clock.advance(by: 60)
                let refund = try appStore.refund(example.purchase.transaction.transactionId, send: false)
                let applied = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self))
                #expect(applied.status == .ok, "\(applied.text)")
                try await example.expectMerged(api, as: account, balance: 20, purchaseStatus: .refunded)

                // The app lost the merge's answer and asks again with the guest's token: the same summary, nothing moved.
                let retried = try await Self.signIn(api, appleID, sub: example.sub, caller: example.guest, merge: true)
                #expect(retried.status == .ok, "\(retried.text)")
                example.expectSummary(try retried.decode(SessionTokens.self).merged)
                try await example.expectMerged(api, as: try retried.testUser(), balance: 20, purchaseStatus: .refunded)
                // That token counts for nothing else: without merge, or for another Apple identity.
                let plain = try await Self.signIn(api, appleID, sub: example.sub, caller: example.guest)
                #expect(plain.status == .unauthorized, "\(plain.text)")
                let other = try await Self.signIn(api, appleID, sub: "001234.someone-else", caller: example.guest, merge: true)
                #expect(other.status == .unauthorized, "\(other.text)")
            }
        }
    }

    @Test("Across two processes on one PostgreSQL: the merge raced from both moves everything once, and a refund sent to either lands on the account")
    func racedAcrossProcesses() async throws {
        let clock = ManualClock(Date())
        let appStore = try TestProducts.appStore(clock: clock)
        try await AppleIDStandIn.serving(clientId: Self.clientId, clock: clock) { appleID, keysURL in
            try await TestProducts.withRootFile(appStore, products: ["{productId: \(Self.tokens20), tokens: 20}"]) { appStoreYAML in
                let config = """
                    guestSignupsPerIPPerHour: 100000
                    signupGrant: 0
                    quotas: [{name: readings, daily: 3}]
                    actions: [{name: reading, quota: readings, tokens: 5}]
                    \(Self.collections)
                    \(appStoreYAML)
                    signInWithApple:
                      audiences: [\(Self.clientId)]
                      keysURL: \(keysURL)
                    """
                try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
                    try await ServerPair.with(url: url, config: config) { pair in
                        let apis = [pair.connection(0), pair.connection(1)]
                        // The account on one process, the guest on the other.
                        let example = try await Example.make(accountAPI: apis[0], guestAPI: apis[1], appleID: appleID, appStore: appStore)
                        let answers = try await concurrently(6, connect: { pair.connection($0 % 2) }) { _, api in
                            try await Self.signIn(api, appleID, sub: example.sub, caller: example.guest, merge: true)
                        }
                        #expect(answers.allSatisfy { $0.status == .ok }, "\(answers.map { "\($0.status) \($0.text.prefix(120))" })")
                        for answer in answers { example.expectSummary(try answer.decode(SessionTokens.self).merged) }
                        for (index, api) in apis.enumerated() {
                            try await example.expectMerged(api, as: try answers[index].testUser(), balance: 40, purchaseStatus: .credited)
                        }
                        clock.advance(by: 60)
                        let refund = try appStore.refund(example.purchase.transaction.transactionId, send: false)
                        for api in apis.reversed() {
                            let applied = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self))
                            #expect(applied.status == .ok, "\(applied.text)")
                        }
                        for (index, api) in apis.enumerated() {
                            try await example.expectMerged(api, as: try answers[index].testUser(), balance: 20, purchaseStatus: .refunded)
                        }
                        let merges = try await apis[0].allEntries(try answers[0].testUser()).filter { $0.kind == "merge_in" }
                        #expect(merges.map(\.amount) == [30], "one merge_in entry")
                        for api in apis { await api.close() }
                        #expect(pair.stop() == [.exited(0), .exited(0)])
                    }
                }
            }
        }
    }
}

extension APIResponse {
    /// The session a sign-in answered, as a test user.
    func testUser() throws -> TestUser {
        let tokens = try decode(SessionTokens.self)
        return TestUser(userId: tokens.userId, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
    }
}

extension APIConnection {
    /// Checks any user's books through the admin API (a merged guest has no session left): the ledger invariants, and
    /// its balance.
    func expectAdminBooks(_ userId: String, balance: Int64, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let view: AdminUserView = try await send(.get, "/admin/v1/users/\(userId)", admin: true).decode()
        var entries: [LedgerEntry] = []
        var cursor: String?
        repeat {
            let page: Page<LedgerEntry> = try await send(
                .get, "/admin/v1/users/\(userId)/entries?limit=100" + (cursor.map { "&cursor=\($0)" } ?? ""), admin: true).decode()
            entries += page.items
            cursor = page.nextCursor
        } while cursor != nil
        #expect(view.wallet.balance == balance && view.wallet.held == 0, "user \(userId): \(view.wallet)", sourceLocation: sourceLocation)
        expectLedgerInvariants(view.wallet, entries, "user \(userId)", sourceLocation: sourceLocation)
    }
}
