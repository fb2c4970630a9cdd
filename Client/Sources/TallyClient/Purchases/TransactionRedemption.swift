import Foundation
import TallyAPI

extension PurchasesClient {
    /// Restores the Apple Account's purchases from `source` (StoreKit on Apple platforms: ``restore()``): syncs with the
    /// App Store, then redeems each entitlement that is not a consumable; the server credits each once, however often
    /// restored. Throws when the App Store sync failed or the server could not be reached (nothing is lost: restore
    /// again); refusals are in the answer.
    func restore(from source: any TransactionSource) async throws -> RestoredPurchases {
        guard await client.user != nil else { throw ClientError(.unauthorized, message: "sign in before restoring purchases") }
        try await source.sync()
        var restored = RestoredPurchases()
        var answered = false
        var seen = Set<UInt64>()
        for await transaction in source.currentEntitlements() where transaction.kind != .consumable {
            guard seen.insert(transaction.transactionId).inserted else { continue }
            do {
                let answer = try await redeem(transaction)
                restored.purchases.append(answer.purchase)
                restored.premiumUntil = answer.premiumUntil
                answered = true
            } catch {
                if RedemptionVerdict.after(error) == .retry { throw error }
                restored.refused.append(RefusedTransaction(transaction, ClientError.reported(error)))
            }
        }
        if !answered { restored.premiumUntil = try await client.premiumStatus().until }
        return restored
    }

    /// Redeems `transaction` (the server verifies its signature itself: StoreKit's verdict is not trusted with money)
    /// and finishes it when the server has it, or will never credit it to this user (``finishes(after:)``); a failure
    /// is rethrown either way. What a purchase, restore and the observer each do with one transaction.
    @discardableResult
    func redeem(_ transaction: any StoreTransaction) async throws -> PurchaseResponse {
        do {
            let answer = try await redeem(signedTransaction: transaction.signedTransaction)
            await transaction.finish()
            return answer
        } catch {
            if Self.finishes(after: error) { await transaction.finish() }
            throw error
        }
    }

    /// Redeems the transactions `source` delivers, unfinished ones and updates side by side, until the calling task is
    /// cancelled (StoreKit on Apple platforms: ``observeTransactions(onRefused:)``). Start it at launch: while no one is
    /// signed in, transactions wait; they are redeemed at the first sign that someone is (a sign-in's answers).
    func observe(_ source: any TransactionSource, onRefused: @escaping @Sendable (RefusedTransaction) -> Void) async {
        await observe(source, into: PendingTransactions(purchases: self, onRefused: onRefused))
    }

    /// ``observe(_:onRefused:)`` keeping the transactions not redeemed yet in `pending` (which a test reads).
    func observe(_ source: any TransactionSource, into pending: PendingTransactions) async {
        let reachability = client.syncHost.reachability
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for await transaction in source.unfinished() { await pending.offer(transaction) } }
            group.addTask { for await transaction in source.updates() { await pending.offer(transaction) } }
            // Waiting ones are tried again at each sign that the server is back: an answer to any request (a sign-in
            // is one), the event stream connecting, the network, the app coming to the foreground.
            group.addTask {
                while !Task.isCancelled {
                    let generation = reachability.generation
                    await pending.retry()
                    guard (try? await reachability.wait(Self.retryCeiling, .unreachable, after: generation)) != nil else { return }
                }
            }
            await group.next()
            await group.next()
            group.cancelAll()
        }
    }
}

extension PurchasesClient {
    /// The longest the observer waits for a sign before trying waiting transactions again.
    static let retryCeiling: TimeInterval = 3_600
}

/// The observer's transactions not redeemed yet, each with the user it waits for: tried once when offered, then
/// again at each ``retry()``: a ``RedemptionVerdict/retry`` at once, a ``RedemptionVerdict/keep`` only once the
/// signed-in user is another one (a guest told to sign in has).
actor PendingTransactions {
    private struct Waiting {
        let transaction: any StoreTransaction
        /// The user it was last refused for (`keep`); nil: try whoever is signed in.
        var keptFor: String?
        /// A redemption of it is in flight.
        var busy = false
    }

    private let purchases: PurchasesClient
    private let onRefused: @Sendable (RefusedTransaction) -> Void
    private var waiting: [UInt64: Waiting] = [:]

    init(purchases: PurchasesClient, onRefused: @escaping @Sendable (RefusedTransaction) -> Void) {
        self.purchases = purchases
        self.onRefused = onRefused
    }

    /// The transactions not redeemed yet with no redemption in flight, by id.
    var idle: Set<UInt64> { Set(waiting.filter { !$0.value.busy }.keys) }

    /// A transaction StoreKit delivered: redeemed now when someone is signed in (the same one twice is one redemption).
    func offer(_ transaction: any StoreTransaction) async {
        if waiting[transaction.transactionId] == nil { waiting[transaction.transactionId] = Waiting(transaction: transaction) }
        await attempt(transaction.transactionId)
    }

    /// Tries again each transaction that can be redeemed now.
    func retry() async {
        for id in waiting.keys.sorted() { await attempt(id) }
    }

    private func attempt(_ id: UInt64) async {
        guard var entry = waiting[id], !entry.busy, let user = await purchases.client.user?.userId, entry.keptFor != user else { return }
        entry.busy = true
        waiting[id] = entry
        do {
            try await purchases.redeem(entry.transaction)
            waiting[id] = nil
        } catch {
            switch RedemptionVerdict.after(error) {
            case .finish:
                waiting[id] = nil
            case .refuse:
                waiting[id] = nil
                onRefused(RefusedTransaction(entry.transaction, ClientError.reported(error)))
            case .retry:
                waiting[id]?.busy = false
            case .keep:
                waiting[id]?.busy = false
                waiting[id]?.keptFor = user
            }
        }
    }
}

extension RefusedTransaction {
    init(_ transaction: any StoreTransaction, _ error: ClientError) {
        self.init(transactionId: transaction.transactionId, productId: transaction.productId, error: error)
    }
}
