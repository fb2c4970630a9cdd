import Foundation
import TallyStore
import Testing

/// The pure parts of the purchase rules, without a store: what a prorated refund takes, where a subscription's premium
/// ends, which entries a wallet admits, and the names and cursors the API carries.
@Suite("Purchase planner", .timeLimit(.minutes(1)))
struct PurchasePlannerTests {
    @Test("A prorated refund takes tokens × percentage / 100000 rounded down, all of them without a percentage, never more than credited")
    func prorating() {
        // (tokens, percentage, taken): the user keeps each fraction of a token.
        let cases: [(Int64, Int?, Int64)] = [
            (100, nil, 100), (100, 100_000, 100), (100, 0, 0), (100, 33_333, 33), (7, 50_000, 3), (1, 99_999, 0), (3, 66_667, 2),
            (1_000_000_000, 12_345, 123_450_000), (999_999_999, 99_999, 999_989_999), (100, 150_000, 100), (100, -5, 0),
        ]
        for (tokens, percentage, taken) in cases {
            #expect(PurchasePlanner.refundedTokens(of: tokens, percentage: percentage) == taken, "\(tokens) × \(String(describing: percentage))")
        }
        var random = SplitMix64(seed: 33)
        for _ in 0..<10_000 {
            let tokens = Int64.random(in: 1...3_000_000_000, using: &random)
            let percentage = Int.random(in: 0...100_000, using: &random)
            let taken = PurchasePlanner.refundedTokens(of: tokens, percentage: percentage)
            // Exact: taken ≤ tokens × p / 100000 < taken + 1, in 128-bit arithmetic.
            let exact = tokens.multipliedFullWidth(by: Int64(percentage))
            let scaled = Int64(100_000).multipliedFullWidth(by: taken)
            let next = Int64(100_000).multipliedFullWidth(by: taken + 1)
            #expect(
                (scaled.high, scaled.low) <= (exact.high, exact.low) && (exact.high, exact.low) < (next.high, next.low),
                "\(tokens) × \(percentage) → \(taken)")
        }
    }

    @Test("A subscription's premium ends at its period's end, its grace period's if later, and never after its revocation")
    func subscriptionEnd() {
        let subscription = { (grace: Double?, revoked: Double?) in
            StoredSubscription(
                originalTransactionId: "o", productId: "p", environment: "Sandbox", userId: nil, expiresAt: day(30),
                graceUntil: grace.map(day), revokedAt: revoked.map(day), signedAt: day(0)).premiumUntil
        }
        #expect(subscription(nil, nil) == day(30))
        #expect(subscription(46, nil) == day(46))
        #expect(subscription(20, nil) == day(30))
        #expect(subscription(46, 40) == day(40))
        #expect(subscription(nil, 10) == day(10))
        #expect(subscription(nil, 31) == day(30))
    }

    @Test("A wallet admits a refund below zero, and after it only entries that do not lower what is available")
    func admits() {
        let debt = WalletState(balance: 10, held: 30, version: 4)
        let entry = { (kind: EntryKind, amount: Int64, held: Int64) in PlannedEntry(kind: kind, amount: amount, heldChange: held, reason: nil) }
        #expect(WalletState(balance: 5, held: 0, version: 1).admits(entry(.refund, -100, 0)))
        #expect(!WalletState(balance: 5, held: 0, version: 1).admits(entry(.debit, -6, 0)))
        #expect(debt.admits(entry(.capture, -30, -30)), "a hold opened before the refund captures what it held")
        #expect(debt.admits(entry(.release, 0, -30)) && debt.admits(entry(.purchase, 5, 0)) && debt.admits(entry(.premium, 0, 0)))
        #expect(!debt.admits(entry(.debit, -1, 0)) && !debt.admits(entry(.hold, 0, 1)))
        #expect(!debt.admits(entry(.release, 0, -31)), "nothing is held below zero")
    }

    @Test("Notification types read and write Apple's names; cursors read back what they wrote")
    func namesAndCursors() {
        let named: [NotificationType] = [
            .subscribed, .didRenew, .didChangeRenewalStatus, .didFailToRenew, .expired, .gracePeriodExpired, .revoke, .oneTimeCharge,
            .refund, .refundReversed, .test,
        ]
        for type in named { #expect(NotificationType(rawValue: type.rawValue) == type && !type.rawValue.isEmpty) }
        #expect(NotificationType(rawValue: "DID_RENEW") == .didRenew && NotificationType(rawValue: "CONSUMPTION_REQUEST").rawValue == "CONSUMPTION_REQUEST")
        let record = PurchaseRecord(
            transactionId: "2000000.1", originalTransactionId: "o", productId: "p", kind: .consumable, quantity: 1, tokens: 1,
            premiumUntil: nil, environment: "Sandbox", status: .credited, userId: nil, purchasedAt: day(1), refundedAt: nil,
            refundedTokens: nil, recordedAt: day(1))
        let cursor = PurchaseCursor(after: record)
        #expect(PurchaseCursor(token: cursor.token) == cursor && cursor.token == "\(day(1).millis).2000000.1")
        for bad in ["", ".", "12", "x.y", "12."] { #expect(PurchaseCursor(token: bad) == nil, "\(bad)") }
    }

    @Test("A store reads the submitter, the account the token names, the owner and the holder, sorted, each once")
    func accountsToRead() {
        let bought = AppStoreFacts.consumable("t", for: "b", purchased: day(0))
        var owned = StoredPurchase(
            transactionId: "t", originalTransactionId: "t", productId: "p", kind: .consumable, quantity: 1, tokens: 1,
            environment: "Sandbox", userId: "c", claimed: true, purchasedAt: day(0), revokedAt: nil, refundedTokens: nil,
            reversedAt: nil, signedAt: nil, recordedAt: day(0))
        #expect(PurchasePlanner.accountsToRead(.redemption(bought, userId: "d"), purchase: owned, subscription: nil) == ["b", "c", "d"])
        owned.userId = "b"
        #expect(PurchasePlanner.accountsToRead(.notification(AppStoreFacts.notification(.refund, bought, signed: day(0))), purchase: owned,
            subscription: nil) == ["b"])
    }

    @Test("A subscription's row says what its state says: active until its end, expired after, refunded, revoked; moved_away for another account")
    func subscriptionStatuses() {
        let row = StoredPurchase(
            transactionId: "o", originalTransactionId: "o", productId: "p", kind: .subscription, quantity: 1, tokens: nil,
            environment: "Production", userId: "a", claimed: false, purchasedAt: day(0), revokedAt: nil, refundedTokens: nil,
            reversedAt: nil, signedAt: nil, recordedAt: day(0))
        let state = { (holder: String?, revoked: Double?, revocation: SubscriptionRevocation?) in
            StoredSubscription(
                originalTransactionId: "o", transactionId: "t3", productId: "p", environment: "Production", userId: holder,
                expiresAt: day(30), graceUntil: nil, revokedAt: revoked.map(day), revocation: revocation, signedAt: day(0))
        }
        let active = row.record(at: day(10), subscription: state("a", nil, nil))
        #expect(active.status == .active && active.premiumUntil == day(30) && active.transactionId == "t3")
        #expect(row.record(at: day(30), subscription: state("a", nil, nil)).status == .expired)
        #expect(row.record(at: day(10), subscription: state("a", 5, .refund)).status == .refunded)
        let revoked = row.record(at: day(10), subscription: state("a", 5, .revoke))
        #expect(revoked.status == .revoked && revoked.premiumUntil == day(5) && revoked.refundedAt == day(5))
        let moved = row.record(at: day(10), subscription: state("b", nil, nil))
        #expect(moved.status == .movedAway && moved.premiumUntil == nil)
        #expect(PurchaseCursor(after: moved).transactionId == "o", "a page goes on after the row's key, not its latest transaction")
        #expect(state("a", 5, nil).revocation == .refund, "a revocation without its cause is a refund")
    }
}
