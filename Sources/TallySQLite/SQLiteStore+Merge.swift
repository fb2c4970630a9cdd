import Foundation
import GRDB
import TallyStore

extension SQLiteStore: MergeStore {
    /// Reads, plans (``MergePlanner``) and writes the merge in one writer transaction: the single writer is the lock, so
    /// no command, purchase or document write of either account runs between the read and the writes, and a second
    /// merge of the guest finds the first one's record.
    public func merge(guestId: String, into accountId: String, now: Date) async throws -> MergeOutcome {
        try await write { db in
            let snapshot = try Self.mergeSnapshot(guestId: guestId, accountId: accountId, db)
            switch try MergePlanner.plan(snapshot, now: now) {
            case .replay(let summary):
                return MergeOutcome(summary: summary, replayed: true)
            case .merge(let plan):
                try self.writeMerge(plan, from: snapshot, now: now, db)
                return MergeOutcome(summary: plan.summary, replayed: false)
            }
        }
    }

    /// The same reads and plan on a reader, writing nothing.
    public func mergePreview(guestId: String, into accountId: String, now: Date) async throws -> MergePreview {
        try await read { db in
            try MergePlanner.preview(try Self.mergeSnapshot(guestId: guestId, accountId: accountId, db), now: now)
        }
    }

    // MARK: In a transaction

    /// Everything ``MergePlanner`` plans from; throws `.userNotFound` when either account does not exist. For a guest
    /// merged already, only the accounts and the stored merge (a replay or a refusal needs no more).
    static func mergeSnapshot(guestId: String, accountId: String, _ db: Database) throws -> MergeSnapshot {
        guard let guest = try db.fetchFirst(sql: accountQuery, arguments: [guestId], AccountRow.decode),
            let account = try db.fetchFirst(sql: accountQuery, arguments: [accountId], AccountRow.decode)
        else { throw StoreError(.userNotFound) }
        var snapshot = MergeSnapshot(guest: guest.user, guestWallet: guest.wallet, account: account.user, accountWallet: account.wallet)
        snapshot.recorded = try db.fetchValue(String.self, sql: "SELECT summary FROM merges WHERE guest_id = ?", arguments: [guestId])
            .map(GuestMergeSummary.init(encoded:))
        guard snapshot.recorded == nil, guest.user.mergedInto == nil else { return snapshot }

        snapshot.openHolds = try db.fetchRows(sql: "SELECT * FROM holds WHERE user_id = ? AND status = 'open'", arguments: [guestId])
            .map(HoldRecord.init(row:))
        // The sign-up grant is the guest's first entry (an admin's grant cannot come before the account exists).
        if let grantAndSpent = try db.fetchFirst(
            sql: """
                SELECT coalesce((SELECT amount FROM ledger_entries WHERE user_id = ?1 AND kind = 'grant' AND reason = 'signup'
                                 AND id = (SELECT min(id) FROM ledger_entries WHERE user_id = ?1)), 0),
                       coalesce((SELECT -sum(amount) FROM ledger_entries WHERE user_id = ?1 AND kind IN ('debit', 'capture')), 0)
                """, arguments: [guestId], { row -> (Int64, Int64) in (row[0], row[1]) })
        {
            (snapshot.signupGrant, snapshot.spent) = grantAndSpent
        }
        snapshot.guestCounters = try counters(db, userId: guestId, installation: nil).0
        snapshot.accountCounters = try counters(db, userId: accountId, installation: nil).0
        try db.forEachRow(
            sql: "SELECT \(DocumentRecord.columns) FROM documents WHERE user_id = ? AND deleted = 0 ORDER BY version", arguments: [guestId]
        ) { snapshot.guestDocuments.append(try DocumentRecord(row: $0)) }
        for key in MergePlanner.addressesToRead(snapshot.guestDocuments, guestId: guestId) {
            if let row = try db.fetchFirst(sql: DocumentRecord.selectOne, arguments: [accountId, key.collection, key.id], DocumentRecord.init(row:)) {
                snapshot.accountDocuments.append(row)
            }
        }
        snapshot.guestSync = try syncCounters(guestId, db)
        snapshot.accountSync = try syncCounters(accountId, db)
        snapshot.purchases = try db.fetchValue(Int.self, sql: "SELECT count(*) FROM purchases WHERE user_id = ?", arguments: [guestId]) ?? 0
        snapshot.subscriptions =
            try db.fetchValue(Int.self, sql: "SELECT count(*) FROM subscriptions WHERE user_id = ?", arguments: [guestId]) ?? 0
        snapshot.liveSessions = try db.fetchValues(
            String.self, sql: "SELECT id FROM sessions WHERE user_id = ? AND revoked_at IS NULL", arguments: [guestId])
        return snapshot
    }

