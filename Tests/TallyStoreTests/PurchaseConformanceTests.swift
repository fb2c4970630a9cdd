import Foundation
import TallyStore
import Testing

/// Consumables bought in the App Store, against every store: who is credited, exactly once; notifications taken once
/// and in the order the App Store signed them; refunds and their reversals; the lists.
@Suite("Purchase conformance", .timeLimit(.minutes(10)))
struct PurchaseConformanceTests {
    typealias Facts = AppStoreFacts

    @Test("A consumable credits its first submitter once; the same account again gets the same purchase, another is refused",
        arguments: StoreKind.allCases)
    func creditedOnce(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (buyer, other) = (try await f.newUser(tokens: 5), try await f.newUser())
            let bought = Facts.consumable(quantity: 3, purchased: f.now)
            let first = try await f.redeem(bought, by: buyer)
            #expect(first.purchase.status == .credited && first.purchase.tokens == 300 && first.purchase.userId == buyer, "[\(kind)]")
            #expect(first.wallet == WalletState(balance: 305, held: 0, version: 2) && first.changedUsers == [buyer], "[\(kind)]")
            let entries = try await f.entries(buyer, naming: bought.transactionId)
            #expect(entries.map(\.kind) == [.purchase] && entries.map(\.amount) == [300], "[\(kind)]")
            #expect(entries.first?.reason == "\(bought.transactionId) \(Facts.tokensProduct) x3", "[\(kind)]")

            f.clock.advance(by: 60)
            let again = try await f.redeem(bought.signed(at: f.now), by: buyer)
            #expect(again.purchase == first.purchase && again.wallet == first.wallet && again.changedUsers.isEmpty, "[\(kind)]")
            await expectClaimed(kind) { try await f.redeem(bought, by: other) }
            #expect(try await f.balance(other) == 0, "[\(kind)]")
            #expect(try await f.balance(buyer) == 305, "[\(kind)]")
            #expect(try await f.allEntries(buyer).count == 2, "[\(kind)] a replay wrote an entry")
            try await f.checkInvariants([buyer, other])
        }
    }

    @Test("The account the appAccountToken names is credited, whoever submits; a token naming no account leaves it to the first submitter",
        arguments: StoreKind.allCases)
    func appAccountToken(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (named, device) = (try await f.newUser(), try await f.newUser())
            let bought = Facts.consumable(for: named, purchased: f.now)
            // Another account on the device submits it: the named account is credited, the submitter refused.
            await expectClaimed(kind) { try await f.redeem(bought, by: device) }
            #expect(try await f.balance(named) == 100, "[\(kind)]")
            #expect(try await f.balance(device) == 0, "[\(kind)]")
            let mine = try await f.redeem(bought, by: named)
            #expect(mine.changedUsers.isEmpty && mine.wallet.balance == 100 && mine.purchase.userId == named, "[\(kind)]")

            let stray = Facts.consumable(for: randomId(), purchased: f.now)
            let taken = try await f.redeem(stray, by: device)
            #expect(taken.purchase.userId == device && taken.wallet.balance == 100, "[\(kind)]")
            await expectStoreError(.userNotFound, kind) { try await f.redeem(Facts.consumable(purchased: f.now), by: randomId()) }
            try await f.checkInvariants([named, device])
        }
    }

    @Test("ONE_TIME_CHARGE credits the named account once: its retries are duplicates, and the app's submission a replay",
        arguments: StoreKind.allCases)
    func oneTimeCharge(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            let charge = Facts.notification(.oneTimeCharge, bought, signed: f.now)
            let applied = try await f.deliver(charge)
            #expect(applied.disposition == .applied && applied.purchase?.status == .credited && applied.changedUsers == [user], "[\(kind)]")
            f.clock.advance(by: 3600)
            let retry = try await f.deliver(charge)
            #expect(retry.disposition == .duplicate && retry.changedUsers.isEmpty, "[\(kind)]")
            // Another notification about it (Apple's, with its own id): nothing more to credit.
            #expect(try await f.deliver(Facts.notification(.oneTimeCharge, bought, signed: f.now)).changedUsers.isEmpty, "[\(kind)]")
            let submitted = try await f.redeem(bought, by: user)
            #expect(submitted.changedUsers.isEmpty && submitted.wallet.balance == 100, "[\(kind)]")
            #expect(try await f.entries(user, naming: bought.transactionId).map(\.amount) == [100], "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A charge whose appAccountToken names no account stays unclaimed, listed for the admin, until someone submits it",
        arguments: StoreKind.allCases)
    func unclaimed(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let user = try await f.newUser()
            let stray = Facts.consumable(for: randomId(), purchased: f.now)
            let recorded = try await f.deliver(Facts.notification(.oneTimeCharge, stray, signed: f.now))
            #expect(recorded.purchase?.status == .unclaimed && recorded.purchase?.userId == nil && recorded.changedUsers.isEmpty, "[\(kind)]")
            let listed = try await f.store.unclaimedPurchases(after: nil, limit: 10, now: f.now)
            #expect(listed.map(\.transactionId) == [stray.transactionId] && listed.first?.tokens == 100, "[\(kind)]")

            let claimed = try await f.redeem(stray, by: user)
            #expect(claimed.purchase.status == .credited && claimed.wallet.balance == 100, "[\(kind)]")
            #expect(try await f.store.unclaimedPurchases(after: nil, limit: 10, now: f.now).isEmpty, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A refund takes back what was credited (prorated, rounded down), its reversal credits that back, and a refund after the reversal takes it again",
        arguments: StoreKind.allCases)
    func refundAndReversal(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            try await f.redeem(bought, by: user)
            f.clock.advance(by: 86_400)
            // A third refunded: 33.333 tokens, of which the user keeps the fraction.
            let refund = Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now, percentage: 33_333), signed: f.now)
            let refunded = try await f.deliver(refund)
            #expect(refunded.purchase?.status == .refunded && refunded.purchase?.refundedTokens == 33, "[\(kind)]")
            #expect(refunded.purchase?.refundedAt == f.now && refunded.changedUsers == [user], "[\(kind)]")
            #expect(try await f.balance(user) == 67, "[\(kind)]")

            f.clock.advance(by: 86_400)
            let reversed = try await f.deliver(Facts.notification(.refundReversed, bought.signed(at: f.now), signed: f.now))
            #expect(reversed.purchase?.status == .credited && reversed.purchase?.refundedAt == nil, "[\(kind)]")
            #expect(try await f.balance(user) == 100, "[\(kind)]")

            // Refunded again after the reversal: taken back again, by this refund's own entry; its copies change nothing.
            f.clock.advance(by: 86_400)
            let second = bought.signed(at: f.now, revoked: f.now)
            let again = try await f.deliver(Facts.notification(.refund, second, signed: f.now))
            #expect(again.disposition == .applied && again.changedUsers == [user] && again.purchase?.status == .refunded, "[\(kind)]")
            #expect(again.purchase?.refundedTokens == 100 && again.purchase?.refundedAt == f.now, "[\(kind)]")
            #expect(try await f.balance(user) == 0, "[\(kind)]")
            let copy = try await f.deliver(Facts.notification(.refund, second, signed: f.now))
            #expect(copy.disposition == .applied && copy.changedUsers.isEmpty, "[\(kind)] a copy under another id")
            #expect(try await f.redeem(bought, by: user).purchase.status == .refunded, "[\(kind)]")
            // Its own reversal gives it back; a stale reversal (the first one's copy) gives nothing.
            #expect(try await f.deliver(Facts.notification(.refundReversed, bought.signed(at: f.now), signed: f.now.addingTimeInterval(-86_400))).disposition == .stale, "[\(kind)]")
            f.clock.advance(by: 60)
            try await f.deliver(Facts.notification(.refundReversed, bought.signed(at: f.now), signed: f.now))
            #expect(try await f.balance(user) == 100, "[\(kind)]")

            let entries = try await f.allEntries(user).filter { $0.reference?.hasPrefix(bought.transactionId) == true }
            #expect(entries.map(\.kind) == [.purchase, .refund, .refundReversed, .refund, .refundReversed], "[\(kind)]")
            #expect(entries.map(\.amount) == [100, -33, 33, -100, 100], "[\(kind)]")
            let (tx, round2) = (bought.transactionId, bought.transactionId + "#2")
            #expect(entries.map(\.reference) == [tx, tx, tx, round2, round2], "[\(kind)] each refund and its reversal by their own reference")
            #expect(entries.allSatisfy { $0.reason?.hasPrefix(bought.transactionId) == true }, "[\(kind)]")

            // A whole refund of three units takes the three back.
            let pack = Facts.consumable(tokens: 7, quantity: 3, for: user, purchased: f.now)
            try await f.redeem(pack, by: user)
            try await f.deliver(Facts.notification(.refund, pack.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(try await f.entries(user, naming: pack.transactionId).map(\.amount) == [21, -21], "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A second refund that overtakes the first one's reversal: the newest refund says what is taken; the late reversal changes nothing",
        arguments: StoreKind.allCases)
    func refundOvertakingAReversal(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let bought = Facts.consumable(for: user, purchased: f.now)
            try await f.redeem(bought, by: user)
            let at = { (hours: Double) in f.now.addingTimeInterval(hours * 3600) }
            let halfRefund = Facts.notification(.refund, bought.signed(at: at(1), revoked: at(1), percentage: 50_000), signed: at(1))
            let reversal = Facts.notification(.refundReversed, bought.signed(at: at(2)), signed: at(2))
            let wholeRefund = Facts.notification(.refund, bought.signed(at: at(3), revoked: at(3)), signed: at(3))
            f.clock.set(at(4))
            try await f.deliver(halfRefund)
            #expect(try await f.balance(user) == 50, "[\(kind)]")
            // The whole refund comes before the half refund's reversal: the half is reversed, the whole taken.
            #expect(try await f.deliver(wholeRefund).changedUsers == [user], "[\(kind)]")
            #expect(try await f.balance(user) == 0, "[\(kind)]")
            #expect(try await f.deliver(reversal).disposition == .stale, "[\(kind)]")
            #expect(try await f.balance(user) == 0, "[\(kind)]")
            let entries = try await f.allEntries(user)
            #expect(entries.map(\.amount) == [100, -50, 50, -100], "[\(kind)]")
            #expect(entries.map(\.reference) == [bought.transactionId, bought.transactionId, bought.transactionId, bought.transactionId + "#2"], "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A refund before any credit credits nothing but keeps its submitter as the owner; the reversal credits that account",
        arguments: StoreKind.allCases)
    func refundBeforeCredit(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (user, other) = (try await f.newUser(), try await f.newUser())
            let bought = Facts.consumable(purchased: f.now)
            f.clock.advance(by: 60)
            let refunded = try await f.deliver(Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(refunded.purchase?.status == .refunded && refunded.purchase?.refundedTokens == 0, "[\(kind)]")
            #expect(try await f.unclaimed(bought.transactionId) != nil, "[\(kind)]")
            let submitted = try await f.redeem(bought, by: user)
            #expect(submitted.purchase.status == .refunded && submitted.wallet.balance == 0 && submitted.changedUsers.isEmpty, "[\(kind)]")
            #expect(submitted.purchase.userId == user, "[\(kind)]")
            #expect(try await f.unclaimed(bought.transactionId) == nil, "[\(kind)] the submitter owns it now")
            await expectClaimed(kind) { try await f.redeem(bought, by: other) }
            // A payload that already shows its refund credits nothing either.
            let revoked = Facts.consumable(purchased: f.now, revoked: f.now)
            #expect(try await f.redeem(revoked, by: user).purchase.status == .refunded, "[\(kind)]")

            // The reversal credits the owner the submission recorded: its app finished the transaction, and will not
            // submit it again.
            f.clock.advance(by: 60)
            let reversal = try await f.deliver(Facts.notification(.refundReversed, bought.signed(at: f.now), signed: f.now))
            #expect(reversal.purchase?.status == .credited && reversal.changedUsers == [user], "[\(kind)]")
            #expect(try await f.balance(user) == 100, "[\(kind)]")
            #expect(try await f.redeem(bought, by: user).wallet.balance == 100, "[\(kind)]")
            #expect(try await f.allEntries(user).map(\.kind) == [.purchase], "[\(kind)]")

            // Named by its appAccountToken, refunded before the charge arrived: the named account is credited at the reversal.
            let named = Facts.consumable(for: other, purchased: f.now)
            f.clock.advance(by: 60)
            try await f.deliver(Facts.notification(.refund, named.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(try await f.allPurchases(other, pageSize: 10).map(\.status) == [.refunded], "[\(kind)]")
            f.clock.advance(by: 60)
            try await f.deliver(Facts.notification(.refundReversed, named.signed(at: f.now), signed: f.now))
            #expect(try await f.balance(other) == 100, "[\(kind)]")
            try await f.checkInvariants([user, other])
        }
    }

    @Test("A notification signed before the newest one applied changes nothing: the newest decides, whatever came first",
        arguments: StoreKind.allCases)
    func outOfOrder(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let start = f.now
            let later = { (seconds: TimeInterval) in start.addingTimeInterval(seconds) }
            // A reversal that overtakes its refund and the charge: credited once, never refunded.
            let kept = Facts.consumable(for: user, purchased: start)
            let reversal = Facts.notification(.refundReversed, kept.signed(at: later(120)), signed: later(120))
            #expect(try await f.deliver(reversal).purchase?.status == .credited, "[\(kind)]")
            let refund = Facts.notification(.refund, kept.signed(at: later(60), revoked: later(60)), signed: later(60))
            #expect(try await f.deliver(refund).disposition == .stale, "[\(kind)]")
            #expect(try await f.deliver(Facts.notification(.oneTimeCharge, kept, signed: start)).disposition == .stale, "[\(kind)]")
            #expect(try await f.deliver(refund).disposition == .duplicate, "[\(kind)] a stale notification is still recorded as seen")
            #expect(try await f.entries(user, naming: kept.transactionId).map(\.kind) == [.purchase], "[\(kind)]")

            // A refund that overtakes the charge: never credited, whoever submits.
            let lost = Facts.consumable(for: user, purchased: start)
            try await f.deliver(Facts.notification(.refund, lost.signed(at: later(60), revoked: later(60)), signed: later(60)))
            #expect(try await f.deliver(Facts.notification(.oneTimeCharge, lost, signed: start)).disposition == .stale, "[\(kind)]")
            #expect(try await f.redeem(lost, by: user).purchase.status == .refunded, "[\(kind)]")
            #expect(try await f.entries(user, naming: lost.transactionId).isEmpty, "[\(kind)]")
            #expect(try await f.balance(user) == 100, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A test notification, or one about a product not sold, is recorded as seen and changes nothing; tokens out of range are refused",
        arguments: StoreKind.allCases)
    func ignoredAndRefused(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let test = Facts.notification(.test, nil, signed: f.now)
            #expect(try await f.deliver(test).disposition == .ignored, "[\(kind)]")
            #expect(try await f.deliver(test).disposition == .duplicate, "[\(kind)]")
            #expect(NotificationType(rawValue: "PRICE_INCREASE") == .other("PRICE_INCREASE"), "[\(kind)]")
            await expectStoreError(.invalidInput, kind) { try await f.redeem(Facts.consumable(tokens: 0, purchased: f.now), by: user) }
            await expectStoreError(.invalidInput, kind) {
                try await f.redeem(Facts.consumable(tokens: Limits.maxAmount, quantity: 2, purchased: f.now), by: user)
            }
            #expect(try await f.allEntries(user).isEmpty, "[\(kind)]")
            #expect(try await f.allPurchases(user).isEmpty, "[\(kind)]")
        }
    }

    @Test("A consumable stays credited after its owner's deletion: no one else gets it, and its refund takes nothing",
        arguments: StoreKind.allCases)
    func deletedOwner(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (first, second) = (try await f.newUser(), try await f.newUser())
            let bought = Facts.consumable(purchased: f.now)
            try await f.redeem(bought, by: first)
            #expect(try await f.store.deleteUser(id: first), "[\(kind)]")
            await expectClaimed(kind) { try await f.redeem(bought, by: second) }
            let refund = try await f.deliver(Facts.notification(.refund, bought.signed(at: f.now, revoked: f.now), signed: f.now))
            #expect(refund.purchase?.status == .refunded && refund.purchase?.refundedTokens == 0 && refund.changedUsers.isEmpty, "[\(kind)]")
            #expect(try await f.balance(second) == 0, "[\(kind)]")
        }
    }

    @Test("An account's purchases are listed newest first, paged by cursor, with their statuses, and no one else's",
        arguments: StoreKind.allCases)
    func listing(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (user, other) = (try await f.newUser(), try await f.newUser())
            let start = f.now
            let hour = { (hours: Double) in start.addingTimeInterval(hours * 3600) }
            let old = Facts.consumable("a-" + randomId(), purchased: hour(0))
            let (twinA, twinB) = (Facts.consumable("b-" + randomId(), purchased: hour(1)), Facts.consumable("c-" + randomId(), purchased: hour(1)))
            let original = randomId("otx-")
            let period = Facts.period(original, of: original, purchased: hour(2), expires: hour(26))
            let refunded = Facts.consumable(purchased: hour(3))
            for transaction in [old, twinA, twinB, period, refunded] { try await f.redeem(transaction, by: user) }
            try await f.deliver(Facts.notification(.refund, refunded.signed(at: hour(4), revoked: hour(4)), signed: hour(4)))
            try await f.redeem(Facts.consumable(purchased: hour(5)), by: other)

            f.clock.advance(by: 25 * 3600)
            let listed = try await f.allPurchases(user)
            let expected = [refunded.transactionId, period.transactionId, twinB.transactionId, twinA.transactionId, old.transactionId]
            #expect(listed.map(\.transactionId) == expected, "[\(kind)]")
            #expect(listed.map(\.status) == [.refunded, .active, .credited, .credited, .credited], "[\(kind)]")
            #expect(listed[1].kind == .subscription && listed[1].premiumUntil == hour(26) && listed[1].tokens == nil, "[\(kind)]")
            f.clock.advance(by: 3600)
            #expect(try await f.allPurchases(user, pageSize: 10)[1].status == .expired, "[\(kind)]")
            #expect(PurchaseCursor(token: "x.y") == nil && PurchaseCursor(token: "12.") == nil, "[\(kind)]")
        }
    }
}
