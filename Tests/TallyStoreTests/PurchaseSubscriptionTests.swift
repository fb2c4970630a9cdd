import Foundation
import TallyStore
import Testing

/// Auto-renewable subscriptions against every store: the premium they give moves as the App Store's notifications say
/// (renewals, grace periods, expiry, refunds and their reversals), in whatever order they come; it follows the account
/// that submitted last; and it combines with premium granted by the admin.
@Suite("Purchase subscriptions", .timeLimit(.minutes(10)))
struct PurchaseSubscriptionTests {
    typealias Facts = AppStoreFacts
    static let reading = ActionSpec(name: "reading", quota: "readings")

    @Test("Renewals, a grace period, its end, a new subscription, its refund and the refund's reversal move the premium end",
        arguments: StoreKind.allCases)
    func lifeCycle(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let original = randomId("otx-")
            let first = Facts.period(original, of: original, for: user, purchased: day(0), expires: day(30))
            let bought = try await f.redeem(first, by: user)
            #expect(bought.purchase.status == .active && bought.user.purchasedPremiumUntil == day(30), "[\(kind)]")
            #expect(bought.user.isPremium(at: f.now) && bought.changedUsers == [user], "[\(kind)]")

            let second = Facts.period(of: original, for: user, purchased: day(30), expires: day(60))
            // (notification, the bought premium end after it)
            let steps: [(VerifiedNotification, Date)] = [
                (Facts.notification(.subscribed, first, signed: day(0)), day(30)),
                (Facts.notification(.didRenew, second, signed: day(30)), day(60)),
                (Facts.notification(.didChangeRenewalStatus, second, signed: day(40)), day(60)),
                (Facts.notification(.didFailToRenew, second.signed(at: day(60)), signed: day(60), grace: day(76)), day(76)),
                (Facts.notification(.gracePeriodExpired, second.signed(at: day(76)), signed: day(76)), day(60)),
            ]
            for (notification, end) in steps {
                f.clock.set(max(f.now, notification.signedDate))
                try await f.deliver(notification)
                #expect(try await f.boughtPremium(user) == end, "[\(kind)] after \(notification.type.rawValue)")
            }
            #expect(try await f.store.user(id: user)?.isPremium(at: f.now) == false, "[\(kind)]")

            let third = Facts.period(of: original, for: user, purchased: day(80), expires: day(110))
            let lateSteps: [(VerifiedNotification, Date)] = [
                (Facts.notification(.subscribed, third, signed: day(80)), day(110)),
                (Facts.notification(.refund, third.signed(at: day(90), revoked: day(90)), signed: day(90)), day(90)),
                (Facts.notification(.refundReversed, third.signed(at: day(95)), signed: day(95)), day(110)),
                (Facts.notification(.revoke, third.signed(at: day(100), revoked: day(100)), signed: day(100)), day(100)),
                (Facts.notification(.didRenew, third.signed(at: day(101)), signed: day(101)), day(110)),
                (Facts.notification(.expired, third.signed(at: day(111)), signed: day(111)), day(110)),
            ]
            for (notification, end) in lateSteps {
                f.clock.set(notification.signedDate)
                try await f.deliver(notification)
                #expect(try await f.boughtPremium(user) == end, "[\(kind)] after \(notification.type.rawValue)")
            }
            // One premium entry per change of the end: bought, 60, 76, 60, 110, 90, 110, 100, 110 (the rest changed nothing).
            let premium = try await f.entries(user, naming: original)
            #expect(premium.count == 9 && premium.allSatisfy { $0.kind == .premium && $0.amount == 0 }, "[\(kind)] \(premium.map(\.reason))")
            #expect(premium.first?.reason == "\(original) \(Facts.monthlyProduct) until \(day(30).formatted(.iso8601))", "[\(kind)]")
            // One row, whatever its renewals: its latest transaction, ended as /v1/me says.
            let periods = try await f.allPurchases(user, pageSize: 10)
            #expect(periods.map(\.transactionId) == [third.transactionId] && periods.map(\.status) == [.expired], "[\(kind)]")
            #expect(periods.first?.premiumUntil == day(110) && periods.first?.originalTransactionId == original, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("Notifications that come out of order change only what the newest one says", arguments: StoreKind.allCases)
    func outOfOrder(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let original = randomId("otx-")
            let first = Facts.period(original, of: original, for: user, purchased: day(0), expires: day(30))
            let second = Facts.period(of: original, for: user, purchased: day(30), expires: day(60))
            let subscribed = Facts.notification(.subscribed, first, signed: day(0))
            let renewed = Facts.notification(.didRenew, second, signed: day(30))
            let refunded = Facts.notification(.refund, second.signed(at: day(45), revoked: day(45)), signed: day(45))
            // The refund comes first and names the account: premium to the refund's date, then nothing older counts.
            f.clock.set(day(50))
            let applied = try await f.deliver(refunded)
            #expect(applied.disposition == .applied && applied.changedUsers == [user], "[\(kind)]")
            #expect(try await f.boughtPremium(user) == day(45), "[\(kind)]")
            for late in [renewed, subscribed] {
                #expect(try await f.deliver(late).disposition == .stale, "[\(kind)] \(late.type.rawValue)")
            }
            #expect(try await f.boughtPremium(user) == day(45), "[\(kind)]")
            // The app submits the first period, signed long ago: the account keeps what the refund left.
            #expect(try await f.redeem(first, by: user).user.purchasedPremiumUntil == day(45), "[\(kind)]")
            // The reversal, newer than all of them, restores the period's end.
            try await f.deliver(Facts.notification(.refundReversed, second.signed(at: day(50)), signed: day(50)))
            #expect(try await f.boughtPremium(user) == day(60), "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("A restore of a subscription bought without an appAccountToken moves premium to the account that submits: the earlier holder keeps only its other subscriptions",
        arguments: StoreKind.allCases)
    func restoreMovesPremium(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (earlier, later) = (try await f.newUser(), try await f.newUser())
            let (monthly, weekly) = (randomId("otx-"), randomId("otx-"))
            let month = Facts.period(monthly, of: monthly, purchased: day(0), expires: day(30))
            let week = Facts.period(weekly, of: weekly, purchased: day(0), expires: day(7))
            try await f.redeem(month, by: earlier)
            try await f.redeem(week, by: earlier)
            #expect(try await f.boughtPremium(earlier) == day(30), "[\(kind)]")

            let restored = try await f.redeem(month, by: later)
            #expect(restored.user.purchasedPremiumUntil == day(30) && restored.changedUsers == [earlier, later].sorted(), "[\(kind)]")
            #expect(restored.purchase.userId == later, "[\(kind)]")
            #expect(try await f.boughtPremium(earlier) == day(7), "[\(kind)] the weekly subscription is still the earlier account's")
            let moved = try await f.entries(earlier, naming: monthly).last
            #expect(moved?.kind == .premium && moved?.reason == "\(monthly) \(Facts.monthlyProduct) moved to another account", "[\(kind)]")
            #expect(try await f.entries(later, naming: monthly).map(\.kind) == [.premium], "[\(kind)]")
            // A renewal keeps it with the account that submitted last.
            let renewal = Facts.period(of: monthly, purchased: day(30), expires: day(60))
            try await f.deliver(Facts.notification(.didRenew, renewal, signed: day(30)))
            #expect(try await f.boughtPremium(later) == day(60), "[\(kind)]")
            #expect(try await f.boughtPremium(earlier) == day(7), "[\(kind)]")
            // Submitting it again moves it back.
            try await f.redeem(month, by: earlier)
            #expect(try await f.boughtPremium(earlier) == day(60), "[\(kind)]")
            #expect(try await f.boughtPremium(later) == nil, "[\(kind)]")
            try await f.checkInvariants([earlier, later])
        }
    }

