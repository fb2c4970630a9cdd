import Foundation
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// A consumable already credited to the submitter is answered from one prepared statement shared with the replays
    /// waiting at the same time (``PurchaseReplayBatchStatement``). Anything else about a consumable: one statement reads
    /// its row and the submitter's account, and plans: a repeated submission writes nothing and is answered from it.
    /// Otherwise, and for every subscription, ``settle(_:now:)`` runs it under the purchase's lock; a refusal of the
    /// submitter is thrown once that committed.
    public func redeem(_ transaction: VerifiedTransaction, userId: String, now: Date) async throws -> Redemption {
        if let replay = try await replayed(transaction, userId: userId, now: now) { return replay }
        let fact = PurchaseFact.redemption(transaction, userId: userId)
        guard transaction.product.kind == .consumable else {
            let (snapshot, plan) = try await settleSubmission(fact, now: now)
            return try plan.redemption(by: userId, snapshot: snapshot, now: now)
        }
        let row = try await rows(
            """
            SELECT \(unescaped: PurchaseColumns.purchase), a.*, NULL::BIGINT AS other_premium_until
            FROM (SELECT 1) x
            LEFT JOIN purchases p ON p.transaction_id = \(transaction.transactionId) AND p.kind = 'consumable'
            LEFT JOIN LATERAL (
              SELECT \(unescaped: PurchaseColumns.account) FROM users u JOIN wallets w ON w.user_id = u.id
              WHERE u.id = \(userId) AND u.merged_into IS NULL
            ) a ON true
            """
        ).first.map(Columns.init)
        guard let row else { throw PostgresFailure(kind: "no row from the purchase read") }
        var snapshot = PurchaseSnapshot(purchase: try StoredPurchase.read(row), subscription: nil, accounts: [:])
        if let account = try PurchaseAccount.read(row) { snapshot.accounts[userId] = account }
        var plan = try PurchasePlanner.plan(fact, snapshot: snapshot, now: now)
        if !plan.writesNothing { (snapshot, plan) = try await settleSubmission(fact, now: now) }
        return try plan.redemption(by: userId, snapshot: snapshot, now: now)
    }

    /// Records the notification as seen and applies it under the purchase's lock, in one transaction; a duplicate
    /// (its insert finds the `notificationUUID`, waiting for a concurrent one's commit) changes nothing.
    public func apply(_ notification: VerifiedNotification, now: Date) async throws -> NotificationOutcome {
        let fact = PurchaseFact.notification(notification)
        let seen: @Sendable (PooledConnection) async throws -> Bool = { connection in
            var statement = BoundStatement()
            let write = Writes.recordPurchaseNotification(
                uuid: statement.bind(notification.notificationUUID), type: statement.bind(notification.type.rawValue),
                transactionId: statement.bind(notification.transaction?.transactionId),
                signedAt: statement.bind(notification.signedDate.millis), now: statement.bind(now.millis))
            let key = notification.transaction.map { ChangedRows.transaction($0.transactionId) } ?? .all
            return try await self.run(write, statement, changing: [key], on: connection).isEmpty
        }
        guard let (snapshot, plan) = try await settle(fact, now: now, unlessSeen: seen) else {
            return NotificationOutcome(disposition: .duplicate)
        }
        return plan.outcome(snapshot: snapshot, now: now)
    }

    /// The account's purchases, newest first, after `cursor`.
    public func purchases(userId: String, after cursor: PurchaseCursor?, limit: Int, now: Date) async throws -> [PurchaseRecord] {
        try await rows(
            """
            SELECT \(unescaped: PurchaseColumns.listed) WHERE p.user_id = \(userId)
              AND (p.purchased_at, p.transaction_id) < (\(cursor?.purchasedAt.millis ?? Int64.max), \(cursor?.transactionId ?? ""))
            ORDER BY p.purchased_at DESC, p.transaction_id DESC LIMIT \(Int64(limit))
            """
        ).compactMap { try PurchaseColumns.record(Columns($0), at: now) }
    }

    /// The purchases no account holds, newest first, after `cursor` (a subscription's rows of no account only while
    /// no account holds it).
    public func unclaimedPurchases(after cursor: PurchaseCursor?, limit: Int, now: Date) async throws -> [PurchaseRecord] {
        try await rows(
            """
            SELECT \(unescaped: PurchaseColumns.listed)
            WHERE p.user_id IS NULL AND NOT p.claimed AND (p.kind = 'consumable' OR s.user_id IS NULL)
              AND (p.purchased_at, p.transaction_id) < (\(cursor?.purchasedAt.millis ?? Int64.max), \(cursor?.transactionId ?? ""))
            ORDER BY p.purchased_at DESC, p.transaction_id DESC LIMIT \(Int64(limit))
            """
        ).compactMap { try PurchaseColumns.record(Columns($0), at: now) }
    }

    /// The answer to a replay — `userId` submitting again a consumable credited to it — from one statement shared
    /// with the replays waiting at the same time (``PurchaseReplayBatchStatement``): the purchase row, read every time
    /// (a refund, from any process, may have changed it), with the submitter's account and wallet, planned by
    /// ``PurchasePlanner/replay(_:by:purchase:account:now:)``. `nil` (no such row, or anything else the full path must
    /// decide) sends the submission on to it.
    func replayed(_ transaction: VerifiedTransaction, userId: String, now: Date) async throws -> Redemption? {
        let read = ReplayRead(transactionId: transaction.transactionId, userId: userId)
        guard let found = try await retrying({ try await purchaseReplays.submitOrSendAlone(read, send: readReplays) }) else { return nil }
        return PurchasePlanner.replay(transaction, by: userId, purchase: found.purchase, account: found.account, now: now)
    }

    /// One batch of replay reads as one statement.
    private func readReplays(_ reads: [ReplayRead]) async throws -> [ReplayReadResult?] {
        let statement = PurchaseReplayBatchStatement(reads: reads)
        return try byPosition(try await prepared(statement), count: reads.count) { row in
            guard let purchase = try StoredPurchase.read(row) else { throw PostgresFailure(kind: "a replay row without its purchase") }
            return ReplayReadResult(
                purchase: purchase, account: PurchaseAccount(user: try UserRecord(row), wallet: try WalletState(row), otherPremiumUntil: nil))
        }
    }

    // MARK: The locked path

    /// Runs `fact` in one transaction: `seen` first (a notification's record; `true`: a duplicate, and nothing else
    /// happens), then the advisory lock of its original transaction (so every fact about a purchase takes turns,
    /// across processes), the rows, the accounts ``PurchasePlanner/accountsToRead(_:purchase:subscription:merged:)`` names
    /// with their wallets locked in id order, the plan, and its writes. `nil` for a duplicate.
    func settle(
        _ fact: PurchaseFact, now: Date, unlessSeen seen: (@Sendable (PooledConnection) async throws -> Bool)? = nil
    ) async throws -> (PurchaseSnapshot, PurchasePlan)? {
        let settled = try await transaction { connection -> (PurchaseSnapshot, PurchasePlan)? in
            if let seen, try await seen(connection) { return nil }
            var snapshot = PurchaseSnapshot(purchase: nil, subscription: nil, accounts: [:])
            if let transaction = fact.transaction {
                snapshot = try await lockedSnapshot(fact, transaction, on: connection)
            }
            let plan = try PurchasePlanner.plan(fact, snapshot: snapshot, now: now)
            try await write(plan, snapshot: snapshot, now: now, on: connection)
            return (snapshot, plan)
        }
        return settled
    }

    /// ``settle(_:now:unlessSeen:)`` of a submission.
    private func settleSubmission(_ fact: PurchaseFact, now: Date) async throws -> (PurchaseSnapshot, PurchasePlan) {
        guard let settled = try await settle(fact, now: now, unlessSeen: nil) else { throw PostgresFailure(kind: "a submission seen twice") }
        return settled
    }

    private func lockedSnapshot(
        _ fact: PurchaseFact, _ transaction: VerifiedTransaction, on connection: PooledConnection
    ) async throws -> PurchaseSnapshot {
        let original = transaction.originalTransactionId
        try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('tally.purchase:' || \(original), 0))", logger: logger)
        var snapshot = PurchaseSnapshot(purchase: nil, subscription: nil, accounts: [:])
        let consumable = transaction.product.kind == .consumable
        if consumable {
            snapshot.purchase = try await connection.rows(
                """
                SELECT \(unescaped: PurchaseColumns.purchase) FROM purchases p
                WHERE p.transaction_id = \(transaction.transactionId) AND p.kind = 'consumable'
                """, logger: logger
            ).first.flatMap { try StoredPurchase.read(Columns($0)) }
        } else {
            // The subscription's row (NULL columns when there is none) beside each of its rows in accounts' lists.
            let found = try await connection.rows(
                """
                SELECT \(unescaped: PurchaseColumns.rows) FROM (SELECT 1) x
                LEFT JOIN subscriptions s ON s.original_transaction_id = \(original)
                LEFT JOIN purchases p ON p.original_transaction_id = \(original) AND p.kind = 'subscription'
                """, logger: logger
            ).map(Columns.init)
            snapshot.subscription = try found.first.flatMap(StoredSubscription.read)
            snapshot.listings = try found.compactMap(StoredPurchase.read)
        }
        // The merged guests among the ids the fact names stand for the accounts they went into.
        let named = PurchasePlanner.accountsToRead(fact, purchase: snapshot.purchase, subscription: snapshot.subscription)
        for row in try await connection.rows(
            "SELECT id, merged_into FROM users WHERE id = ANY(\(named)::TEXT[]) AND merged_into IS NOT NULL", logger: logger
        ).map(Columns.init) {
            snapshot.merged[try row["id"]] = try row["merged_into"] as String
        }
        // Rows read before a merge of their owner committed name the guest still: read them again.
        let owners = [snapshot.purchase?.userId, snapshot.subscription?.userId].compactMap { $0 }
        if owners.contains(where: { snapshot.merged[$0] != nil }) { throw RetryTransaction() }
        let ids = PurchasePlanner.accountsToRead(fact, purchase: snapshot.purchase, subscription: snapshot.subscription, merged: snapshot.merged)
        // A bounded Sandbox consumable reads what Sandbox consumables credited each account.
        let bounded = consumable && transaction.sandboxLimit != nil && transaction.environment == VerifiedTransaction.sandbox
        let rows = try await connection.rows(
            """
            SELECT \(unescaped: PurchaseColumns.account),
                   (SELECT max(o.premium_until) FROM subscriptions o WHERE o.user_id = u.id AND o.original_transaction_id <> \(original))
                     AS other_premium_until,
                   CASE WHEN \(bounded) THEN (
                     SELECT coalesce(sum(c.tokens), 0) FROM purchases c
                     WHERE c.user_id = u.id AND c.kind = 'consumable' AND c.claimed AND c.environment = \(VerifiedTransaction.sandbox)
                   ) ELSE 0 END::BIGINT AS sandbox_tokens
            FROM users u JOIN wallets w ON w.user_id = u.id WHERE u.id = ANY(\(ids)::TEXT[])
            ORDER BY u.id FOR UPDATE OF w
            """, logger: logger)
        // A guest merged while this waited for its wallet: the rows and accounts read are from before; start over.
        let mergedMeanwhile = try await connection.rows(
            "SELECT 1 FROM users WHERE id = ANY(\(ids)::TEXT[]) AND merged_into IS NOT NULL LIMIT 1", logger: logger)
        guard mergedMeanwhile.isEmpty else { throw RetryTransaction() }
        for row in rows.map(Columns.init) {
            if let account = try PurchaseAccount.read(row) { snapshot.accounts[account.user.id] = account }
        }
        return snapshot
    }

    /// Writes `plan` in the transaction of `connection`, whose wallets it locked: the rows, then every entry and
    /// premium change in one statement that composes ``Writes/append(from:carrying:)``. This process's caches forget the
    /// accounts when the transaction commits.
    private func write(_ plan: PurchasePlan, snapshot: PurchaseSnapshot, now: Date, on connection: PooledConnection) async throws {
        if let original = plan.dropsUnownedListings {
            var statement = BoundStatement()
            let write = Writes.dropUnownedListings(original: statement.bind(original))
            try await run(write, statement, changing: [.transaction(original)], on: connection)
        }
        if let purchase = plan.purchase {
            // A consumable's row replaces what it was; a subscription's row in an account's list is added once.
            var statement = BoundStatement()
            let write = Writes.storePurchase(
                transactionId: statement.bind(purchase.transactionId), originalTransactionId: statement.bind(purchase.originalTransactionId),
                productId: statement.bind(purchase.productId), kind: statement.bind(purchase.kind.rawValue),
                quantity: statement.bind(Int64(purchase.quantity)), tokens: statement.bind(purchase.tokens),
                environment: statement.bind(purchase.environment), userId: statement.bind(purchase.userId),
                claimed: statement.bind(purchase.claimed), purchasedAt: statement.bind(purchase.purchasedAt.millis),
                revokedAt: statement.bind(purchase.revokedAt?.millis), refundedTokens: statement.bind(purchase.refundedTokens),
                refunds: statement.bind(Int64(purchase.refunds)), reversedAt: statement.bind(purchase.reversedAt?.millis),
                signedAt: statement.bind(purchase.signedAt?.millis), recordedAt: statement.bind(purchase.recordedAt.millis),
                consumable: purchase.kind == .consumable)
            try await run(write, statement, changing: [.transaction(purchase.transactionId)], on: connection)
        }
        if let subscription = plan.subscription {
            var statement = BoundStatement()
            let write = Writes.storeSubscription(
                originalTransactionId: statement.bind(subscription.originalTransactionId),
                transactionId: statement.bind(subscription.transactionId), productId: statement.bind(subscription.productId),
                environment: statement.bind(subscription.environment), userId: statement.bind(subscription.userId),
                expiresAt: statement.bind(subscription.expiresAt.millis), graceUntil: statement.bind(subscription.graceUntil?.millis),
                revokedAt: statement.bind(subscription.revokedAt?.millis), revocation: statement.bind(subscription.revocation?.rawValue),
                signedAt: statement.bind(subscription.signedAt.millis))
            try await run(write, statement, changing: [.transaction(subscription.originalTransactionId)], on: connection)
        }
        let users = plan.changedUsers
        guard !users.isEmpty else { return }
        // Ids taken under the wallet locks: after every entry these accounts have.
        var ids = try await nextEntryIds(plan.entries.count, on: connection).makeIterator()
        var ledger = LedgerRows(), premium = PremiumRows()
        for userId in users {
            guard let account = snapshot.accounts[userId] else { throw RetryTransaction() }
            var entries: [(id: Int64?, entry: PlannedEntry)] = []
            for entry in plan.entries(of: userId) { entries.append((ids.next(), entry)) }
            ledger.move(userId: userId, from: account.wallet, entries: entries, now: now)
            if let until = plan.premium[userId] { premium.append(userId, until) }
        }
        var statement = BoundStatement()
        let (source, premiums) = (statement.relation([ledger], as: "b"), statement.relation([premium], as: "p"))
        let rows = try await run(
            Writes.purchaseLedger(source: source, premiums: premiums), statement, changing: users.map(ChangedRows.user), on: connection)
        let counts = try Self.single(rows, "the purchase's ledger write")
        // Under the wallet locks nothing else moves these wallets; if one moved, the books read are stale: start over.
        guard try counts["moved"] == Int64(users.count), try counts["premium"] == Int64(plan.premium.count) else { throw RetryTransaction() }
    }
}

