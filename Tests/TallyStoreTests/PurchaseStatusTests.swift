import Foundation
import TallyStore
import Testing

/// What `GET /v1/purchases` says of a subscription, against every store: one row per original transaction in an
/// account's list (its renewals inside it), saying what the newest fact applied says — `active`, `expired`, `refunded`,
/// `revoked`, or `moved_away` in the list of an account it moved away from — with the premium end the account has.
/// And who may hold it: the account its `appAccountToken` names, if that account exists.
@Suite("Purchase statuses", .timeLimit(.minutes(2)))
struct PurchaseStatusTests {
    typealias Facts = AppStoreFacts

    @Test("A subscription is one row whatever its renewals: the latest transaction, the current end, active until it ends",
        arguments: StoreKind.allCases)
    func oneRowPerSubscription(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let original = randomId("otx-")
            let first = Facts.period(original, of: original, for: user, purchased: day(0), expires: day(30))
            let second = Facts.period(of: original, for: user, purchased: day(30), expires: day(60))
            let third = Facts.period(of: original, for: user, purchased: day(60), expires: day(90))
            try await f.redeem(first, by: user)
            f.clock.set(day(30))
            try await f.deliver(Facts.notification(.didRenew, second, signed: day(30)))
            f.clock.set(day(60))
            try await f.deliver(Facts.notification(.didRenew, third, signed: day(60)))
            // The app submits the renewal StoreKit gave it (an older period's copy too): still one row.
            try await f.redeem(third, by: user)
            let answer = try await f.redeem(second, by: user)
            #expect(answer.purchase.transactionId == third.transactionId && answer.purchase.premiumUntil == day(90), "[\(kind)]")

            f.clock.set(day(61))
            let listed = try await f.allPurchases(user, pageSize: 10)
            #expect(listed.count == 1, "[\(kind)] \(listed.map(\.transactionId))")
            let row = try #require(listed.first)
            #expect(row.originalTransactionId == original && row.transactionId == third.transactionId, "[\(kind)] \(row)")
            #expect(row.premiumUntil == day(90) && row.status == .active && row.purchasedAt == day(0), "[\(kind)] \(row)")
            #expect(try await f.boughtPremium(user) == day(90), "[\(kind)]")
            f.clock.set(day(90))
            #expect(try await f.allPurchases(user).map(\.status) == [.expired], "[\(kind)] ended as /v1/me says")
            try await f.checkInvariants([user])
        }
    }

    @Test("EXPIRED, REFUND and REVOKE show on the row as on the account: expired, refunded, revoked; a renewal or reversal: active",
        arguments: StoreKind.allCases)
    func endings(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let original = randomId("otx-")
            let first = Facts.period(original, of: original, for: user, purchased: day(0), expires: day(30))
            let second = Facts.period(of: original, for: user, purchased: day(11), expires: day(41))
            try await f.redeem(first, by: user)
            // (notification, the row's status and premium end after it, and the account's)
            let steps: [(VerifiedNotification, PurchaseStatus, Date)] = [
                (Facts.notification(.expired, first.signed(at: day(10)), signed: day(10)), .expired, day(10)),
                (Facts.notification(.subscribed, second, signed: day(11)), .active, day(41)),
                (Facts.notification(.refund, second.signed(at: day(12), revoked: day(12)), signed: day(12)), .refunded, day(12)),
                (Facts.notification(.refundReversed, second.signed(at: day(13)), signed: day(13)), .active, day(41)),
                (Facts.notification(.revoke, second.signed(at: day(14), revoked: day(14)), signed: day(14)), .revoked, day(14)),
            ]
            for (notification, status, end) in steps {
                f.clock.set(notification.signedDate.addingTimeInterval(60))
                let outcome = try await f.deliver(notification)
                let label = "[\(kind)] after \(notification.type.rawValue)"
                #expect(outcome.purchase?.status == status && outcome.purchase?.premiumUntil == end, "\(label) \(String(describing: outcome.purchase))")
                let listed = try await f.allPurchases(user)
                #expect(listed.map(\.status) == [status] && listed.map(\.premiumUntil) == [end], "\(label) \(listed)")
                #expect(try await f.boughtPremium(user) == end, "\(label)")
            }
            try await f.checkInvariants([user])
        }
    }

    @Test("A restore moves a subscription bought without an appAccountToken; the account it left keeps its row, moved_away, without premium",
        arguments: StoreKind.allCases)
    func movedAway(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (earlier, later) = (try await f.newUser(), try await f.newUser())
            let original = randomId("otx-")
            let bought = Facts.period(original, of: original, purchased: day(0), expires: day(30))
            try await f.redeem(bought, by: earlier)
            let restored = try await f.redeem(bought, by: later)
            #expect(restored.purchase.status == .active && restored.purchase.userId == later, "[\(kind)]")
            let left = try await f.allPurchases(earlier)
            #expect(left.map(\.status) == [.movedAway] && left.map(\.premiumUntil) == [nil], "[\(kind)] \(left)")
            #expect(left.first?.originalTransactionId == original, "[\(kind)]")
            #expect(try await f.allPurchases(later).map(\.status) == [.active], "[\(kind)]")
            #expect(try await f.boughtPremium(earlier) == nil, "[\(kind)]")

            // Submitted again by the first: each list says where it is now.
            try await f.redeem(bought, by: earlier)
            #expect(try await f.allPurchases(earlier).map(\.status) == [.active], "[\(kind)]")
            #expect(try await f.allPurchases(later).map(\.status) == [.movedAway], "[\(kind)]")
            #expect(try await f.boughtPremium(later) == nil, "[\(kind)]")
            #expect(try await f.boughtPremium(earlier) == day(30), "[\(kind)]")
            try await f.checkInvariants([earlier, later])
        }
    }

    @Test("A subscription whose appAccountToken names an existing account stays with it: another account is refused, nothing moves",
        arguments: StoreKind.allCases)
    func followsItsBuyer(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (buyer, other) = (try await f.newUser(), try await f.newUser())
            _ = try await f.store.linkCredentials(userId: other, email: "\(randomId())@example.com", passwordHash: "x")
            let original = randomId("otx-")
            let bought = Facts.period(original, of: original, for: buyer, purchased: day(0), expires: day(30))
            try await f.redeem(bought, by: buyer)
            await expectClaimed(kind) { try await f.redeem(bought, by: other) }
            // A renewal StoreKit delivers to the other account's session: refused too.
            let renewal = Facts.period(of: original, for: buyer, purchased: day(30), expires: day(60))
            f.clock.set(day(30))
            await expectClaimed(kind) { try await f.redeem(renewal, by: other) }
            #expect(try await f.boughtPremium(buyer) == day(60), "[\(kind)] the renewal still counts for its buyer")
            #expect(try await f.boughtPremium(other) == nil, "[\(kind)]")
            #expect(try await f.allPurchases(other).isEmpty, "[\(kind)]")
            #expect(try await f.entries(other, naming: original).isEmpty, "[\(kind)]")
            #expect(try await f.allPurchases(buyer).map(\.status) == [.active], "[\(kind)]")

            // Named before any submission, delivered first: the named account holds it; a stranger is still refused.
            let (named, stranger) = (try await f.newUser(), try await f.newUser())
            let other2 = randomId("otx-")
            let notified = Facts.period(other2, of: other2, for: named, purchased: day(30), expires: day(60))
            try await f.deliver(Facts.notification(.subscribed, notified, signed: day(30)))
            await expectClaimed(kind) { try await f.redeem(notified, by: stranger) }
            #expect(try await f.boughtPremium(named) == day(60), "[\(kind)]")
            #expect(try await f.boughtPremium(stranger) == nil, "[\(kind)]")

            // The named account deleted: today's rule again, the last to submit holds it.
            #expect(try await f.store.deleteUser(id: named), "[\(kind)]")
            #expect(try await f.redeem(notified, by: stranger).user.purchasedPremiumUntil == day(60), "[\(kind)]")
            try await f.checkInvariants([buyer, other, stranger])
        }
    }

    @Test("A guest that lists a subscription the account also lists merges into it: listed once, held by the account",
        arguments: StoreKind.allCases)
    func mergeListsOnce(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (account, guest) = (try await f.newUser(), try await f.newUser())
            _ = try await f.store.linkCredentials(userId: account, email: "\(randomId())@example.com", passwordHash: "x")
            let original = randomId("otx-")
            let bought = Facts.period(original, of: original, purchased: day(0), expires: day(30))
            try await f.redeem(bought, by: account)
            try await f.redeem(bought, by: guest)
            #expect(try await f.allPurchases(account).map(\.status) == [.movedAway], "[\(kind)]")
            _ = try await f.store.merge(guestId: guest, into: account, now: f.now)
            let listed = try await f.allPurchases(account)
            #expect(listed.map(\.status) == [.active] && listed.map(\.originalTransactionId) == [original], "[\(kind)] \(listed)")
            #expect(try await f.boughtPremium(account) == day(30), "[\(kind)]")
            try await f.checkInvariants([account])
        }
    }

    @Test("Sandbox consumables credit an account up to the bound the transaction carries, each entry labelled; beyond, nothing",
        arguments: StoreKind.allCases)
    func sandboxBound(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (user, other) = (try await f.newUser(), try await f.newUser())
            let bought = { (tokens: Int64, account: String?) in Facts.consumable(tokens: tokens, for: account, purchased: f.now).sandbox(limit: 250) }
            #expect(try await f.redeem(bought(100, nil), by: user).wallet.balance == 100, "[\(kind)]")
            #expect(try await f.redeem(bought(150, nil), by: user).wallet.balance == 250, "[\(kind)] up to the bound exactly")
            let beyond = bought(1, nil)
            await expectStoreError(.sandboxLimit, kind) { try await f.redeem(beyond, by: user) }
            // Refused, it waits unclaimed; another account with room takes it.
            #expect(try await f.unclaimed(beyond.transactionId)?.status == .unclaimed, "[\(kind)]")
            #expect(try await f.redeem(beyond, by: other).wallet.balance == 1, "[\(kind)]")
            // A notification naming the account past its bound credits nothing; Production purchases are not bounded.
            let named = bought(10, user)
            #expect(try await f.deliver(Facts.notification(.oneTimeCharge, named, signed: f.now)).changedUsers.isEmpty, "[\(kind)]")
            await expectStoreError(.sandboxLimit, kind) { try await f.redeem(named, by: user) }
            #expect(try await f.redeem(Facts.consumable(tokens: 500, purchased: f.now), by: user).wallet.balance == 750, "[\(kind)]")
            // A bound of 0 refuses every Sandbox credit.
            await expectStoreError(.sandboxLimit, kind) {
                try await f.redeem(Facts.consumable(tokens: 1, purchased: f.now).sandbox(limit: 0), by: other)
            }
            let entries = try await f.allEntries(user).filter { $0.kind == .purchase }
            #expect(entries.map { $0.reason?.hasPrefix("Sandbox ") == true } == [true, true, false], "[\(kind)] \(entries.map(\.reason))")
            try await f.checkInvariants([user, other])
        }
    }
}
