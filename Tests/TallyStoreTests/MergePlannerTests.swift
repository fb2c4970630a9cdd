import Foundation
import TallyStore
import Testing

/// The rules of a merge as a pure function (``MergePlanner``), on hand-made snapshots: who may merge into whom, what
/// the ledgers get, a debt, today's quotas, documents and their conflicts, premium, and a replay.
@Suite("Merge planner", .timeLimit(.minutes(1)))
struct MergePlannerTests {
    static let now = defaultStart
    static let guestId = "6f1c2a3b-0000-4000-8000-000000000001"
    static let accountId = "0a0b0c0d-0000-4000-8000-000000000002"

    static func user(_ id: String, email: String? = nil, apple: Bool = false, merged: String? = nil) -> UserRecord {
        UserRecord(
            id: id, email: email, timezone: "UTC", language: nil, premiumUntil: nil, createdAt: now, hasAppleIdentity: apple,
            mergedInto: merged)
    }

    static func snapshot(guestBalance: Int64 = 30, guestHeld: Int64 = 0, accountBalance: Int64 = 10) -> MergeSnapshot {
        MergeSnapshot(
            guest: user(guestId), guestWallet: WalletState(balance: guestBalance, held: guestHeld, version: 3),
            account: user(accountId, email: "a@example.com"), accountWallet: WalletState(balance: accountBalance, held: 0, version: 1))
    }

    static func document(_ collection: String, _ id: String, _ text: String, version: Int64, deleted: Bool = false) -> DocumentRecord {
        DocumentRecord(
            collection: collection, id: id, data: deleted ? [] : Array(text.utf8), rangeValue: nil, version: version, updatedAt: now,
            deleted: deleted)
    }

    static func merged(_ snapshot: MergeSnapshot) throws -> MergePlan {
        guard case .merge(let plan) = try MergePlanner.plan(snapshot, now: now) else { throw HarnessError("expected a merge") }
        return plan
    }

    @Test("A live hold moves to the account under its id, an expired one is released; then the balance moves as a merge_out/merge_in pair naming each other")
    func ledger() throws {
        var snapshot = Self.snapshot(guestBalance: 30, guestHeld: 8)
        snapshot.openHolds = [
            HoldRecord(id: "h1", userId: Self.guestId, amount: 5, status: .open, capturedAmount: nil, createdAt: Self.now,
                expiresAt: Self.now.addingTimeInterval(60)),
            HoldRecord(id: "h2", userId: Self.guestId, amount: 3, status: .open, capturedAmount: nil, createdAt: Self.now,
                expiresAt: Self.now),
        ]
        let plan = try Self.merged(snapshot)
        #expect(plan.movedHolds == ["h1"] && plan.releasedHolds == ["h2"])
        #expect(plan.guestEntries.map(\.kind) == [.release, .release, .mergeOut])
        #expect(plan.guestEntries.map(\.amount) == [0, 0, -30] && plan.guestEntries.map(\.heldChange) == [-5, -3, 0])
        #expect(plan.guestEntries.last?.reference == Self.accountId && plan.accountEntries.first?.reference == Self.guestId)
        #expect(plan.accountEntries.map(\.kind) == [.mergeIn, .hold] && plan.accountEntries.map(\.amount) == [30, 0])
        #expect(plan.accountEntries.last?.heldChange == 5 && plan.accountEntries.last?.reason?.hasPrefix("h1 ") == true)
        for (wallet, entries, balance, held) in [
            (snapshot.guestWallet, plan.guestEntries, Int64(0), Int64(0)), (snapshot.accountWallet, plan.accountEntries, 40, 5),
        ] {
            var wallet = wallet
            for entry in entries {
                #expect(wallet.admits(entry))
                wallet = wallet.applying(entry)
            }
            #expect(wallet.balance == balance && wallet.held == held)
        }
        #expect(plan.summary.tokensMoved == 30 && plan.summary.holdsMoved == 1 && plan.summary.holdsReleased == 1)
        // Nothing to move still writes the pair: both ledgers say when, both wallets move.
        let empty = try Self.merged(Self.snapshot(guestBalance: 0))
        #expect(empty.guestEntries.map(\.amount) == [0] && empty.accountEntries.map(\.amount) == [0])
    }

