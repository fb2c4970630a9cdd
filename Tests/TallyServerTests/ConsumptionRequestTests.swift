import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyAppStore
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// Refund defense through the real HTTP stack (issue 46): Apple's `CONSUMPTION_REQUEST`, signed by `tally-dev
/// dev-appstore`, reaches the webhook; Tally answers it from the ledger with Send Consumption Information to the
/// stand-in's App Store Server API (which checks the token's claims and signature as Apple does), once, retried after
/// failures, only for users who consented; Apple's later decision is recorded beside it.
@Suite("Consumption requests answered from the ledger", .timeLimit(.minutes(3)))
struct ConsumptionRequestTests {
    /// Free readings (a sample for everyone) and a 1-token question.
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "readings", daily: 3)],
        actions: [ActionSpec(name: "reading", quota: "readings", tokens: 5), ActionSpec(name: "question", tokens: 1)])

    /// A server on `kind` whose App Store Server API is the stand-in's (served on a free port), answering with `policy`;
    /// `signingKey` replaces the key the stand-in issued (a wrong key).
    static func with<T: Sendable>(
        _ kind: StoreKind, policy: ConsumptionPolicy = ConsumptionPolicy(), signingKey: DevServerAPIKey? = nil,
        offers: [AppStoreOffer] = [], clock given: ManualClock? = nil, appStore givenStore: DevAppStore? = nil,
        server configureServer: @escaping @Sendable (inout TallyConfiguration) -> Void = { _ in },
        _ body: @Sendable (LiveServer, DevAppStore, APIConnection) async throws -> T
    ) async throws -> T {
        let clock = given ?? ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try givenStore ?? TestProducts.appStore(clock: clock)
        return try await TestProducts.serving(appStore) { port in
            let issued = appStore.serverAPIKey
            let key = signingKey ?? issued
            var apiConfiguration = AppStoreServerAPIClient.Configuration()
            (apiConfiguration.productionURL, apiConfiguration.sandboxURL) = ("http://127.0.0.1:\(port)", "http://127.0.0.1:\(port)")
            let signer = try AppStoreServerAPIToken(
                credentials: .init(keyId: issued.keyId, issuerId: issued.issuerId, bundleId: TestProducts.bundleId),
                privateKeyPEM: key.privateKeyPEM)
            var configuration = try AppStoreConfiguration(
                bundleId: TestProducts.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox],
                rootCertificates: [Data(appStore.authority.rootDER)],
                products: [
                    AppStoreProduct(productId: TestProducts.tokens100, grant: .tokens(100)),
                    AppStoreProduct(productId: TestProducts.premiumMonthly, grant: .premium),
                ])
            configuration.offers = offers
            configuration.serverAPI = AppStoreServerAPISettings(signer: signer, configuration: apiConfiguration, privateKeyEnv: "TEST_KEY")
            configuration.consumption = policy
            let appStoreConfiguration = configuration
            return try await LiveServer.with(
                kind, catalog: catalog, accessTokenTTL: 365 * 86_400, clock: clock,
                configure: {
                    $0.appStore = appStoreConfiguration
                    configureServer(&$0)
                }
            ) { server in
                let api = server.connection()
                defer { Task { await api.close() } }
                return try await body(server, appStore, api)
            }
        }
    }

    /// A user who bought 100 tokens (`quantity` packs) and spent `spent` of them on questions.
    static func buyer(_ api: APIConnection, _ appStore: DevAppStore, quantity: Int = 1, spent: Int) async throws -> (TestUser, String) {
        let user = try await api.newGuest()
        let transactionId = try await buy(api, appStore, user, quantity: quantity)
        try await spend(api, user, spent)
        return (user, transactionId)
    }

    /// `user` buys `quantity` packs; the transaction id.
    static func buy(_ api: APIConnection, _ appStore: DevAppStore, _ user: TestUser, quantity: Int = 1) async throws -> String {
        let purchase = try appStore.purchase(
            productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), quantity: quantity, send: false)
        let redeemed = try await api.send(
            .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction))
        #expect(redeemed.status == .ok || redeemed.status == .created, "\(redeemed.text)")
        return purchase.transaction.transactionId
    }

    /// `user` asks `count` 1-token questions.
    static func spend(_ api: APIConnection, _ user: TestUser, _ count: Int) async throws {
        for _ in 0..<count {
            let answer = try await api.send(.post, "/v1/actions/question", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
            #expect(answer.status == .ok, "\(answer.text)")
        }
    }

    static func consent(_ api: APIConnection, _ user: TestUser, _ consented: Bool = true) async throws {
        let answer = try await api.send(
            .post, "/v1/purchases/consumption-consent", token: user.accessToken, json: ConsumptionConsentRequest(consented: consented))
        #expect(answer.status == .ok, "\(answer.text)")
        #expect(try answer.decode(ConsumptionConsent.self).consented == consented)
    }

    /// Apple asks about `transactionId`: the notification posted to the webhook, as Apple would (`notification` again: a retry).
    @discardableResult
    static func request(
        _ api: APIConnection, _ appStore: DevAppStore, _ transactionId: String, again notification: DevAppStore.Notification? = nil
    ) async throws -> DevAppStore.Notification {
        let notification = try notification ?? appStore.requestConsumption(transactionId, reason: "UNINTENDED_PURCHASE", send: false)
        let posted = try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: notification.body, as: UTF8.self))
        #expect(posted.status == .ok, "\(posted.text)")
        return notification
    }

    /// The request about `transactionId` as the server keeps it, once `settled` says it is where the test expects it
    /// (polling every 10 ms, at most 10 s: the answer is sent by the server's own service).
    static func record(
        _ server: LiveServer, _ transactionId: String, until settled: @Sendable (ConsumptionRequestRecord) -> Bool
    ) async throws -> ConsumptionRequestRecord {
        for _ in 0..<1_000 {
            if let record = try await server.services.store.consumptionRequests(transactionId: transactionId).first, settled(record) {
                return record
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let records = try await server.services.store.consumptionRequests(transactionId: transactionId)
        throw Failure("the request did not settle: \(records)")
    }

    /// The answers the stand-in accepted about `transactionId`.
    static func answers(_ appStore: DevAppStore, _ transactionId: String) -> [DevConsumptionRequest] {
        appStore.serverAPIRecords.consumptionAnswers.filter { $0.transactionId == transactionId }.map(\.body)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test("A pack 60 % spent is answered 60,000 once: a retry of the notification and later passes send nothing more", arguments: StoreKind.allCases)
    func sixtyPercent(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let (user, transactionId) = try await Self.buyer(api, appStore, spent: 60)
            try await Self.consent(api, user)
            let notification = try await Self.request(api, appStore, transactionId)
            let record = try await Self.record(server, transactionId) { $0.status != .pending }
            #expect(record.status == .sent && record.attempts == 1 && record.request.reason == "UNINTENDED_PURCHASE")
            let sent = Self.answers(appStore, transactionId)
            #expect(sent.count == 1, "\(sent)")
            let answer = try #require(sent.first)
            #expect(answer.customerConsented && answer.consumptionPercentage == 60_000 && answer.deliveryStatus == "DELIVERED")
            #expect(answer.sampleContentProvided && answer.refundPreference == nil, "\(answer)")

            try await Self.request(api, appStore, transactionId, again: notification)  // Apple's retry of the same notification
            server.clock.advance(by: 3600)
            server.services.consumptionAnswers?.poke()
            // A process started since (a new service on the same database) finds nothing left to answer either.
            let restarted = try #require(server.services.consumptionAnswers)
            let fresh = ConsumptionAnswers(
                store: server.services.store, api: restarted.api, policy: restarted.policy, clock: server.clock, logger: restarted.logger,
                ready: StartupGate())
            #expect(try await fresh.answerDue() == 0)
            #expect(Self.answers(appStore, transactionId).count == 1, "answered once")
            #expect(try await server.services.store.consumptionRequests(transactionId: transactionId).count == 1)
        }
    }

    @Test("Buy, spend, buy, spend, and a quantity of 2: the percentages docs/purchases.md documents", arguments: StoreKind.allCases)
    func buySpendBuySpend(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let (user, first) = try await Self.buyer(api, appStore, spent: 70)
            let second = try await Self.buy(api, appStore, user, quantity: 2)
            try await Self.spend(api, user, 50)
            try await Self.consent(api, user)
            for transactionId in [first, second] {
                try await Self.request(api, appStore, transactionId)
                _ = try await Self.record(server, transactionId) { $0.status == .sent }
            }
            // First bought, first spent: the first pack is used up (70 + 30), the second (2 × 100) has 20 of 200 spent.
            #expect(Self.answers(appStore, first).map(\.consumptionPercentage) == [100_000])
            #expect(Self.answers(appStore, second).map(\.consumptionPercentage) == [10_000])
            #expect(Self.answers(appStore, second).map(\.sampleContentProvided) == [true], "free readings are a sample")
        }
    }

    @Test("Without consent nothing is sent; a withdrawn consent is no consent; the terms can stand for it", arguments: StoreKind.allCases)
    func consentRequired(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let (user, transactionId) = try await Self.buyer(api, appStore, spent: 10)
            try await Self.request(api, appStore, transactionId)
            let skipped = try await Self.record(server, transactionId) { $0.status != .pending }
            #expect(skipped.status == .skipped && skipped.answer?.contains("consent") == true, "\(skipped)")

            try await Self.consent(api, user)
            try await Self.consent(api, user, false)
            let later = try await Self.buy(api, appStore, user)
            try await Self.request(api, appStore, later)
            #expect(try await Self.record(server, later) { $0.status != .pending }.status == .skipped)
            #expect(Self.answers(appStore, transactionId).isEmpty && Self.answers(appStore, later).isEmpty)
        }
        try await Self.with(kind, policy: ConsumptionPolicy(consentedByTerms: true)) { server, appStore, api in
            let (_, transactionId) = try await Self.buyer(api, appStore, spent: 10)
            try await Self.request(api, appStore, transactionId)
            #expect(try await Self.record(server, transactionId) { $0.status != .pending }.status == .sent)
            #expect(Self.answers(appStore, transactionId).map(\.consumptionPercentage) == [10_000])
        }
    }

    @Test("The first rule that holds gives the refund preference", arguments: StoreKind.allCases)
    func preferences(kind: StoreKind) async throws {
        let policy = ConsumptionPolicy(
            consentedByTerms: true,
            rules: [
                .init(when: .init(consumedAtLeast: 50_000), prefer: "DECLINE"),
                .init(when: .init(consumedAtMost: 5_000, firstPurchase: true), prefer: "GRANT_FULL"),
                .init(prefer: nil),
            ])
        try await Self.with(kind, policy: policy) { server, appStore, api in
            let cases: [(spent: Int, preference: String?)] = [(60, "DECLINE"), (3, "GRANT_FULL"), (20, nil)]
            for (spent, preference) in cases {
                let (_, transactionId) = try await Self.buyer(api, appStore, spent: spent)
                try await Self.request(api, appStore, transactionId)
                _ = try await Self.record(server, transactionId) { $0.status == .sent }
                #expect(Self.answers(appStore, transactionId).map(\.refundPreference) == [preference], "\(spent) spent")
            }
        }
    }

    @Test("Two 500s, then the answer: tried again on the backoff, sent once; Apple's refund and a decline are recorded", arguments: StoreKind.allCases)
    func retriesThenDecision(kind: StoreKind) async throws {
        try await Self.with(kind, policy: ConsumptionPolicy(consentedByTerms: true)) { server, appStore, api in
            appStore.serverAPIRecords.add(DevFault(path: "/inApps/v2/transactions/consumption/", status: 500, count: 2))
            let (_, transactionId) = try await Self.buyer(api, appStore, spent: 40)
            try await Self.request(api, appStore, transactionId)
            var record = try await Self.record(server, transactionId) { $0.attempts == 1 }
            #expect(record.status == .pending && record.lastError?.contains("500") == true, "\(record)")
            #expect(record.nextAttemptAt == server.clock.now.addingTimeInterval(30), "30 s after the first failure")
            server.clock.advance(by: 30)
            server.services.consumptionAnswers?.poke()
            record = try await Self.record(server, transactionId) { $0.attempts == 2 }
            #expect(record.status == .pending && record.nextAttemptAt == server.clock.now.addingTimeInterval(60), "then a minute")
            server.clock.advance(by: 60)
            server.services.consumptionAnswers?.poke()
            record = try await Self.record(server, transactionId) { $0.status == .sent }
            #expect(record.attempts == 3 && Self.answers(appStore, transactionId).map(\.consumptionPercentage) == [40_000])

            let refund = try appStore.refund(transactionId, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: refund.body, as: UTF8.self)).status == .ok)
            record = try await Self.record(server, transactionId) { $0.decision != nil }
            #expect(record.decision == .refund && record.decidedAt == server.clock.now)

            let (_, declined) = try await Self.buyer(api, appStore, spent: 90)
            try await Self.request(api, appStore, declined)
            _ = try await Self.record(server, declined) { $0.status == .sent }
            let decline = try appStore.declineRefund(declined, send: false)
            #expect(try await api.send(.post, "/v1/webhooks/appstore", raw: String(decoding: decline.body, as: UTF8.self)).status == .ok)
            #expect(try await Self.record(server, declined) { $0.decision != nil }.decision == .refundDeclined)
        }
    }

    @Test("A key Apple does not know is refused (401): Tally records why and keeps trying until the deadline, then gives up", arguments: [StoreKind.sqlite])
    func wrongKey(kind: StoreKind) async throws {
        try await Self.with(kind, policy: ConsumptionPolicy(consentedByTerms: true), signingKey: .generate()) { server, appStore, api in
            let (_, transactionId) = try await Self.buyer(api, appStore, spent: 40)
            try await Self.request(api, appStore, transactionId)
            let record = try await Self.record(server, transactionId) { $0.attempts == 1 }
            #expect(record.status == .pending && record.lastError?.contains("unauthorized") == true, "\(record)")
            #expect(appStore.serverAPIRecords.rejections.count >= 1, "the stand-in refused the token")
            server.clock.advance(by: 12 * 3600)
            server.services.consumptionAnswers?.poke()
            let expired = try await Self.record(server, transactionId) { $0.status != .pending }
            #expect(expired.status == .expired && expired.lastError?.contains("unauthorized") == true, "\(expired)")
            #expect(Self.answers(appStore, transactionId).isEmpty)
        }
    }

    @Test("A request whose answer failed is answered by the server started next on the same database, once", arguments: StoreKind.allCases)
    func afterRestart(kind: StoreKind) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-restart-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let policy = ConsumptionPolicy(consentedByTerms: true)
        func twoRuns(_ databaseURL: String?) async throws {
            let sameStore: @Sendable (inout TallyConfiguration) -> Void = { configuration in
                configuration.dataDirectory = directory
                if let databaseURL { configuration.databaseURL = databaseURL }
            }
            appStore.serverAPIRecords.add(DevFault(path: "/inApps/v2/transactions/consumption/", status: 503, count: 1))
            let transactionId = try await Self.with(kind, policy: policy, clock: clock, appStore: appStore, server: sameStore) { server, appStore, api in
                let (_, transactionId) = try await Self.buyer(api, appStore, spent: 25)
                try await Self.request(api, appStore, transactionId)
                let failed = try await Self.record(server, transactionId) { $0.attempts == 1 }
                #expect(failed.status == .pending && Self.answers(appStore, transactionId).isEmpty, "\(failed)")
                return transactionId
            }
            clock.advance(by: 30)
            try await Self.with(kind, policy: policy, clock: clock, appStore: appStore, server: sameStore) { server, appStore, _ in
                // The new process's first pass, at its start, finds the request due.
                let answered = try await Self.record(server, transactionId) { $0.status == .sent }
                #expect(answered.attempts == 2)
                #expect(Self.answers(appStore, transactionId).map(\.consumptionPercentage) == [25_000])
            }
        }
        if kind == .postgres {
            try await ScratchDatabase.with(baseURL: try postgresURL()) { url in try await twoRuns(url) }
        } else {
            try await twoRuns(nil)
        }
    }
}
