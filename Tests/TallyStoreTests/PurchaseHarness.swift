import Foundation
import TallyStore
import Testing

/// Verified App Store facts as the route layer hands them to a store (`PurchaseStore`), made in tests: every id random,
/// so tests sharing one PostgreSQL database never meet; Production's, unless a test makes them Sandbox's (``sandbox(limit:)``).
enum AppStoreFacts {
    static let tokensProduct = "com.example.tokens.100"
    static let monthlyProduct = "com.example.premium.monthly"

    /// A consumable of `tokens` per unit, bought at `purchased` (signed then, unless `signed` says otherwise).
    static func consumable(
        _ transactionId: String = randomId("tx-"), tokens: Int64 = 100, quantity: Int = 1, for account: String? = nil, purchased: Date,
        signed: Date? = nil, revoked: Date? = nil, percentage: Int? = nil
    ) -> VerifiedTransaction {
        VerifiedTransaction(
            transactionId: transactionId, originalTransactionId: transactionId, productId: tokensProduct, product: .tokens(tokens),
            quantity: quantity, appAccountToken: account, environment: "Production", purchaseDate: purchased, expiresDate: nil,
            revocationDate: revoked, revocationPercentage: percentage, signedDate: signed ?? purchased)
    }

    /// One period of a subscription (`original`), from `purchased` to `expires`.
    static func period(
        _ transactionId: String = randomId("tx-"), of original: String, for account: String? = nil, purchased: Date, expires: Date,
        signed: Date? = nil, revoked: Date? = nil
    ) -> VerifiedTransaction {
        VerifiedTransaction(
            transactionId: transactionId, originalTransactionId: original, productId: monthlyProduct, product: .premium, quantity: 1,
            appAccountToken: account, environment: "Production", purchaseDate: purchased, expiresDate: expires, revocationDate: revoked,
            signedDate: signed ?? purchased)
    }

    /// A notification about `transaction`, signed at `signed` (a retry: the same `uuid`).
    static func notification(
        _ type: NotificationType, _ transaction: VerifiedTransaction?, signed: Date, uuid: String = randomId("n-"), grace: Date? = nil
    ) -> VerifiedNotification {
        VerifiedNotification(
            notificationUUID: uuid, type: type, signedDate: signed, transaction: transaction,
            renewal: grace.map { RenewalState(autoRenews: true, gracePeriodExpiresDate: $0) })
    }
}

/// The instant `days` days after ``defaultStart``, where every fixture's clock starts.
func day(_ days: Double) -> Date { defaultStart.addingTimeInterval(days * 86_400) }

extension VerifiedTransaction {
    /// The same transaction bought in Sandbox, as the route layer hands it over: with the configuration's bound on
    /// Sandbox credits (`nil`: none).
    func sandbox(limit: Int64?) -> VerifiedTransaction {
        var transaction = self
        transaction.environment = VerifiedTransaction.sandbox
        transaction.sandboxLimit = limit
        return transaction
    }

    /// The same transaction as the App Store signs it again at `signed` (refunded at `revoked`, if given).
    func signed(at signed: Date, revoked: Date? = nil, percentage: Int? = nil) -> VerifiedTransaction {
        var transaction = self
        transaction.signedDate = signed
        if let revoked { transaction.revocationDate = revoked }
        if let percentage { transaction.revocationPercentage = percentage }
        return transaction
    }
}

extension Fixture {
    /// `userId` submits `transaction` now.
    @discardableResult
    func redeem(_ transaction: VerifiedTransaction, by userId: String) async throws -> Redemption {
        try await store.redeem(transaction, userId: userId, now: now)
    }

    /// The App Store delivers `notification` now.
    @discardableResult
    func deliver(_ notification: VerifiedNotification) async throws -> NotificationOutcome {
        try await store.apply(notification, now: now)
    }

    /// The account's balance.
    func balance(_ userId: String) async throws -> Int64? {
        try await store.wallet(userId: userId, now: now)?.balance
    }

    /// The account's bought premium end.
    func boughtPremium(_ userId: String) async throws -> Date? {
        try await store.user(id: userId)?.purchasedPremiumUntil
    }

    /// The entries of the account that name `reference` (a transaction, or a subscription's original transaction).
    func entries(_ userId: String, naming reference: String) async throws -> [LedgerEntryRecord] {
        try await allEntries(userId).filter { $0.reference == reference }
    }

    /// The unclaimed purchase `transactionId`, if the admin's list has it (looked for page by page).
    func unclaimed(_ transactionId: String) async throws -> PurchaseRecord? {
        var cursor: PurchaseCursor?
        while true {
            let page = try await store.unclaimedPurchases(after: cursor, limit: 200, now: now)
            if let found = page.first(where: { $0.transactionId == transactionId }) { return found }
            guard let last = page.last else { return nil }
            cursor = PurchaseCursor(after: last)
        }
    }

    /// Every purchase of the account, newest first, read in pages of `pageSize`.
    func allPurchases(_ userId: String, pageSize: Int = 2) async throws -> [PurchaseRecord] {
        var all: [PurchaseRecord] = []
        var cursor: PurchaseCursor?
        while true {
            let page = try await store.purchases(userId: userId, after: cursor, limit: pageSize, now: now)
            all += page
            guard page.count == pageSize, let last = page.last else { return all }
            cursor = PurchaseCursor(token: PurchaseCursor(after: last).token)
        }
    }
}

/// Runs `body`, expecting it to throw `.purchaseClaimed`.
func expectClaimed(_ kind: StoreKind, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Redemption) async {
    await expectStoreError(.purchaseClaimed, kind, sourceLocation: sourceLocation, body)
}
