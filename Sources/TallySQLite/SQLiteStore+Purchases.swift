import Foundation
import GRDB
import TallyStore

extension SQLiteStore: PurchaseStore {
    /// A consumable already credited to the submitter is answered from one statement (``replayed(_:userId:now:)``). Anything else is planned from a reader first: a repeated submission writes
    /// nothing and is answered from it. Otherwise the single writer reads, plans and writes it in one transaction
    /// (every entry through ``append(_:userId:from:now:_:)``); a refusal of the submitter is thrown once that committed.
    public func redeem(_ transaction: VerifiedTransaction, userId: String, now: Date) async throws -> Redemption {
        if let replay = try await replayed(transaction, userId: userId, now: now) { return replay }
        let fact = PurchaseFact.redemption(transaction, userId: userId)
        var (snapshot, plan) = try await read { db in try Self.planned(fact, now: now, db) }
        if !plan.writesNothing {
            (snapshot, plan) = try await write { db in
                let (snapshot, plan) = try Self.planned(fact, now: now, db)
                try self.writePurchasePlan(plan, from: snapshot, now: now, db)
                return (snapshot, plan)
            }
        }
        return try plan.redemption(by: userId, snapshot: snapshot, now: now)
    }

    /// Records the notification as seen and applies it, in one writer transaction; a duplicate writes nothing.
    public func apply(_ notification: VerifiedNotification, now: Date) async throws -> NotificationOutcome {
        try await write { db in
            try db.run(
                SQLiteWrites.recordNotification, changing: notification.transaction.map { .transaction($0.transactionId) } ?? .all,
                arguments: [
                    notification.notificationUUID, notification.type.rawValue, notification.transaction?.transactionId,
                    notification.signedDate.millis, now.millis,
                ])
            guard db.changesCount == 1 else { return NotificationOutcome(disposition: .duplicate) }
            let (snapshot, plan) = try Self.planned(.notification(notification), now: now, db)
            try self.writePurchasePlan(plan, from: snapshot, now: now, db)
            return plan.outcome(snapshot: snapshot, now: now)
        }
    }

    /// The account's purchases, newest first, after `cursor`.
    public func purchases(userId: String, after cursor: PurchaseCursor?, limit: Int, now: Date) async throws -> [PurchaseRecord] {
        try await purchases(where: "p.user_id = ?", [userId], after: cursor, limit: limit, now: now)
    }

    /// The purchases no account holds, newest first, after `cursor` (a subscription's rows of no account only while
    /// no account holds it).
    public func unclaimedPurchases(after cursor: PurchaseCursor?, limit: Int, now: Date) async throws -> [PurchaseRecord] {
        try await purchases(
            where: "p.user_id IS NULL AND p.claimed = 0 AND (p.kind = 'consumable' OR s.user_id IS NULL)", [], after: cursor,
            limit: limit, now: now)
    }

    private func purchases(
        where condition: String, _ arguments: StatementArguments, after cursor: PurchaseCursor?, limit: Int, now: Date
    ) async throws -> [PurchaseRecord] {
        try await read { db in
            try db.fetchRows(
                sql: """
                    SELECT p.*, \(Self.subscriptionColumns) FROM purchases p
                    LEFT JOIN subscriptions s ON p.kind = 'subscription' AND s.original_transaction_id = p.original_transaction_id
                    WHERE \(condition) AND (p.purchased_at, p.transaction_id) < (?, ?)
                    ORDER BY p.purchased_at DESC, p.transaction_id DESC LIMIT ?
                    """,
                arguments: arguments + [cursor?.purchasedAt.millis ?? Int64.max, cursor?.transactionId ?? "", limit]
            ).map { row in StoredPurchase(row: row).record(at: now, subscription: StoredSubscription(row: row, prefix: "s_")) }
        }
    }

    /// A subscription's columns beside a purchase's (`s_…`), from `subscriptions s`.
    static let subscriptionColumns = """
        s.original_transaction_id AS s_original_transaction_id, s.transaction_id AS s_transaction_id, s.product_id AS s_product_id,
        s.environment AS s_environment, s.user_id AS s_user_id, s.expires_at AS s_expires_at, s.grace_until AS s_grace_until,
        s.revoked_at AS s_revoked_at, s.revocation AS s_revocation, s.signed_at AS s_signed_at
        """