/// The replays that wait at the same time, as one statement (like ``WalletBatchReadStatement``): for each read (by its
/// `position`, from 1), a consumable credited to the read's account, with the account and its wallet; parsed and
/// planned once per connection. No row for anything else (not credited, another account's, a subscription, a merged
/// guest). The lookup is a `LIMIT 1` lateral subquery: one primary-key probe a read whatever the planner guesses of `unnest`.
struct PurchaseReplayBatchStatement: PostgresPreparedStatement {
    static let name = "tally_purchase_replay_batch_v2"
    static let sql = """
        SELECT r.position, x.*
        FROM unnest($1::TEXT[], $2::TEXT[]) WITH ORDINALITY AS r(transaction_id, user_id, position)
        CROSS JOIN LATERAL (
          SELECT \(PurchaseColumns.purchase), \(PurchaseColumns.account)
          FROM purchases p JOIN users u ON u.id = p.user_id JOIN wallets w ON w.user_id = u.id
          WHERE p.transaction_id = r.transaction_id AND p.user_id = r.user_id AND p.kind = 'consumable' AND p.claimed
            AND u.merged_into IS NULL
          LIMIT 1
        ) x
        """
    typealias Row = PostgresRow

    var reads: [ReplayRead]

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(reads.map(\.transactionId))
        bindings.append(reads.map(\.userId))
        return bindings
    }
}