    @Test("A hold the account's wallet cannot take (a guest whose holds predate a refund, an account in debt) is released instead")
    func holdNotTaken() throws {
        var snapshot = Self.snapshot(guestBalance: 2, guestHeld: 5, accountBalance: 10)
        snapshot.accountWallet = WalletState(balance: 10, held: 10, version: 1)
        snapshot.openHolds = [
            HoldRecord(id: "h1", userId: Self.guestId, amount: 5, status: .open, capturedAmount: nil, createdAt: Self.now,
                expiresAt: Self.now.addingTimeInterval(60))
        ]
        let plan = try Self.merged(snapshot)
        #expect(plan.movedHolds.isEmpty && plan.releasedHolds == ["h1"] && plan.accountEntries.map(\.kind) == [.mergeIn])
    }

    @Test("The sign-up grant stays with the guest, counted as spent first; what it bought, was granted or earned moves; a debt moves whole",
        arguments: [
            // (grant, spent, balance) -> moved
            (Int64(100), Int64(0), Int64(100), Int64(0)), (100, 0, 150, 50), (100, 30, 120, 50), (100, 100, 20, 20), (100, 130, 20, 20),
            (0, 0, 30, 30), (10, 0, 4, 0), (100, 0, -8, -8), (0, 5, 0, 0),
        ])
    func signupGrantStays(grant: Int64, spent: Int64, balance: Int64, moved: Int64) throws {
        var snapshot = Self.snapshot(guestBalance: balance, accountBalance: 10)
        (snapshot.signupGrant, snapshot.spent) = (grant, spent)
        let plan = try Self.merged(snapshot)
        #expect(plan.summary.tokensMoved == moved && plan.summary.signupGrantLeft == balance - moved)
        #expect(plan.guestEntries.last?.amount == -moved && plan.accountEntries.first?.amount == moved)
    }

    @Test("A debt moves when the account can pay it at once; otherwise the merge is refused, and the preview says so")
    func debt() throws {
        let covered = try Self.merged(Self.snapshot(guestBalance: -8, accountBalance: 10))
        #expect(covered.guestEntries.last?.amount == 8 && covered.accountEntries.first?.amount == -8)
        #expect(covered.summary.tokensMoved == -8)
        let uncovered = Self.snapshot(guestBalance: -8, accountBalance: 7)
        #expect(throws: StoreError.self) { try MergePlanner.plan(uncovered, now: Self.now) }
        do {
            _ = try MergePlanner.plan(uncovered, now: Self.now)
        } catch {
            #expect(error.code == .guestInDebt)
        }
        let preview = try MergePlanner.preview(uncovered, now: Self.now)
        #expect(preview.refusal == .guestInDebt && preview.summary.tokensMoved == -8 && !preview.replayed)
        #expect(try MergePlanner.preview(Self.snapshot(), now: Self.now).refusal == nil)
    }

    @Test("Only a guest merges, into another account that is not a guest; a merged guest replays into its account only")
    func who() throws {
        func code(_ snapshot: MergeSnapshot) -> StoreError.Code? {
            do {
                _ = try MergePlanner.plan(snapshot, now: Self.now)
                return nil
            } catch {
                return error.code
            }
        }
        var snapshot = Self.snapshot()
        snapshot.guest.email = "g@example.com"
        #expect(code(snapshot) == .mergeRefused)
        snapshot = Self.snapshot()
        snapshot.guest.hasAppleIdentity = true
        #expect(code(snapshot) == .mergeRefused)
        snapshot = Self.snapshot()
        snapshot.account.email = nil
        #expect(code(snapshot) == .mergeRefused, "into a guest")
        snapshot.account.hasAppleIdentity = true
        #expect(code(snapshot) == nil, "an Apple account is an account")
        snapshot = Self.snapshot()
        snapshot.account = snapshot.guest
        #expect(code(snapshot) == .mergeRefused, "into itself")

        let first = try Self.merged(Self.snapshot())
        var again = Self.snapshot()
        again.guest.mergedInto = Self.accountId
        again.recorded = first.summary
        #expect(try MergePlanner.plan(again, now: Self.now.addingTimeInterval(60)) == .replay(first.summary))
        #expect(try MergePlanner.preview(again, now: Self.now) == MergePreview(summary: first.summary, replayed: true))
        again.account = Self.user(randomId(), email: "b@example.com")
        #expect(code(again) == .alreadyMerged)
    }

    @Test("Today's quota keeps the larger count, in the account's window when it has one open; ended windows are left")
    func quotas() throws {
        var snapshot = Self.snapshot()
        let (end, later) = (Self.now.addingTimeInterval(3600), Self.now.addingTimeInterval(7200))
        snapshot.guestCounters = [
            "readings": QuotaCounter(used: 2, windowEnd: end), "messages": QuotaCounter(used: 1, windowEnd: end),
            "chats": QuotaCounter(used: 4, windowEnd: later), "old": QuotaCounter(used: 9, windowEnd: Self.now),
        ]
        snapshot.accountCounters = [
            "readings": QuotaCounter(used: 1, windowEnd: later), "messages": QuotaCounter(used: 3, windowEnd: later),
            "chats": QuotaCounter(used: 7, windowEnd: Self.now.addingTimeInterval(-1)),
        ]
        let plan = try Self.merged(snapshot)
        #expect(plan.counters == ["readings": QuotaCounter(used: 2, windowEnd: later), "chats": QuotaCounter(used: 4, windowEnd: later)])
        #expect(plan.summary.quotaUsesTaken == 1 + 4)
    }

