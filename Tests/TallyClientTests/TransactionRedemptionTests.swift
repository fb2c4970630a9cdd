import Foundation
import TallyAPI
@testable import TallyClient
import TallyDevAppStore
import TallyTestSupport
import Testing

/// Restore and the transaction observer (TransactionRedemption.swift), the logic under the StoreKit layer: a stand-in
/// store hands them transactions signed by the local App Store, which the real server verifies and credits.
@Suite("Restore and the transaction observer", .timeLimit(.minutes(1)))
struct TransactionRedemptionTests {
    @Test("Restore redeems each entitlement once, however often restored; premium comes back; consumables are not restored",
        arguments: StoreKind.allCases)
    func restore(kind: StoreKind) async throws {
        try await ClientPurchasesTests.with(kind) { server, appStore in
            let (client, _) = server.client()
            _ = try await client.signInAsGuest()
            try await client.link(email: "restore@example.com", password: "correct horse 1")
            let user = try #require(await client.user)
            // Bought on another device of this account, never redeemed (the app was killed before it could).
            let subscription = try appStore.purchase(
                productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            let tokens = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let store = StandInStore(entitlements: [
                StandInTransaction(subscription, kind: .autoRenewable), StandInTransaction(tokens, kind: .consumable),
            ])
            #expect(try await client.premiumStatus().isActive == false)

            let restored = try await client.purchases.restore(from: store)
            let expiry = try #require(subscription.transaction.expiresDate)
            #expect(restored.purchases.map(\.transactionId) == [subscription.transaction.transactionId])
            #expect(restored.premiumUntil == expiry && restored.refused.isEmpty)
            #expect(try await client.premiumStatus().until == expiry, "the cached profile shows it at once")
            #expect(store.entitlements.map(\.finishCount) == [1, 0], "the consumable is neither redeemed nor finished")

            let again = try await client.purchases.restore(from: store)
            #expect(again.purchases == restored.purchases && again.premiumUntil == expiry)
            #expect(store.syncs == 2)
            let listed = try await client.purchases.list()
            #expect(listed.items.map(\.transactionId) == [subscription.transaction.transactionId], "redeemed once")
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 0, "no consumable credited")
        }
    }