    /// The answer to a replay — `userId` submitting again a consumable credited to it — from memory when this process
    /// read it last and no commit changed it since (``ReplayCache``), else from one statement on a quick reader
    /// (``quickRead(_:)``; instead of the full path's four, and its planning): the purchase row with the submitter's
    /// account and wallet as stored, all from one snapshot; the answer is planned by
    /// ``PurchasePlanner/replay(_:by:purchase:account:now:)``. `nil` (no such row, or anything else the full path must
    /// decide) sends the submission on to it.
    func replayed(_ transaction: VerifiedTransaction, userId: String, now: Date) async throws -> Redemption? {
        if let entry = replays.entry(transaction.transactionId, userId: userId),
            let replay = PurchasePlanner.replay(transaction, by: userId, purchase: entry.purchase, account: entry.account, now: now)
        {
            return replay
        }
        let epoch = replays.epoch
        let found = try await quickRead { db in
            try db.fetchFirst(sql: Self.replayQuery, arguments: [transaction.transactionId, userId]) { row in
                (AccountRow.decode(row), StoredPurchase(row: row))
            }
        }
        guard let ((user, wallet, _), purchase) = found else { return nil }
        let entry = ReplayCache.Entry(purchase: purchase, account: PurchaseAccount(user: user, wallet: wallet, otherPremiumUntil: nil))
        guard let replay = PurchasePlanner.replay(transaction, by: userId, purchase: purchase, account: entry.account, now: now)
        else { return nil }
        replays.store(entry, readAt: epoch)
        return replay
    }

    /// A consumable credited to the account (`?` 2) with that account and its wallet (``AccountRow``'s columns first, the
    /// purchase's after them, by name); no row for anything else.
    static let replayQuery = """
        SELECT \(AccountRow.columns), p.* FROM purchases p JOIN users u ON u.id = p.user_id JOIN wallets w ON w.user_id = u.id
        WHERE p.transaction_id = ? AND p.user_id = ? AND p.kind = 'consumable' AND p.claimed = 1 AND u.merged_into IS NULL
        """

    // MARK: In a transaction

    /// Reads what `fact` plans from (``PurchaseSnapshot``) and plans it: a consumable's row, or a subscription's with its
    /// rows in accounts' lists; the merged guests among the ids it names, then the accounts, each merged guest standing
    /// for the account it went into (with its Sandbox credits, for a bounded Sandbox consumable).
    static func planned(_ fact: PurchaseFact, now: Date, _ db: Database) throws -> (PurchaseSnapshot, PurchasePlan) {
        var snapshot = PurchaseSnapshot(purchase: nil, subscription: nil, accounts: [:])
        if let transaction = fact.transaction {
            let consumable = transaction.product.kind == .consumable
            if consumable {
                snapshot.purchase = try db.fetchRow(
                    sql: "SELECT * FROM purchases WHERE transaction_id = ? AND kind = 'consumable'", arguments: [transaction.transactionId]
                ).map(StoredPurchase.init(row:))
            } else {
                snapshot.subscription = try db.fetchRow(
                    sql: "SELECT * FROM subscriptions WHERE original_transaction_id = ?", arguments: [transaction.originalTransactionId]
                ).flatMap { StoredSubscription(row: $0) }
                snapshot.listings = try db.fetchRows(
                    sql: "SELECT * FROM purchases WHERE original_transaction_id = ? AND kind = 'subscription'",
                    arguments: [transaction.originalTransactionId]
                ).map(StoredPurchase.init(row:))
            }
            for userId in PurchasePlanner.accountsToRead(fact, purchase: snapshot.purchase, subscription: snapshot.subscription) {
                let into = try db.fetchValue(String.self, sql: "SELECT merged_into FROM users WHERE id = ?", arguments: [userId])
                if let into { snapshot.merged[userId] = into }
            }
            let bounded = consumable && transaction.sandboxLimit != nil && transaction.environment == VerifiedTransaction.sandbox
            let ids = PurchasePlanner.accountsToRead(
                fact, purchase: snapshot.purchase, subscription: snapshot.subscription, merged: snapshot.merged)
            for userId in ids {
                guard let account = try db.fetchFirst(sql: accountQuery, arguments: [userId], AccountRow.decode),
                    account.user.mergedInto == nil
                else { continue }
                let other = try db.fetchValue(Int64.self, sql: """
                        SELECT max(premium_until) FROM subscriptions WHERE user_id = ? AND original_transaction_id <> ?
                        """,
                    arguments: [userId, transaction.originalTransactionId])
                let sandboxTokens = !bounded ? 0 : try db.fetchValue(Int64.self, sql: """
                        SELECT coalesce(sum(tokens), 0) FROM purchases
                        WHERE user_id = ? AND kind = 'consumable' AND claimed = 1 AND environment = ?
                        """,
                    arguments: [userId, VerifiedTransaction.sandbox]) ?? 0
                snapshot.accounts[userId] = PurchaseAccount(
                    user: account.user, wallet: account.wallet, otherPremiumUntil: other.map(Date.init(millis:)),
                    sandboxTokens: sandboxTokens)
            }
        }
        return (snapshot, try PurchasePlanner.plan(fact, snapshot: snapshot, now: now))
    }