    private static func syncCounters(_ userId: String, _ db: Database) throws -> SyncCounters? {
        try db.fetchFirst(
            sql: "SELECT version, purged_through, stored_documents, stored_bytes FROM sync_state WHERE user_id = ?", arguments: [userId]
        ) { row in
            SyncCounters(version: row[0], purgedThrough: row[1], usage: SyncUsage(documents: row[2], bytes: row[3]))
        }
    }

    /// Writes `plan`, made from `snapshot`, in the caller's transaction: every entry through
    /// ``append(_:userId:from:now:_:)``, from the wallets as read.
    private func writeMerge(_ plan: MergePlan, from snapshot: MergeSnapshot, now: Date, _ db: Database) throws {
        let (guestId, accountId) = (plan.summary.guestId, plan.summary.accountId)
        let both: [ChangedRows] = [.user(guestId), .user(accountId)]
        for holdId in plan.releasedHolds {
            try db.run(
                SQLiteWrites.settleHold, changing: .user(guestId), arguments: [HoldStatus.released.rawValue, nil, now.millis, holdId])
            guard db.changesCount == 1 else { throw StoreError(.holdNotOpen) }
        }
        for holdId in plan.movedHolds {
            try db.run(SQLiteWrites.moveHold, changing: both, arguments: [accountId, holdId, guestId])
            guard db.changesCount == 1 else { throw StoreError(.holdNotOpen) }
        }
        var (guestWallet, accountWallet) = (snapshot.guestWallet, snapshot.accountWallet)
        for entry in plan.guestEntries { guestWallet = try append(entry, userId: guestId, from: guestWallet, now: now, db).wallet }
        for entry in plan.accountEntries { accountWallet = try append(entry, userId: accountId, from: accountWallet, now: now, db).wallet }

        try db.run(SQLiteWrites.markMerged, changing: .user(guestId), arguments: [accountId, guestId])
        try db.run(
            SQLiteWrites.setMergedPremium, changing: .user(accountId),
            arguments: [plan.accountPurchasedPremiumUntil?.millis, plan.accountPremiumUntil?.millis, accountId])
        // A subscription both list is listed once: the account's row stays.
        try db.run(SQLiteWrites.dropListedTwice, changing: .user(guestId), arguments: [guestId, accountId])
        try db.run(SQLiteWrites.movePurchases, changing: both, arguments: [accountId, guestId])
        try db.run(SQLiteWrites.moveSubscriptions, changing: both, arguments: [accountId, guestId])
        for (quota, counter) in plan.counters {
            try db.run(SQLiteWrites.storeQuotaCounter, changing: .user(accountId), arguments: [accountId, quota, counter.used, counter.windowEnd.millis])
        }

        for record in plan.documents {
            // Where the account has no row, or over a tombstone: never over a live document.
            try db.run(
                SQLiteWrites.mergeDocument, changing: .user(accountId),
                arguments: [
                    accountId, record.collection, record.id, String(decoding: record.data, as: UTF8.self), record.rangeValue,
                    record.version, record.updatedAt.millis,
                ])
            guard db.changesCount == 1 else { throw StoreError(.invalidInput) }
        }
        try db.run(SQLiteWrites.deleteUserDocuments, changing: .user(guestId), arguments: [guestId])
        if let sync = plan.accountSync {
            try db.run(
                SQLiteWrites.storeMergedSync, changing: .user(accountId),
                arguments: [accountId, sync.version, sync.purgedThrough, sync.usage.documents, sync.usage.bytes])
        }
        if let sync = plan.guestSync {
            try db.run(
                SQLiteWrites.emptyGuestSync, changing: .user(guestId), arguments: [sync.version, sync.purgedThrough, guestId])
        }
        // The guest's device, signed in as the account, pushes its unpushed mutations under the same client id once.
        try db.run(SQLiteWrites.moveSyncClients, changing: both, arguments: [accountId, guestId])

        let revoked = try revokeSessions(ofUser: guestId, now: now, db)
        guard revoked == plan.summary.revokedSessions else { throw StoreError(.unavailable) }
        try db.run(
            SQLiteWrites.recordMerge, changing: .user(guestId),
            arguments: [guestId, accountId, try plan.summary.encoded(), now.millis])
    }
}
