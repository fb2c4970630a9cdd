import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyDevAppStore
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// A purchase whose notification and submission were both lost (an outage, a crashed app), credited from Apple's
/// records through the admin API — the user's transaction history (`…/purchases/reconcile`, from a known transaction
/// or the customer's order id) and Apple's notification history (`/admin/v1/appstore/replay-notifications`) — exactly
/// once, however often and however concurrently, on one process and across two on PostgreSQL.
@Suite("Reconciliation with Apple's records", .timeLimit(.minutes(4)))
struct ReconciliationTests {
    static func reconcile(_ api: APIConnection, _ user: TestUser, orderId: String? = nil) async throws -> APIResponse {
        try await api.send(.post, "/admin/v1/users/\(user.userId)/purchases/reconcile", admin: true, json: ReconcileRequest(orderId: orderId), on: .admin)
    }

    static func replay(_ api: APIConnection, since: Date, all: Bool = false) async throws -> APIResponse {
        try await api.send(
            .post, "/admin/v1/appstore/replay-notifications", admin: true, json: ReplayNotificationsRequest(since: since, onlyFailures: !all), on: .admin)
    }

    /// `user` buys a pack whose notification Apple never delivers and whose submission never reaches the server.
    static func lostPurchase(_ appStore: DevAppStore, _ user: TestUser) throws -> String {
        try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false).transaction.transactionId
    }

    @Test("Reconcile credits the lost purchase once; again it credits nothing; another account's purchase is left alone", arguments: StoreKind.allCases)
    func reconcile(kind: StoreKind) async throws {
        try await ConsumptionRequestTests.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            let known = try await ConsumptionRequestTests.buy(api, appStore, user)
            let lost = try Self.lostPurchase(appStore, user)
            let other = try await api.newGuest()
            _ = try Self.lostPurchase(appStore, other)

            let first = try await Self.reconcile(api, user)
            #expect(first.status == .ok, "\(first.text)")
            let report = try first.decode(ReconcileReport.self)
            #expect(report.credited == [lost] && report.alreadyApplied == 1 && report.refused.isEmpty, "\(report)")
            #expect(try await api.wallet(user).balance == 200)
            let again = try await Self.reconcile(api, user).decode(ReconcileReport.self)
            #expect(again.credited.isEmpty && again.alreadyApplied == 2, "\(again)")
            #expect(try await api.wallet(user).balance == 200)
            #expect(try await api.wallet(other).balance == 0)
            try await api.expectBooksBalance(user)
            #expect(known != lost)

            // A user the server knows no transaction of: the customer's order id is the way in.
            let stranger = try await api.newGuest()
            let unseen = try Self.lostPurchase(appStore, stranger)
            let refused = try await Self.reconcile(api, stranger)
            #expect(refused.status == .notFound && refused.text.contains("orderId"), "\(refused.text)")
            let byOrder = try await Self.reconcile(api, stranger, orderId: DevAppStore.orderId(ofTransaction: unseen))
            #expect(try byOrder.decode(ReconcileReport.self).credited == [unseen], "\(byOrder.text)")
            #expect(try await api.wallet(stranger).balance == 100)
            #expect(try await Self.reconcile(api, stranger, orderId: "MQNOSUCH00").decode(ReconcileReport.self).credited.isEmpty)
            _ = server
        }
    }

    @Test("Replaying Apple's undelivered notifications credits each once; a second replay finds them duplicates", arguments: StoreKind.allCases)
    func replay(kind: StoreKind) async throws {
        try await ConsumptionRequestTests.with(kind) { server, appStore, api in
            let since = server.clock.now.addingTimeInterval(-3600)
            let user = try await api.newGuest()
            _ = try Self.lostPurchase(appStore, user)
            _ = try Self.lostPurchase(appStore, user)
            let first = try await Self.replay(api, since: since)
            #expect(first.status == .ok, "\(first.text)")
            let report = try first.decode(ReplayReport.self)
            #expect(report.read == 2 && report.dispositions == ["applied": 2] && report.refused.isEmpty, "\(report)")
            #expect(try await api.wallet(user).balance == 200)
            let second = try await Self.replay(api, since: since).decode(ReplayReport.self)
            #expect(second.dispositions == ["duplicate": 2], "\(second)")
            #expect(try await api.wallet(user).balance == 200)
            let tooFar = try await Self.replay(api, since: server.clock.now.addingTimeInterval(-181 * 86_400))
            #expect(tooFar.status == .badRequest && tooFar.errorCode == "invalid_field", "\(tooFar.text)")
            try await api.expectBooksBalance(user)
        }
    }

    @Test("Reconcile and replay at the same time, five of each, credit the lost purchase once", arguments: StoreKind.allCases)
    func concurrent(kind: StoreKind) async throws {
        try await ConsumptionRequestTests.with(kind) { server, appStore, api in
            let user = try await api.newGuest()
            _ = try await ConsumptionRequestTests.buy(api, appStore, user)
            _ = try Self.lostPurchase(appStore, user)
            let since = server.clock.now.addingTimeInterval(-3600)
            let answers = try await concurrently(10, connect: { _ in server.connection() }) { index, connection in
                index % 2 == 0 ? try await Self.reconcile(connection, user) : try await Self.replay(connection, since: since, all: true)
            }
            #expect(answers.allSatisfy { $0.status == .ok }, "\(answers.map(\.text))")
            #expect(try await api.wallet(user).balance == 200)
            #expect(try await api.allEntries(user).filter { $0.kind == "purchase" }.count == 2)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("Across two PostgreSQL processes: reconcile and replay on both at once credit the lost purchase once")
    func acrossProcesses() async throws {
        try await Self.withPair { pair, appStore, clock in
            let setup = pair.connection(0)
            let user = try await setup.newGuest()
            let bought = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let redeemed = try await setup.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            #expect(redeemed.status == .ok, "\(redeemed.text)")
            clock.advance(by: 1)
            _ = try Self.lostPurchase(appStore, user)
            let since = Date().addingTimeInterval(-3600)
            let answers = try await concurrently(8, connect: { pair.connection($0 % 2) }) { index, connection in
                index % 4 < 2 ? try await Self.reconcile(connection, user) : try await Self.replay(connection, since: since, all: true)
            }
            #expect(answers.allSatisfy { $0.status == .ok }, "\(answers.map(\.text))")
            #expect(try await pair.connection(1).wallet(user).balance == 200)
            #expect(try await pair.connection(1).allEntries(user).filter { $0.kind == "purchase" }.count == 2)
            try await pair.connection(1).expectBooksBalance(user)
            await setup.close()
        }
    }

    /// Two `tally serve` processes on one PostgreSQL whose App Store Server API is `appStore`'s (served in this process),
    /// answering consumption requests as `consumption` (YAML) says.
    static func withPair(
        consumption: String = "", _ body: @Sendable (ServerPair, DevAppStore, ManualClock) async throws -> Void
    ) async throws {
        let clock = ManualClock(Date())
        let appStore = try TestProducts.appStore(clock: clock)
        try await TestProducts.serving(appStore) { port in
            let key = appStore.serverAPIKey
            try await TestProducts.withRootFile(appStore) { appStoreYAML in
                let config = """
                    guestSignupsPerIPPerHour: 100000
                    quotas: []
                    actions: [{name: ai.query, tokens: 3}, {name: question, tokens: 1}]
                    \(appStoreYAML)
                      serverAPI: {issuerId: \(key.issuerId), keyId: \(key.keyId), privateKeyEnv: TEST_APPSTORE_KEY, productionURL: "http://127.0.0.1:\(port)", sandboxURL: "http://127.0.0.1:\(port)"}
                    \(consumption)
                    """
                try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
                    try await ServerPair.with(url: url, config: config, extraEnvironment: ["TEST_APPSTORE_KEY": key.privateKeyPEM]) { pair in
                        try await body(pair, appStore, clock)
                        #expect(pair.stop() == [.exited(0), .exited(0)])
                    }
                }
            }
        }
    }

    @Test("Across two PostgreSQL processes: Apple's consumption request posted to both at once, twice, is answered once, 60 % spent")
    func consumptionAcrossProcesses() async throws {
        try await Self.withPair(consumption: "  consumption: {consentedByTerms: true}") { pair, appStore, _ in
            let api = pair.connection(0)
            let user = try await api.newGuest()
            let bought = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let redeemed = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            #expect(redeemed.status == .ok, "\(redeemed.text)")
            for _ in 0..<60 {
                let spent = try await api.send(.post, "/v1/actions/question", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
                #expect(spent.status == .ok, "\(spent.text)")
            }
            let request = try appStore.requestConsumption(bought.transaction.transactionId, reason: "OTHER", send: false)
            let posted = try await concurrently(4, connect: { pair.connection($0 % 2) }) { _, connection in
                try await connection.send(.post, "/v1/webhooks/appstore", raw: String(decoding: request.body, as: UTF8.self))
            }
            #expect(posted.allSatisfy { $0.status == .ok }, "\(posted.map(\.text))")
            var answers: [DevConsumptionAnswer] = []
            for _ in 0..<1_000 {
                answers = appStore.serverAPIRecords.consumptionAnswers
                if !answers.isEmpty { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            // Both processes keep passing over the queue: give a second answer every chance to show.
            try await Task.sleep(for: .milliseconds(300))
            answers = appStore.serverAPIRecords.consumptionAnswers
            #expect(answers.count == 1 && answers.first?.body.consumptionPercentage == 60_000, "\(answers)")
            await api.close()
        }
    }
}