    /// Writes `plan`, made from `snapshot`, in the caller's transaction.
    func writePurchasePlan(_ plan: PurchasePlan, from snapshot: PurchaseSnapshot, now: Date, _ db: Database) throws {
        if let original = plan.dropsUnownedListings {
            // A subscription's rows, by its original transaction (no cached replay is of a subscription).
            try db.run(SQLiteWrites.dropUnownedListings, changing: .transaction(original), arguments: [original])
        }
        if let purchase = plan.purchase {
            // A consumable's row replaces what it was; a subscription's row in an account's list is added once.
            try db.run(
                purchase.kind == .consumable ? SQLiteWrites.storeConsumable : SQLiteWrites.listSubscription,
                changing: .transaction(purchase.transactionId),
                arguments: [
                    purchase.transactionId, purchase.originalTransactionId, purchase.productId, purchase.kind.rawValue,
                    purchase.quantity, purchase.tokens, purchase.environment, purchase.userId, purchase.claimed,
                    purchase.purchasedAt.millis, purchase.revokedAt?.millis, purchase.refundedTokens, purchase.refunds,
                    purchase.reversedAt?.millis, purchase.signedAt?.millis, purchase.recordedAt.millis,
                ])
        }
        if let subscription = plan.subscription {
            try db.run(
                SQLiteWrites.storeSubscription, changing: .transaction(subscription.originalTransactionId),
                arguments: [
                    subscription.originalTransactionId, subscription.transactionId, subscription.productId, subscription.environment,
                    subscription.userId, subscription.expiresAt.millis, subscription.graceUntil?.millis, subscription.revokedAt?.millis,
                    subscription.revocation?.rawValue, subscription.signedAt.millis,
                ])
        }
        // Each account's entries from its wallet as the snapshot read it (the planner plans only for accounts it read).
        var wallets = snapshot.accounts.mapValues(\.wallet)
        for planned in plan.entries {
            guard let wallet = wallets[planned.userId] else { throw StoreError(.userNotFound) }
            wallets[planned.userId] = try append(planned.entry, userId: planned.userId, from: wallet, now: now, db).wallet
        }
        for (userId, until) in plan.premium {
            try db.run(SQLiteWrites.setPurchasedPremium, changing: .user(userId), arguments: [until?.millis, userId])
        }
    }
}

extension StoredPurchase {
    init(row: Row) {
        self.init(
            transactionId: row["transaction_id"], originalTransactionId: row["original_transaction_id"], productId: row["product_id"],
            kind: PurchaseKind(rawValue: row["kind"]) ?? .consumable, quantity: row["quantity"], tokens: row["tokens"],
            environment: row["environment"], userId: row["user_id"], claimed: row["claimed"],
            purchasedAt: Date(millis: row["purchased_at"]), revokedAt: (row["revoked_at"] as Int64?).map(Date.init(millis:)),
            refundedTokens: row["refunded_tokens"], refunds: row["refunds"],
            reversedAt: (row["reversed_at"] as Int64?).map(Date.init(millis:)), signedAt: (row["signed_at"] as Int64?).map(Date.init(millis:)),
            recordedAt: Date(millis: row["recorded_at"]))
    }
}

extension StoredSubscription {
    /// The subscription in `row`'s columns named with `prefix`; `nil` when it has none (a LEFT JOIN that found none).
    init?(row: Row, prefix: String = "") {
        guard let original: String = row[prefix + "original_transaction_id"] else { return nil }
        self.init(
            originalTransactionId: original, transactionId: row[prefix + "transaction_id"], productId: row[prefix + "product_id"],
            environment: row[prefix + "environment"], userId: row[prefix + "user_id"], expiresAt: Date(millis: row[prefix + "expires_at"]),
            graceUntil: (row[prefix + "grace_until"] as Int64?).map(Date.init(millis:)),
            revokedAt: (row[prefix + "revoked_at"] as Int64?).map(Date.init(millis:)),
            revocation: (row[prefix + "revocation"] as String?).flatMap(SubscriptionRevocation.init(rawValue:)),
            signedAt: Date(millis: row[prefix + "signed_at"]))
    }
}