    @Test("A reinstall as a new guest is told to sign in (kept unfinished); signed in to the account, restore brings premium back",
        arguments: [StoreKind.sqlite])
    func restoreAfterReinstall(kind: StoreKind) async throws {
        try await ClientPurchasesTests.with(kind) { server, appStore in
            let (buyer, _) = server.client()
            let buyerUser = try await buyer.signInAsGuest()
            try await buyer.link(email: "buyer@example.com", password: "correct horse 1")
            let subscription = try appStore.purchase(
                productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: buyerUser.userId), send: false)
            try await buyer.purchases.redeem(signedTransaction: subscription.signedTransaction)

            let (device, _) = server.client()
            _ = try await device.signInAsGuest()
            let store = StandInStore(entitlements: [StandInTransaction(subscription, kind: .autoRenewable)])
            let asGuest = try await device.purchases.restore(from: store)
            #expect(asGuest.purchases.isEmpty && asGuest.premiumUntil == nil)
            #expect(asGuest.refused.map(\.error.serverCode) == [.signInRequired])
            #expect(store.entitlements[0].finishCount == 0, "kept for the account")

            _ = try await device.signIn(email: "buyer@example.com", password: "correct horse 1")
            let restored = try await device.purchases.restore(from: store)
            #expect(restored.premiumUntil == subscription.transaction.expiresDate && restored.refused.isEmpty)
            #expect(try await device.premiumStatus().isActive)
            #expect(store.entitlements[0].finishCount == 1)
        }
    }

    @Test("Restore without a server throws and finishes nothing; without a user it is refused before the App Store is asked")
    func restoreOffline() async throws {
        try await ClientPurchasesTests.with(.sqlite) { server, appStore in
            let (client, transport) = server.client()
            let store = StandInStore(entitlements: [])
            let signedOut = await #expect(throws: ClientError.self) { try await client.purchases.restore(from: store) }
            #expect(signedOut?.code == .unauthorized)
            #expect(store.syncs == 0)
            let user = try await client.signInAsGuest()
            let subscription = try appStore.purchase(
                productId: TestProducts.premiumMonthly, appAccountToken: UUID(uuidString: user.userId), send: false)
            let offline = StandInStore(entitlements: [StandInTransaction(subscription, kind: .autoRenewable)])
            transport.enqueue(Array(repeating: .offline, count: 20), forPathPrefix: "/v1/purchases/apple")
            let unreachable = await #expect(throws: ClientError.self) { try await client.purchases.restore(from: offline) }
            #expect(unreachable?.code == .offline)
            #expect(offline.entitlements[0].finishCount == 0)
        }
    }

    @Test("The observer waits for a sign-in, redeems unfinished transactions and updates once each, and finishes them")
    func observerBeforeSignIn() async throws {
        try await ClientPurchasesTests.with(.sqlite) { server, appStore in
            let (client, transport) = server.client()
            // StoreKit hands over a consumable the last launch left unfinished; nobody is signed in yet.
            let left = try appStore.purchase(productId: TestProducts.tokens100, send: false)
            let store = StandInStore(unfinished: [StandInTransaction(left, kind: .consumable)])
            let pending = PendingTransactions(purchases: client.purchases, onRefused: { _ in })
            let observer = Task { await client.purchases.observe(store, into: pending) }
            defer { observer.cancel() }
            try await waitFor { await pending.idle == [left.id] }
            #expect(transport.count(path: "/v1/purchases/apple") == 0, "nothing is sent before a sign-in")

            _ = try await client.signInAsGuest()  // its answers are the sign: the waiting transaction is redeemed
            try await waitFor { store.unfinishedOnes[0].finishCount == 1 }
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 100)

            // An update while running (a purchase on another device), delivered twice: redeemed and finished once each.
            let user = try #require(await client.user)
            let update = StandInTransaction(
                try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false),
                kind: .consumable)
            store.deliver(update)
            try await waitFor { update.finishCount == 1 }
            store.deliver(update)
            try await waitFor { update.finishCount == 2 }
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 200, "credited once")
            #expect(await pending.idle.isEmpty)
        }
    }

    @Test("A redemption that found no server is redeemed at the next sign the server is back, without a clock moving")
    func observerRetriesOnSign() async throws {
        try await ClientPurchasesTests.with(.sqlite) { server, appStore in
            let (client, transport) = server.client()
            let user = try await client.signInAsGuest()
            let bought = StandInTransaction(
                try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false),
                kind: .consumable)
            transport.enqueue(Array(repeating: .offline, count: 1_000), forPathPrefix: "/v1/purchases/apple")
            let store = StandInStore(unfinished: [bought])
            let pending = PendingTransactions(purchases: client.purchases, onRefused: { _ in })
            let observer = Task { await client.purchases.observe(store, into: pending) }
            defer { observer.cancel() }
            try await waitFor { await pending.idle == [bought.transactionId] && transport.count(path: "/v1/purchases/apple") > 0 }
            #expect(bought.finishCount == 0, "kept: the server never saw it")

            transport.clearFaults()  // the network is back, and any answer says so
            // The sign: any answer. (Its balance is not checked: the redemption it wakes may land before it is read.)
            _ = try await client.fetch(client.walletQuery, forceRefresh: true)
            try await waitFor { bought.finishCount == 1 }
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 100)
            #expect(await pending.idle.isEmpty)
        }
    }

    @Test("A transaction the server refuses for good (a bad signature) is finished and reported; another account's is finished")
    func observerRefusals() async throws {
        try await ClientPurchasesTests.with(.sqlite) { server, appStore in
            let (alice, _) = server.client()
            let (bob, _) = server.client()
            let aliceUser = try await alice.signInAsGuest()
            let bobUser = try await bob.signInAsGuest()
            let claimed = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: aliceUser.userId), send: false)
            try await alice.purchases.redeem(signedTransaction: claimed.signedTransaction)
            let mine = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: bobUser.userId), send: false)
            let tampered = StandInTransaction(
                id: UInt64(mine.transaction.transactionId)!, productId: mine.transaction.productId, kind: .consumable,
                signedTransaction: try appStore.signedTransaction(mine.transaction.transactionId, defect: .tamperedPayload))
            let store = StandInStore(unfinished: [StandInTransaction(claimed, kind: .consumable), tampered])
            let reports = Locked<[RefusedTransaction]>([])
            let observer = Task { await bob.purchases.observe(store, onRefused: { refused in reports.withLock { $0.append(refused) } }) }
            defer { observer.cancel() }
            try await waitFor { store.unfinishedOnes.allSatisfy { $0.finishCount == 1 } }
            let reported = reports.withLock { $0 }
            #expect(reported.map(\.transactionId) == [tampered.transactionId], "only the refusal is reported, not another account's")
            #expect(reported.first?.error.serverCode == .invalidSignature && reported.first?.productId == TestProducts.tokens100)
            #expect(try await bob.fetch(bob.walletQuery, forceRefresh: true).balance == 0)
        }
    }

    @Test("The verdict after each kind of failure")
    func verdicts() {
        func server(_ status: Int, _ code: ErrorCode?) -> ClientError { ClientError(.server, status: status, serverCode: code) }
        let table: [(any Error, RedemptionVerdict)] = [
            (ClientError(.offline), .retry), (ClientError(.timedOut), .retry), (ClientError(.rateLimited), .retry),
            (server(503, .unavailable), .retry), (server(500, .internalError), .retry), (server(408, nil), .retry),
            (CancellationError(), .retry),
            (server(409, .purchaseClaimed), .finish),
            (server(400, .invalidSignature), .refuse), (server(400, .untrustedChain), .refuse), (server(400, .wrongBundle), .refuse),
            (server(400, .wrongEnvironment), .refuse), (server(400, .unsupportedAlgorithm), .refuse),
            (server(409, .signInRequired), .keep), (server(422, .unknownProduct), .keep), (server(403, .sandboxLimit), .keep),
            (ClientError(.unauthorized), .retry),
        ]
        for (error, verdict) in table {
            #expect(RedemptionVerdict.after(error) == verdict, "\(error)")
            #expect(PurchasesClient.finishes(after: error) == (verdict == .finish || verdict == .refuse), "\(error)")
        }
    }
}

