import Foundation
import Synchronization
import TallyAppStore
import TallyDevAppStore
import TallyStore
import TallyTestSupport
import Testing

/// ``AppStoreServerAPIClient`` against `tally-dev dev-appstore`'s App Store Server API, which checks each token as Apple
/// does: every call answered, a wrong key refused (401, not retried), 500s retried on the injected clock's backoff.
@Suite("App Store Server API client", .timeLimit(.minutes(2)))
struct AppStoreServerAPIClientTests {
    /// The waits a client asked for, in order.
    final class Waits: Sendable {
        private let list = Mutex<[TimeInterval]>([])
        func add(_ seconds: TimeInterval) { list.withLock { $0.append(seconds) } }
        var all: [TimeInterval] { list.withLock { $0 } }
    }

    /// A client of the stand-in in `harness`, signing with `key` (the stand-in's by default), recording each wait.
    static func client(
        _ harness: DevAppStoreServerAPITests.Harness, key: DevServerAPIKey? = nil, waits: Waits? = nil
    ) throws -> AppStoreServerAPIClient {
        let issued = harness.store.serverAPIKey
        let signer = try AppStoreServerAPIToken(
            credentials: .init(keyId: issued.keyId, issuerId: issued.issuerId, bundleId: TestProducts.bundleId),
            privateKeyPEM: (key ?? issued).privateKeyPEM)
        var configuration = AppStoreServerAPIClient.Configuration()
        (configuration.productionURL, configuration.sandboxURL) = (harness.base, harness.base)
        let clock = harness.clock
        return AppStoreServerAPIClient(
            signer: signer, configuration: configuration, now: { clock.now }, sleep: { seconds in waits?.add(seconds) })
    }

    @Test("History, refunds, an order and the notifications that never arrived, as Apple answers them")
    func calls() async throws {
        try await DevAppStoreServerAPITests.with { harness in
            let client = try Self.client(harness)
            let account = UUID()
            var bought: [(id: String, orderId: String)] = []
            for _ in 0..<3 { bought.append(try await harness.purchase(account: account, send: false)) }
            let page = try await client.transactionHistory(transactionId: bought[0].id, environment: .sandbox)
            #expect(page.signedTransactions.count == 3 && !page.hasMore && page.bundleId == TestProducts.bundleId)

            let order = try await client.lookUpOrder(bought[1].orderId, environment: .sandbox)
            #expect(order.status == 0 && order.signedTransactions?.count == 1)
            #expect(try await client.lookUpOrder("MQNOSUCH00", environment: .sandbox).status == 1)

            _ = try harness.store.refund(bought[2].id, send: false)
            let refunds = try await client.refundHistory(transactionId: bought[0].id, environment: .sandbox)
            #expect(refunds.signedTransactions.count == 1)

            let history = try await client.notificationHistory(
                NotificationHistoryQuery(start: harness.clock.now.addingTimeInterval(-3600), end: harness.clock.now.addingTimeInterval(60), onlyFailures: true),
                environment: .sandbox)
            #expect(history.notificationHistory.count == 4, "three purchases and a refund, none sent: \(history.notificationHistory.count)")

            let consumption = ConsumptionInformation(
                customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 25_000)
            try await client.sendConsumptionInformation(consumption, transactionId: bought[0].id, environment: .sandbox)
            #expect(harness.store.serverAPIRecords.consumptionAnswers.map(\.body.consumptionPercentage) == [25_000])
            do {
                _ = try await client.transactionHistory(transactionId: "999999999999", environment: .sandbox)
                Issue.record("an unknown transaction was answered")
            } catch let error as AppStoreServerAPIError {
                #expect(error.code == .notFound && error.status == 404, "\(error)")
            }
        }
    }

    @Test("A key Apple does not know is refused: 401, not retried, reported as unauthorized")
    func wrongKey() async throws {
        try await DevAppStoreServerAPITests.with { harness in
            let waits = Waits()
            let client = try Self.client(harness, key: DevServerAPIKey.generate(), waits: waits)
            let bought = try await harness.purchase(send: false)
            do {
                _ = try await client.transactionHistory(transactionId: bought.id, environment: .sandbox)
                Issue.record("a wrong key was accepted")
            } catch let error as AppStoreServerAPIError {
                #expect(error.code == .unauthorized && error.status == 401, "\(error)")
            }
            #expect(waits.all.isEmpty && harness.store.serverAPIRecords.rejections.count == 1)
        }
    }

    @Test("Two 500s and a 429 asking for 7 s: retried after 1 s, 2 s, then 7 s, and answered")
    func retries() async throws {
        try await DevAppStoreServerAPITests.with { harness in
            let waits = Waits()
            let client = try Self.client(harness, waits: waits)
            let bought = try await harness.purchase(send: false)
            harness.store.serverAPIRecords.add(DevFault(path: "/inApps/v2/history/", status: 500, count: 2))
            harness.store.serverAPIRecords.add(DevFault(path: "/inApps/v2/history/", status: 429, count: 1, retryAfter: 7))
            let page = try await client.transactionHistory(transactionId: bought.id, environment: .sandbox)
            #expect(page.signedTransactions.count == 1)
            #expect(waits.all == [1, 2, 7])
            harness.store.serverAPIRecords.add(DevFault(path: "/inApps/v2/history/", status: 503, count: 4))
            do {
                _ = try await client.transactionHistory(transactionId: bought.id, environment: .sandbox)
                Issue.record("four 503s were not reported")
            } catch let error as AppStoreServerAPIError {
                #expect(error.code == .unavailable && error.status == 503, "\(error)")
            }
        }
    }
}
