import Foundation
import TallyAPI
import TallyStore
import Testing

/// The issue's example of a merge, set up on a store: a guest with 30 tokens (5 of them held by an open hold, 20 of
/// them a purchase), two documents pushed from its device, two readings used today and two sessions, and an account
/// with 10 tokens, a document of the same id and one reading used, whose device pulled before the merge.
struct MergeExample {
    static let reading = ActionSpec(name: "reading", quota: "readings")
    static let readingLimit = 3

    let guest: String
    let account: String
    /// The guest's installation (its device secret's hash).
    let device: String
    let guestSessions: [String]
    let guestClient: String
    let holdId: String
    let purchase: VerifiedTransaction
    /// The account's device's pull cursor before the merge.
    let accountCursor: Int64

    static func make(_ f: Fixture) async throws -> MergeExample {
        let device = randomId("dev-")
        let first = try await f.signIn(device: device)
        let second = try await f.signIn(device: device)
        let guest = first.user.id
        let purchase = AppStoreFacts.consumable(tokens: 20, for: guest, purchased: f.now)
        try await f.redeem(purchase, by: guest)
        try await f.run(.grant(userId: guest, amount: 10, reason: "test"))
        let holdId = randomId("hold-")
        try await f.run(.createHold(userId: guest, holdId: holdId, amount: 5, expiresAt: f.now.addingTimeInterval(600), note: nil))
        for _ in 0..<2 { try await f.run(.performAction(userId: guest, action: reading, quotaLimit: readingLimit)) }
        let client = randomId("client-")
        let pushed = try await f.store.push(
            userId: guest, clientId: client,
            mutations: [mutation(1, Collections.notes, "a", .put(try json(#"{"by":"guest","n":1}"#))),
                mutation(2, Collections.notes, "b", .put(try json(#"{"by":"guest","n":2}"#)))],
            now: f.now)
        #expect(pushed.lastMutationId == 2, "[\(f.kind)]")

        let account = try await f.newUser(tokens: 10)
        _ = try await f.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
        try await f.put(account, Collections.notes, "a", #"{"by":"account"}"#)
        try await f.run(.performAction(userId: account, action: reading, quotaLimit: readingLimit))
        let cursor = try await f.allChanges(account).cursor
        return MergeExample(
            guest: guest, account: account, device: device, guestSessions: [first.sessionId, second.sessionId].sorted(), guestClient: client, holdId: holdId,
            purchase: purchase, accountCursor: cursor)
    }

    /// The example, merged.
    static func merged(_ f: Fixture) async throws -> MergeExample {
        let example = try await make(f)
        _ = try await f.store.merge(guestId: example.guest, into: example.account, now: f.now)
        return example
    }

    /// What the merge of the example must leave, checked on `f` (`f` may be another process's store).
    func expectMerged(_ summary: GuestMergeSummary, _ f: Fixture) async throws {
        let kind = f.kind
        let newId = MergePlanner.newId(for: "a", guestId: guest, attempt: 1)
        #expect(summary.guestId == guest && summary.accountId == account, "[\(kind)]")
        #expect(summary.tokensMoved == 30 && summary.holdsMoved == 1 && summary.holdsReleased == 0, "[\(kind)]")
        #expect(summary.documentsMoved == 2 && summary.conflicts == [MergeConflict(collection: "notes", guestDocumentId: "a", newId: newId)],
            "[\(kind)]")
        #expect(summary.purchasesMoved == 1 && summary.subscriptionsMoved == 0 && summary.quotaUsesTaken == 1, "[\(kind)]")
        #expect(summary.revokedSessions == guestSessions, "[\(kind)]")

        // The live hold is the account's now, the same id: the call that opened it settles it there.
        #expect(try await f.store.wallet(userId: account, now: f.now) == WalletState(balance: 40, held: 5, version: 3), "[\(kind)]")
        #expect(try await f.store.wallet(userId: guest, now: f.now) == WalletState(balance: 0, held: 0, version: 5), "[\(kind)]")
        #expect(try await f.store.hold(id: holdId, userId: guest) == nil, "[\(kind)]")
        #expect(try await f.store.hold(id: holdId, userId: account)?.status == .open, "[\(kind)]")
        let accountEntries = try await f.allEntries(account)
        let mergeIn = accountEntries.dropLast().last
        #expect(mergeIn?.kind == .mergeIn && mergeIn?.amount == 30 && mergeIn?.reference == guest, "[\(kind)]")
        #expect(accountEntries.last?.kind == .hold && accountEntries.last?.heldChange == 5, "[\(kind)]")
        #expect(try await f.allEntries(guest).suffix(2).map(\.kind) == [.release, .mergeOut], "[\(kind)]")

        // Three documents, the account's own kept; its device pulls the two moved as changes after its cursor.
        let notes = try await f.allDocuments(account, "notes")
        #expect(notes.map(\.id) == ["a", newId, "b"].sorted(), "[\(kind)]")
        #expect(notes.first { $0.id == "a" }.map { String(decoding: $0.data, as: UTF8.self) } == #"{"by":"account"}"#, "[\(kind)]")
        let pulled = try await f.allChanges(account, after: accountCursor)
        #expect(pulled.changes.map(\.id) == [newId, "b"] && pulled.cursor == summary.documentsVersion, "[\(kind)]")
        #expect(try await f.allDocuments(guest, "notes").isEmpty, "[\(kind)]")

        let purchases = try await f.allPurchases(account)
        #expect(purchases.map(\.transactionId) == [purchase.transactionId] && purchases.first?.userId == account, "[\(kind)]")
        #expect(try await f.allPurchases(guest).isEmpty, "[\(kind)]")
        let state = try #require(try await f.store.accountState(userId: account, now: f.now), "[\(kind)]")
        #expect(state.counters["readings"]?.used == 2, "[\(kind)] the larger count, not the sum")

        for session in guestSessions { #expect(try await f.store.liveSessionUser(sessionId: session) == nil, "[\(kind)]") }
        let merged = try await f.store.user(id: guest)
        #expect(merged?.mergedInto == account && merged?.isGuest == true, "[\(kind)]")
        #expect(try await f.store.user(id: account)?.mergedInto == nil, "[\(kind)]")
        try await f.checkInvariants([guest, account])
    }
}

/// Merging a guest into an existing account, on every store: everything carried exactly once, the guest gone, a
/// purchase naming it landing on the account afterwards, retries replayed, refusals named.
@Suite("Merge conformance", .timeLimit(.minutes(10)))
struct MergeConformanceTests {
    typealias Facts = AppStoreFacts

    @Test("The issue's example: 30 tokens (5 held), two documents, a purchase, two readings and two sessions carried into the account once",
        arguments: StoreKind.allCases)
    func example(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let example = try await MergeExample.make(f)
            let preview = try await f.store.mergePreview(guestId: example.guest, into: example.account, now: f.now)
            #expect(!preview.replayed && preview.refusal == nil, "[\(kind)]")
            let outcome = try await f.store.merge(guestId: example.guest, into: example.account, now: f.now)
            #expect(!outcome.replayed && preview.summary == outcome.summary, "[\(kind)] the preview is the merge's summary")
            try await example.expectMerged(outcome.summary, f)

            // The same merge again, later: the stored summary, nothing moved.
            f.clock.advance(by: 60)
            let again = try await f.store.merge(guestId: example.guest, into: example.account, now: f.now)
            #expect(again == MergeOutcome(summary: outcome.summary, replayed: true), "[\(kind)]")
            let replayedPreview = try await f.store.mergePreview(guestId: example.guest, into: example.account, now: f.now)
            #expect(replayedPreview == MergePreview(summary: outcome.summary, replayed: true), "[\(kind)]")
            try await example.expectMerged(outcome.summary, f)
            let other = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: other, email: randomId() + "@example.com", passwordHash: "hash")
            await expectStoreError(.alreadyMerged, kind) { try await f.store.merge(guestId: example.guest, into: other, now: f.now) }
        }
    }

    @Test("After the merge, App Store facts naming the guest land on the account: the refund of its purchase, a new one's credit",
        arguments: StoreKind.allCases)
    func purchasesFollow(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let example = try await MergeExample.merged(f)
            f.clock.advance(by: 60)
            let refund = Facts.notification(.refund, example.purchase.signed(at: f.now, revoked: f.now), signed: f.now)
            let refunded = try await f.deliver(refund)
            #expect(refunded.disposition == .applied && refunded.changedUsers == [example.account], "[\(kind)]")
            #expect(refunded.purchase?.status == .refunded && refunded.purchase?.userId == example.account, "[\(kind)]")
            #expect(try await f.balance(example.account) == 20, "[\(kind)]")
            #expect(try await f.balance(example.guest) == 0, "[\(kind)]")
            #expect(try await f.entries(example.account, naming: example.purchase.transactionId).map(\.amount) == [-20], "[\(kind)]")

            // A new consumable bought on the guest's device (its appAccountToken still the guest's id), submitted by the
            // account, and one the App Store announces first.
            let bought = Facts.consumable(tokens: 7, for: example.guest, purchased: f.now)
            let redeemed = try await f.redeem(bought, by: example.account)
            #expect(redeemed.purchase.userId == example.account && redeemed.wallet.balance == 27, "[\(kind)]")
            let announced = Facts.consumable(tokens: 5, for: example.guest, purchased: f.now)
            let charged = try await f.deliver(Facts.notification(.oneTimeCharge, announced, signed: f.now))
            #expect(charged.purchase?.userId == example.account && charged.changedUsers == [example.account], "[\(kind)]")
            #expect(try await f.balance(example.account) == 32, "[\(kind)]")
            // The guest itself is gone: its own submission is refused as an unknown account.
            await expectStoreError(.userNotFound, kind) { try await f.redeem(Facts.consumable(purchased: f.now), by: example.guest) }
            try await f.checkInvariants(merged: example.guest, into: example.account)
        }
    }

    @Test("A merged guest is gone: commands and document writes on it are refused; its device pushes as the account exactly once",
        arguments: StoreKind.allCases)
    func guestGone(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let example = try await MergeExample.merged(f)
            await expectStoreError(.userNotFound, kind) { try await f.run(.grant(userId: example.guest, amount: 5, reason: "late")) }
            await expectStoreError(.userNotFound, kind) {
                try await f.run(.performAction(userId: example.guest, action: MergeExample.reading, quotaLimit: MergeExample.readingLimit))
            }
            await expectStoreError(.userNotFound, kind) { try await f.put(example.guest, Collections.notes, "late", #"{"n":9}"#) }

            // The guest's device, signed in as the account now, pushes its client's mutations again and one more.
            let pushed = try await f.store.push(
                userId: example.account, clientId: example.guestClient,
                mutations: [mutation(2, Collections.notes, "b", .put(try json(#"{"by":"guest","n":2}"#))),
                    mutation(3, Collections.notes, "c", .put(try json(#"{"by":"guest","n":3}"#)))],
                now: f.now)
            #expect(pushed.lastMutationId == 3 && pushed.results.first == .duplicate && pushed.results.last?.appliedVersion != nil,
                "[\(kind)]")
            let page = try await f.store.changes(userId: example.account, after: nil, limit: 100)
            #expect(page.lastMutationIds[example.guestClient] == 3 && page.changes.count == 4, "[\(kind)]")
            // The guest's device secret opens a new guest.
            let fresh = try await f.signIn(device: example.device)
            #expect(fresh.created && fresh.user.id != example.guest, "[\(kind)]")
            try await f.checkInvariants([example.guest, example.account])
        }
    }

    @Test("Refused: a non-guest, into itself, into a guest, an unknown account; a debt the account cannot pay, paid when it can",
        arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.newUser(tokens: 3)
            let account = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
            let other = try await f.newUser()
            await expectStoreError(.mergeRefused, kind) { try await f.store.merge(guestId: account, into: guest, now: f.now) }
            await expectStoreError(.mergeRefused, kind) { try await f.store.merge(guestId: guest, into: guest, now: f.now) }
            await expectStoreError(.mergeRefused, kind) { try await f.store.merge(guestId: guest, into: other, now: f.now) }
            await expectStoreError(.userNotFound, kind) { try await f.store.merge(guestId: guest, into: randomId(), now: f.now) }
            await expectStoreError(.userNotFound, kind) { try await f.store.mergePreview(guestId: randomId(), into: account, now: f.now) }

            // The guest spends a purchase, which is then refunded: 3 + 10 - 13 - 10 = -10.
            let bought = Facts.consumable(tokens: 10, purchased: f.now)
            try await f.redeem(bought, by: guest)
            try await f.run(.performAction(userId: guest, action: ActionSpec(name: "all", tokens: 13), quotaLimit: nil))
            try await f.deliver(Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(try await f.balance(guest) == -10, "[\(kind)]")
            try await f.run(.grant(userId: account, amount: 9, reason: "test"))
            let preview = try await f.store.mergePreview(guestId: guest, into: account, now: f.now)
            #expect(preview.refusal == .guestInDebt && preview.summary.tokensMoved == -10 && preview.summary.purchasesMoved == 1, "[\(kind)]")
            await expectStoreError(.guestInDebt, kind) { try await f.store.merge(guestId: guest, into: account, now: f.now) }
            #expect(try await f.balance(account) == 9, "[\(kind)] a refusal wrote nothing")
            #expect(try await f.user(guest)?.mergedInto == nil, "[\(kind)] a refusal wrote nothing")

            try await f.run(.grant(userId: account, amount: 1, reason: "test"))
            let merged = try await f.store.merge(guestId: guest, into: account, now: f.now)
            #expect(merged.summary.tokensMoved == -10, "[\(kind)]")
            #expect(try await f.balance(account) == 0, "[\(kind)]")
            #expect(try await f.balance(guest) == 0, "[\(kind)]")
            // Its refund reversal now credits the account, which paid the debt.
            try await f.deliver(Facts.notification(.refundReversed, bought.signed(at: f.now), signed: f.now))
            #expect(try await f.balance(account) == 10, "[\(kind)]")
            try await f.checkInvariants(merged: guest, into: account)
        }
    }

    @Test("Subscriptions move with the guest: the account's bought premium becomes the later end, the guest's none",
        arguments: StoreKind.allCases)
    func subscriptions(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.newUser()
            let account = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
            let original = randomId("orig-")
            let period = Facts.period(original, of: original, for: guest, purchased: f.now, expires: day(30))
            try await f.redeem(period, by: guest)
            #expect(try await f.boughtPremium(guest) == day(30), "[\(kind)]")
            let outcome = try await f.store.merge(guestId: guest, into: account, now: f.now)
            #expect(outcome.summary.subscriptionsMoved == 1 && outcome.summary.purchasesMoved == 1, "[\(kind)]")
            #expect(try await f.boughtPremium(account) == day(30), "[\(kind)]")
            #expect(try await f.boughtPremium(guest) == nil, "[\(kind)]")
            // A renewal naming the guest extends the account's premium.
            f.clock.advance(by: 86_400)
            let renewal = Facts.period(of: original, for: guest, purchased: day(30), expires: day(60), signed: f.now)
            let renewed = try await f.deliver(Facts.notification(.didRenew, renewal, signed: f.now))
            #expect(renewed.changedUsers == [account], "[\(kind)]")
            #expect(try await f.boughtPremium(account) == day(60), "[\(kind)]")
            try await f.checkInvariants([guest, account])
        }
    }

    @Test("Concurrent copies of one merge move everything once; merges racing debits, holds and document writes lose nothing",
        arguments: StoreKind.allCases)
    func concurrent(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let example = try await MergeExample.make(f)
            let outcomes = try await withThrowingTaskGroup(of: MergeOutcome.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await f.store.merge(guestId: example.guest, into: example.account, now: f.now) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { !$0.replayed }.count == 1, "[\(kind)]")
            #expect(Set(outcomes.map(\.summary)).count == 1, "[\(kind)]")
            try await example.expectMerged(outcomes[0].summary, f)
        }
        try await withFixture(kind) { f in try await Self.raceWithWrites(f, f) }
    }

    /// A merge on `first` racing debits, holds and document writes on both accounts through `first` and `second` (two
    /// stores: two processes): the ledgers sum to the balances, every token is where the writes that succeeded say,
    /// and every document written is in the account.
    static func raceWithWrites(_ first: Fixture, _ second: Fixture) async throws {
        let kind = first.kind
        let guest = try await first.newUser(tokens: 100)
        let account = try await first.newUser(tokens: 50)
        _ = try await first.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
        let spend = ActionSpec(name: "spend", tokens: 3)
        enum Done: Sendable { case spent(String), held(String), wrote(String, String), refused, merged }
        let results = try await withThrowingTaskGroup(of: Done.self) { group in
            for index in 0..<24 {
                let f = index.isMultiple(of: 2) ? first : second
                let user = index % 4 < 2 ? guest : account
                group.addTask {
                    do {
                        switch index % 3 {
                        case 0:
                            try await f.run(.performAction(userId: user, action: spend, quotaLimit: nil))
                            return .spent(user)
                        case 1:
                            try await f.run(
                                .createHold(userId: user, holdId: randomId(), amount: 2, expiresAt: f.now.addingTimeInterval(600), note: nil))
                            return .held(user)
                        default:
                            let id = "d\(index)"
                            try await f.put(user, Collections.notes, id, #"{"i":\#(index)}"#)
                            return .wrote(user, id)
                        }
                    } catch let error as StoreError where error.code == .userNotFound || error.code == .insufficientTokens {
                        return .refused
                    }
                }
                if index == 8 {
                    group.addTask {
                        _ = try await first.store.merge(guestId: guest, into: account, now: first.now)
                        return .merged
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let spent = results.filter { if case .spent = $0 { return true } else { return false } }.count
        let held = results.compactMap { if case .held(let user) = $0 { return user } else { return nil } }
        let written = results.compactMap { if case .wrote(_, let id) = $0 { return id } else { return nil } }
        // Holds of the guest made before the merge moved to the account with it, those after were refused; the account's
        // stay open.
        let accountWallet = try #require(try await first.store.wallet(userId: account, now: first.now), "[\(kind)]")
        #expect(accountWallet.balance == 150 - Int64(spent) * 3, "[\(kind)] tokens lost or doubled")
        #expect(accountWallet.held == Int64(held.count) * 2, "[\(kind)]")
        let guestWallet = try await first.store.wallet(userId: guest, now: first.now)
        #expect(guestWallet?.balance == 0 && guestWallet?.held == 0, "[\(kind)]")
        let notes = try await first.allDocuments(account, "notes", pageSize: 50)
        #expect(Set(notes.map(\.id)) == Set(written), "[\(kind)] documents lost or doubled")
        try await first.checkInvariants([guest, account])
    }
}

extension Fixture {
    /// The account as stored.
    func user(_ id: String) async throws -> UserRecord? { try await store.user(id: id) }

    /// The ledger invariants of a guest and of the account it was merged into (``checkInvariants(_:sourceLocation:)``),
    /// where a transaction's history spans both ledgers: a purchase credited to the guest, refunded after the merge on
    /// the account. ``LedgerInvariants`` reads one ledger, so the account's is held to every rule but the order of a
    /// transaction whose earlier entries are the guest's, and the per-transaction rules (once each, in order, a refund
    /// no more than the purchase, a reversal what the refund took) are checked on both ledgers' purchase entries together.
    func checkInvariants(merged guest: String, into account: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await checkInvariants([guest], sourceLocation: sourceLocation)
        let kinds: Set<EntryKind> = [.purchase, .refund, .refundReversed]
        let guestEntries = try await allEntries(guest, sourceLocation: sourceLocation)
        let inherited = Set(guestEntries.filter { kinds.contains($0.kind) }.compactMap(\.reference))
        let wallet = try #require(try await store.wallet(userId: account, now: now), "[\(kind)] no wallet", sourceLocation: sourceLocation)
        let accountEntries = try await allEntries(account, sourceLocation: sourceLocation)
        for problem in LedgerInvariants.violations(wallet, accountEntries)
        where !inherited.contains(where: { problem.contains(" of \($0) comes before any ") }) {
            Issue.record("[\(kind)] user \(account): \(problem)", sourceLocation: sourceLocation)
        }
        var running: Int64 = 0
        let moves = (guestEntries + accountEntries).filter { kinds.contains($0.kind) }.sorted { $0.id < $1.id }.map { entry in
            running += entry.amount
            return LedgerLine(
                id: entry.id, amount: entry.amount, heldChange: 0, balanceAfter: running, kind: entry.kind.rawValue, reference: entry.reference)
        }
        for problem in LedgerInvariants.violations(balance: running, held: 0, version: Int64(moves.count), entries: moves) {
            Issue.record("[\(kind)] the purchases of \(guest) and \(account): \(problem)", sourceLocation: sourceLocation)
        }
    }
}