/// One replay read waiting to be sent (``PurchaseReplayBatchStatement``).
struct ReplayRead: Sendable {
    var transactionId: String
    var userId: String
}

/// What one replay read found: the credited purchase and the submitter's account.
struct ReplayReadResult: Sendable {
    var purchase: StoredPurchase
    var account: PurchaseAccount
}

/// Bought premium ends to store, by account (`has_until` false: none).
private struct PremiumRows: ColumnArrays {
    private var userId: [String] = [], until: [Int64] = [], hasUntil: [Bool] = []

    mutating func append(_ user: String, _ end: Date?) {
        userId.append(user)
        until.append(end?.millis ?? 0)
        hasUntil.append(end != nil)
    }

    func forEachColumn(_ body: (String, String, any PostgresDynamicTypeEncodable) -> Void) {
        body("user_id", "TEXT", userId)
        body("until", "BIGINT", until)
        body("has_until", "BOOLEAN", hasUntil)
    }
}

/// The columns purchase reads select: a purchase's (`p_…`), a subscription's (`s_…`) and an account's, named apart.
private enum PurchaseColumns {
    static let purchase = """
        p.transaction_id AS p_transaction_id, p.original_transaction_id AS p_original_transaction_id, p.product_id AS p_product_id,
        p.kind AS p_kind, p.quantity AS p_quantity, p.tokens AS p_tokens, p.environment AS p_environment, p.user_id AS p_user_id,
        p.claimed AS p_claimed, p.purchased_at AS p_purchased_at, p.revoked_at AS p_revoked_at,
        p.refunded_tokens AS p_refunded_tokens, p.refunds AS p_refunds, p.reversed_at AS p_reversed_at, p.signed_at AS p_signed_at,
        p.recorded_at AS p_recorded_at
        """
    static let rows = purchase + """
        , s.original_transaction_id AS s_original_transaction_id, s.transaction_id AS s_transaction_id, s.product_id AS s_product_id,
        s.environment AS s_environment, s.user_id AS s_user_id, s.expires_at AS s_expires_at, s.grace_until AS s_grace_until,
        s.revoked_at AS s_revoked_at, s.revocation AS s_revocation, s.signed_at AS s_signed_at
        """
    /// The lists' rows: ``rows`` of each purchase with its subscription, if it is one (the query goes on with its `WHERE`).
    static let listed = rows + """
         FROM purchases p
        LEFT JOIN subscriptions s ON p.kind = 'subscription' AND s.original_transaction_id = p.original_transaction_id
        """
    /// An account's, from `users u JOIN wallets w` (the reads add `other_premium_until`).
    static let account = UserRecord.columns(of: "u") + ", w.balance, w.held, w.version"