    @Test("Documents get the account's next versions; one whose id the account has live goes beside it, over a tombstone it does not")
    func documents() throws {
        var snapshot = Self.snapshot()
        snapshot.guestDocuments = [
            Self.document("notes", "b", #"{"n":2}"#, version: 7), Self.document("notes", "a", #"{"n":1}"#, version: 3),
            Self.document("notes", "gone", #"{"n":3}"#, version: 5), Self.document("logs", "a", #"{"n":4}"#, version: 8),
        ]
        let firstNew = MergePlanner.newId(for: "a", guestId: Self.guestId, attempt: 1)
        #expect(firstNew == "a-6f1c2a3b" && MergePlanner.newId(for: "a", guestId: Self.guestId, attempt: 2) == "a-6f1c2a3b-2")
        snapshot.accountDocuments = [
            Self.document("notes", "a", #"{"mine":true}"#, version: 4), Self.document("notes", firstNew, #"{"mine":2}"#, version: 6),
            Self.document("notes", "gone", "", version: 9, deleted: true),
        ]
        snapshot.accountSync = SyncCounters(version: 9, purgedThrough: 2, usage: SyncUsage(documents: 3, bytes: 24))
        snapshot.guestSync = SyncCounters(version: 8, purgedThrough: 0, usage: SyncUsage(documents: 4, bytes: 28))
        let keys = MergePlanner.addressesToRead(snapshot.guestDocuments, guestId: Self.guestId)
        #expect(keys.count == 16 && keys.contains(DocumentLocation(collection: "notes", id: "a-6f1c2a3b-3")))

        let plan = try Self.merged(snapshot)
        #expect(plan.documents.map(\.id) == ["a-6f1c2a3b-2", "gone", "b", "a"], "oldest change first")
        #expect(plan.documents.map(\.collection) == ["notes", "notes", "notes", "logs"])
        #expect(plan.documents.map(\.version) == [10, 11, 12, 13] && plan.documents.allSatisfy { !$0.deleted })
        #expect(plan.summary.conflicts == [MergeConflict(collection: "notes", guestDocumentId: "a", newId: "a-6f1c2a3b-2")])
        #expect(plan.summary.documentsMoved == 4 && plan.summary.documentsVersion == 13)
        // Three new rows (the tombstone's is reused), and every byte of the guest's.
        #expect(plan.accountSync == SyncCounters(version: 13, purgedThrough: 2, usage: SyncUsage(documents: 6, bytes: 52)))
        #expect(plan.guestSync == SyncCounters(version: 9, purgedThrough: 9, usage: SyncUsage()))

        let long = String(repeating: "x", count: 128)
        #expect(MergePlanner.newId(for: long, guestId: Self.guestId, attempt: 2).count == 128)
        #expect(CollectionSpec.isValidDocumentId(MergePlanner.newId(for: long, guestId: Self.guestId, attempt: 3)))
    }

    @Test("Premium: the later of both, bought and granted; the summary names what moved and the sessions revoked")
    func premiumAndSummary() throws {
        var snapshot = Self.snapshot()
        snapshot.guest.purchasedPremiumUntil = Self.now.addingTimeInterval(86_400)
        snapshot.account.purchasedPremiumUntil = Self.now.addingTimeInterval(3600)
        snapshot.guest.premiumUntil = Self.now.addingTimeInterval(60)
        (snapshot.purchases, snapshot.subscriptions, snapshot.liveSessions) = (3, 1, ["s2", "s1"])
        let plan = try Self.merged(snapshot)
        #expect(plan.accountPurchasedPremiumUntil == Self.now.addingTimeInterval(86_400))
        #expect(plan.accountPremiumUntil == Self.now.addingTimeInterval(60))
        #expect(plan.summary.purchasesMoved == 3 && plan.summary.subscriptionsMoved == 1 && plan.summary.revokedSessions == ["s1", "s2"])
        #expect(plan.summary.documentsVersion == nil && plan.accountSync == nil && plan.guestSync == nil)
        #expect(try GuestMergeSummary(encoded: try plan.summary.encoded()) == plan.summary)
    }
}