/// Waits, yielding, until `condition` holds; the suite's time limit ends a wait that never does.
private func waitFor(_ condition: () async -> Bool) async throws {
    while await !condition() {
        try Task.checkCancellation()
        await Task.yield()
    }
}

/// A transaction as StoreKit would hand it over, signed by the local App Store; counts its `finish()` calls.
final class StandInTransaction: StoreTransaction {
    let transactionId: UInt64
    let productId: String
    let kind: StoreProductKind
    let signedTransaction: String
    private let finishes = Locked(0)

    init(id: UInt64, productId: String, kind: StoreProductKind, signedTransaction: String) {
        self.transactionId = id
        self.productId = productId
        self.kind = kind
        self.signedTransaction = signedTransaction
    }

    convenience init(_ purchase: DevAppStore.Purchase, kind: StoreProductKind) {
        self.init(
            id: UInt64(purchase.transaction.transactionId)!, productId: purchase.transaction.productId, kind: kind,
            signedTransaction: purchase.signedTransaction)
    }

    /// How often the app finished it.
    var finishCount: Int { finishes.withLock { $0 } }

    func finish() async { finishes.withLock { $0 += 1 } }
}

/// A store holding fixed entitlements and unfinished transactions, with updates delivered by the test.
final class StandInStore: TransactionSource {
    let entitlements: [StandInTransaction]
    let unfinishedOnes: [StandInTransaction]
    private let syncCount = Locked(0)
    private let updateStream = AsyncStream.makeStream(of: (any StoreTransaction).self)

    init(entitlements: [StandInTransaction] = [], unfinished: [StandInTransaction] = []) {
        self.entitlements = entitlements
        self.unfinishedOnes = unfinished
    }

    /// How often ``sync()`` was called.
    var syncs: Int { syncCount.withLock { $0 } }

    /// Hands `transaction` to the observer as `Transaction.updates` would.
    func deliver(_ transaction: StandInTransaction) { updateStream.continuation.yield(transaction) }

    func sync() async throws { syncCount.withLock { $0 += 1 } }
    func currentEntitlements() -> AsyncStream<any StoreTransaction> { Self.stream(entitlements) }
    func unfinished() -> AsyncStream<any StoreTransaction> { Self.stream(unfinishedOnes) }
    func updates() -> AsyncStream<any StoreTransaction> { updateStream.stream }

    private static func stream(_ transactions: [StandInTransaction]) -> AsyncStream<any StoreTransaction> {
        AsyncStream { continuation in
            for transaction in transactions { continuation.yield(transaction) }
            continuation.finish()
        }
    }
}

extension DevAppStore.Purchase {
    /// Apple's transaction id, as StoreKit gives it.
    var id: UInt64 { UInt64(transaction.transactionId)! }
}