    /// A listed row as a record at `now`.
    static func record(_ row: Columns, at now: Date) throws -> PurchaseRecord? {
        try StoredPurchase.read(row)?.record(at: now, subscription: try StoredSubscription.read(row))
    }
}

extension StoredPurchase {
    /// ``PurchaseColumns/purchase``; `nil` when `p_transaction_id` is NULL (no such purchase).
    fileprivate static func read(_ row: Columns) throws -> StoredPurchase? {
        guard let transactionId: String = try row["p_transaction_id"] else { return nil }
        let kind: String = try row["p_kind"]
        let (quantity, refunds): (Int64, Int64) = (try row["p_quantity"], try row["p_refunds"])
        return StoredPurchase(
            transactionId: transactionId, originalTransactionId: try row["p_original_transaction_id"], productId: try row["p_product_id"],
            kind: PurchaseKind(rawValue: kind) ?? .consumable, quantity: Int(quantity), tokens: try row["p_tokens"],
            environment: try row["p_environment"], userId: try row["p_user_id"], claimed: try row["p_claimed"],
            purchasedAt: Date(millis: try row["p_purchased_at"]), revokedAt: (try row["p_revoked_at"] as Int64?).map(Date.init(millis:)),
            refundedTokens: try row["p_refunded_tokens"], refunds: Int(refunds),
            reversedAt: (try row["p_reversed_at"] as Int64?).map(Date.init(millis:)),
            signedAt: (try row["p_signed_at"] as Int64?).map(Date.init(millis:)), recordedAt: Date(millis: try row["p_recorded_at"]))
    }
}