    @Test("A subscription's notification gives premium to the account it names before any submission; naming no one, it waits unclaimed",
        arguments: StoreKind.allCases)
    func notifiedFirst(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let user = try await f.newUser()
            let named = randomId("otx-")
            let period = Facts.period(named, of: named, for: user, purchased: day(0), expires: day(30))
            #expect(try await f.deliver(Facts.notification(.subscribed, period, signed: day(0))).changedUsers == [user], "[\(kind)]")
            #expect(try await f.boughtPremium(user) == day(30), "[\(kind)]")

            let stray = randomId("otx-")
            let first = Facts.period(stray, of: stray, for: randomId(), purchased: day(0), expires: day(30))
            try await f.deliver(Facts.notification(.subscribed, first, signed: day(0)))
            let renewal = Facts.period(of: stray, purchased: day(30), expires: day(60))
            f.clock.set(day(31))
            try await f.deliver(Facts.notification(.didRenew, renewal, signed: day(30)))
            // Waiting, once: its latest transaction, active until the renewal's end.
            let waiting = try await f.store.unclaimedPurchases(after: nil, limit: 10, now: f.now)
            #expect(waiting.map(\.transactionId) == [renewal.transactionId] && waiting.map(\.status) == [.active], "[\(kind)]")

            // Restored: the account holds it, and lists it in place of the row of no account.
            #expect(try await f.redeem(first, by: user).user.purchasedPremiumUntil == day(60), "[\(kind)]")
            #expect(try await f.store.unclaimedPurchases(after: nil, limit: 10, now: f.now).isEmpty, "[\(kind)]")
            let mine = try await f.allPurchases(user).filter { $0.originalTransactionId == stray }
            #expect(mine.map(\.transactionId) == [renewal.transactionId] && mine.map(\.status) == [.active], "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("Premium granted by the admin and premium bought combine: the later end counts, for the profile and for the quotas",
        arguments: StoreKind.allCases)
    func combinedWithAdminPremium(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let original = randomId("otx-")
            try await f.redeem(Facts.period(original, of: original, purchased: day(0), expires: day(30)), by: user)
            let granted = try await f.run(.setPremium(userId: user, until: day(10)))
            #expect(granted.state.user.premiumUntil == day(10) && granted.state.user.combinedPremiumUntil == day(30), "[\(kind)]")
            #expect(try await f.run(.setPremium(userId: user, until: day(60))).state.user.combinedPremiumUntil == day(60), "[\(kind)]")
            #expect(try await f.run(.setPremium(userId: user, until: nil)).state.user.combinedPremiumUntil == day(30), "[\(kind)]")

            // Past the admin's end, the bought premium still lifts the daily limit.
            f.clock.set(day(20))
            for _ in 0..<5 {
                #expect(try await f.run(.performAction(userId: user, action: Self.reading, quotaLimit: 3)).payment == .premium, "[\(kind)]")
            }
            f.clock.set(day(31))
            #expect(try await f.run(.performAction(userId: user, action: Self.reading, quotaLimit: 3)).payment == .useQuota, "[\(kind)]")
            #expect(try await f.store.accountState(userId: user, now: f.now)?.user.purchasedPremiumUntil == day(30), "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }
}
