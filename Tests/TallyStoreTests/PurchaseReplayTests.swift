import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// A replay — an account submitting again a consumable credited to it — is answered from one read of the stored
/// purchase and the account (both stores' fast path); everything else takes the full path. These tests hold the fast
/// path to the full path's answer: the purchase as it stands now (a refund shows), the account's wallet and premium
/// as they stand now, 409 for another account, one credit whatever races.
@Suite("Purchase replays", .timeLimit(.minutes(2)))
struct PurchaseReplayTests {
    typealias Facts = AppStoreFacts

    @Test("A replay answers what the first submission answered, with the wallet and premium as they stand now, and writes nothing",
        arguments: StoreKind.allCases)
    func replayAnswersAsTheFirst(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser(tokens: 5)
            let bought = Facts.consumable(purchased: f.now)
            let first = try await f.redeem(bought, by: user)
            #expect(first.changedUsers == [user] && first.wallet.balance == 105, "[\(kind)]")
            let again = try await f.redeem(bought, by: user)
            #expect(again.changedUsers.isEmpty, "[\(kind)]")
            #expect(again.purchase == first.purchase && again.wallet == first.wallet && again.user == first.user, "[\(kind)]")

            // The wallet and the premium move by other means: the replay shows them as they are, not as they were.
            try await f.run(.grant(userId: user, amount: 7, reason: "test"))
            let original = randomId("otx-")
            let period = Facts.period(original, of: original, purchased: f.now, expires: f.now.addingTimeInterval(86_400))
            try await f.redeem(period, by: user)
            let later = try await f.redeem(bought, by: user)
            let wallet = try await f.store.wallet(userId: user, now: f.now)
            #expect(later.wallet == wallet && later.wallet.balance == 112, "[\(kind)] \(later.wallet)")
            #expect(later.user == (try await f.store.user(id: user))?.stored, "[\(kind)]")
            #expect(later.user.combinedPremiumUntil == f.now.addingTimeInterval(86_400), "[\(kind)]")
            #expect(later.purchase == first.purchase, "[\(kind)]")
            #expect(try await f.entries(user, naming: bought.transactionId).count == 1, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A replay after a refund shows the refund (and the wallet after it); after the reversal, credited again; never a second credit",
        arguments: StoreKind.allCases)
    func replayAfterRefund(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(purchased: f.now)
            try await f.redeem(bought, by: user)
            #expect(try await f.redeem(bought, by: user).purchase.status == .credited, "[\(kind)]")
            f.clock.advance(by: 60)
            let refunded = bought.signed(at: f.now, revoked: f.now)
            try await f.deliver(Facts.notification(.refund, refunded, signed: f.now))
            // Replayed as first signed (StoreKit's copy on the device), and as signed after the refund.
            for copy in [bought, refunded] {
                let replay = try await f.redeem(copy, by: user)
                #expect(replay.purchase.status == .refunded && replay.purchase.refundedAt == f.now, "[\(kind)] \(replay.purchase)")
                #expect(replay.purchase.refundedTokens == 100 && replay.wallet.balance == 0 && replay.changedUsers.isEmpty, "[\(kind)]")
            }
            f.clock.advance(by: 60)
            try await f.deliver(Facts.notification(.refundReversed, bought.signed(at: f.now), signed: f.now))
            let reversed = try await f.redeem(bought, by: user)
            #expect(reversed.purchase.status == .credited && reversed.purchase.refundedAt == nil && reversed.wallet.balance == 100, "[\(kind)]")
            #expect(try await f.entries(user, naming: bought.transactionId).map(\.amount) == [100, -100, 100], "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("Another account replaying a credited transaction is refused (409 purchase_claimed), before and after the owner's replays",
        arguments: StoreKind.allCases)
    func replayByAnotherAccount(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (owner, other) = (try await f.newUser(), try await f.newUser())
            let bought = Facts.consumable(purchased: f.now)
            try await f.redeem(bought, by: owner)
            await expectClaimed(kind) { try await f.redeem(bought, by: other) }
            #expect(try await f.redeem(bought, by: owner).wallet.balance == 100, "[\(kind)]")
            await expectClaimed(kind) { try await f.redeem(bought, by: other) }
            // Named for the owner by its appAccountToken: the same.
            let named = Facts.consumable(for: owner, purchased: f.now)
            try await f.redeem(named, by: owner)
            await expectClaimed(kind) { try await f.redeem(named, by: other) }
            let (otherBalance, ownerBalance) = (try await f.balance(other), try await f.balance(owner))
            #expect(otherBalance == 0 && ownerBalance == 200, "[\(kind)]")
            try await f.checkInvariants([owner, other])
        }
    }

    @Test("Replays racing the first submission (and a notification of it) credit once, and each answers the credited purchase",
        arguments: StoreKind.allCases)
    func replaysRacingTheFirst(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            for round in 0..<3 {
                let bought = Facts.consumable(for: round == 2 ? user : nil, purchased: f.now)
                let charge = Facts.notification(.oneTimeCharge, bought, signed: f.now)
                let results = try await concurrently(40) { index -> Redemption? in
                    if round == 2, index % 8 == 0 { _ = try await f.deliver(charge); return nil }
                    return try await f.redeem(bought, by: user)
                }
                let answers = results.compactMap { if case .success(let answer) = $0 { answer } else { nil } }.compactMap { $0 }
                #expect(results.allSatisfy { if case .success = $0 { true } else { false } }, "[\(kind)] \(results)")
                #expect(answers.allSatisfy { $0.purchase.status == .credited && $0.purchase.userId == user }, "[\(kind)]")
                #expect(answers.allSatisfy { $0.wallet.balance >= 100 * Int64(round + 1) }, "[\(kind)] each answer sees its credit")
                #expect(try await f.entries(user, naming: bought.transactionId).count == 1, "[\(kind)] round \(round)")
            }
            #expect(try await f.balance(user) == 300, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A transaction refunded before its credit, submitted (and again): refunded, nothing credited; the full path decides it",
        arguments: StoreKind.allCases)
    func refundBeforeTheCredit(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            f.clock.advance(by: 60)
            try await f.deliver(Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now), signed: f.now))
            for _ in 0..<2 {
                let answer = try await f.redeem(bought, by: user)
                #expect(answer.purchase.status == .refunded && answer.wallet.balance == 0 && answer.changedUsers.isEmpty, "[\(kind)]")
            }
            #expect(try await f.entries(user, naming: bought.transactionId).isEmpty, "[\(kind)]")
        }
    }

    @Test("A merged guest's transaction, replayed by the account it went into: the account's purchase and wallet, no second credit",
        arguments: StoreKind.allCases)
    func replayOfAMergedGuestsTransaction(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let example = try await MergeExample.merged(f)
            let before = try await f.store.wallet(userId: example.account, now: f.now)
            let replay = try await f.redeem(example.purchase, by: example.account)
            #expect(replay.purchase.userId == example.account && replay.purchase.status == .credited, "[\(kind)] \(replay.purchase)")
            #expect(replay.wallet == before && replay.changedUsers.isEmpty, "[\(kind)]")
            #expect(replay.user.id == example.account, "[\(kind)]")
            await expectStoreError(.userNotFound, kind) { try await f.redeem(example.purchase, by: example.guest) }
            // A stranger is still refused.
            let stranger = try await f.newUser()
            await expectClaimed(kind) { try await f.redeem(example.purchase, by: stranger) }
            #expect(try await f.entries(example.account, naming: example.purchase.transactionId).isEmpty, "[\(kind)] the credit stays the guest's entry")
            #expect(try await f.store.wallet(userId: example.account, now: f.now) == before, "[\(kind)]")
        }
    }

    @Test("Every change a replay's answer reads shows in the next replay: a hold, the admin's premium, a merge, the account's deletion",
        arguments: StoreKind.allCases)
    func replaySeesEachChange(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser(tokens: 5)
            let bought = Facts.consumable(purchased: f.now)
            try await f.redeem(bought, by: user)
            func replay() async throws -> Redemption {
                let answer = try await f.redeem(bought, by: user)
                let wallet = try await f.store.wallet(userId: user, now: f.now)
                #expect(answer.wallet == wallet && answer.changedUsers.isEmpty, "[\(kind)] \(answer.wallet) \(String(describing: wallet))")
                #expect(answer.user == (try await f.store.user(id: user))?.stored, "[\(kind)]")
                return answer
            }
            #expect(try await replay().wallet.balance == 105, "[\(kind)]")
            try await f.run(.createHold(userId: user, holdId: randomId("hold-"), amount: 30, expiresAt: f.now.addingTimeInterval(600)))
            #expect(try await replay().wallet.held == 30, "[\(kind)]")
            try await f.run(.setPremium(userId: user, until: f.now.addingTimeInterval(3_600)))
            #expect(try await replay().user.combinedPremiumUntil == f.now.addingTimeInterval(3_600), "[\(kind)]")
            try await f.run(.setPremium(userId: user, until: nil))
            #expect(try await replay().user.combinedPremiumUntil == nil, "[\(kind)]")

            // A guest's replay is answered, then the guest is merged: its replays are refused, the account's answer it.
            let example = try await MergeExample.make(f)
            #expect(try await f.redeem(example.purchase, by: example.guest).purchase.userId == example.guest, "[\(kind)]")
            _ = try await f.store.merge(guestId: example.guest, into: example.account, now: f.now)
            await expectStoreError(.userNotFound, kind) { try await f.redeem(example.purchase, by: example.guest) }
            let moved = try await f.redeem(example.purchase, by: example.account)
            #expect(moved.purchase.userId == example.account && moved.wallet.balance == 40, "[\(kind)] \(moved.wallet)")

            #expect(try await f.store.deleteUser(id: user), "[\(kind)]")
            await expectStoreError(.userNotFound, kind) { try await f.redeem(bought, by: user) }
        }
    }

    @Test("PostgreSQL: a refund applied by another process shows in this one's next replay")
    func refundFromAnotherProcess() async throws {
        try await withTwoPostgresStores { first, second in
            let clock = ManualClock(defaultStart)
            let user = try await newPostgresUser(first, tokens: 0, now: clock.now)
            let bought = Facts.consumable(purchased: clock.now)
            _ = try await first.redeem(bought, userId: user, now: clock.now)
            #expect(try await first.redeem(bought, userId: user, now: clock.now).purchase.status == .credited)
            clock.advance(by: 60)
            let refund = Facts.notification(.refund, bought.signed(at: clock.now, revoked: clock.now), signed: clock.now)
            #expect(try await second.apply(refund, now: clock.now).disposition == .applied)
            let replay = try await first.redeem(bought, userId: user, now: clock.now)
            #expect(replay.purchase.status == .refunded && replay.wallet.balance == 0, "\(replay)")
        }
    }
}