extension StoredSubscription {
    /// The `s_…` columns of ``PurchaseColumns/rows``; `nil` when `s_original_transaction_id` is NULL.
    fileprivate static func read(_ row: Columns) throws -> StoredSubscription? {
        guard let original: String = try row["s_original_transaction_id"] else { return nil }
        return StoredSubscription(
            originalTransactionId: original, transactionId: try row["s_transaction_id"], productId: try row["s_product_id"],
            environment: try row["s_environment"], userId: try row["s_user_id"], expiresAt: Date(millis: try row["s_expires_at"]),
            graceUntil: (try row["s_grace_until"] as Int64?).map(Date.init(millis:)),
            revokedAt: (try row["s_revoked_at"] as Int64?).map(Date.init(millis:)),
            revocation: (try row["s_revocation"] as String?).flatMap(SubscriptionRevocation.init(rawValue:)),
            signedAt: Date(millis: try row["s_signed_at"]))
    }
}

extension PurchaseAccount {
    /// A user's columns, `balance, held, version`, `other_premium_until` and, when selected, `sandbox_tokens`; `nil` when
    /// `id` is NULL (no such account).
    fileprivate static func read(_ row: Columns) throws -> PurchaseAccount? {
        guard try row["id"] as String? != nil else { return nil }
        return PurchaseAccount(
            user: try UserRecord(row), wallet: try WalletState(row),
            otherPremiumUntil: (try row["other_premium_until"] as Int64?).map(Date.init(millis:)),
            sandboxTokens: (try? row["sandbox_tokens"] as Int64?) ?? 0)
    }
}
