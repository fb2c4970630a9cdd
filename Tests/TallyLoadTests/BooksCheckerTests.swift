import Foundation
import TallyAPI
import TallyLoad
import Testing

/// The checker on hand-made books: balanced ones pass, and each rule catches its own kind of breakage.
@Suite(.timeLimit(.minutes(1))) struct BooksCheckerTests {
    let prices = PriceList(tokens: ["reading": 5, "ai.query": 3], quota: ["reading": "readings"], dailyLimit: ["readings": 3])
    let window = Date(timeIntervalSince1970: 1_800_000_000)
    var id: Int64 = 0

    mutating func entry(_ kind: String, _ amount: Int64, held: Int64 = 0, reason: String) -> LedgerEntry {
        id += 1
        return LedgerEntry(id: id, kind: kind, amount: amount, heldChange: held, balanceAfter: 0, reason: reason, createdAt: Date())
    }

    /// 40 granted, two ai.query charges, a hold captured for 2 of 4, one released, two free readings.
    mutating func balanced() -> (ExpectedBooks, ServerBooks) {
        var expected = ExpectedBooks(userId: "u")
        expected.grants["g1"] = 40
        expected.debits["ai.query"] = 2
        expected.holds["h1"] = .captured(amount: 4, charged: 2)
        expected.holds["h2"] = .released(amount: 1)
        expected.usedQuota("readings", resetsAt: window)
        expected.usedQuota("readings", resetsAt: window)
        let entries = [
            entry("grant", 40, reason: "g1"), entry("debit", -3, reason: "ai.query"), entry("debit", -3, reason: "ai.query"),
            entry("hold", 0, held: 4, reason: "h1"), entry("capture", -2, held: -4, reason: "h1"),
            entry("hold", 0, held: 1, reason: "h2"), entry("release", 0, held: -1, reason: "h2"),
        ]
        let quota = Quota(name: "readings", limit: 3, used: 2, resetsAt: window, unlimited: false)
        return (expected, ServerBooks(wallet: Wallet(balance: 32, held: 0, version: 7), quotas: [quota], entries: entries.reversed()))
    }

    @Test mutating func balancedBooksPass() {
        let (expected, books) = balanced()
        #expect(BooksChecker.check(expected, against: books, prices: prices).isEmpty)
    }

    @Test mutating func aDoubleChargeIsCaught() {
        var (expected, books) = balanced()
        books.entries.insert(entry("debit", -3, reason: "ai.query"), at: 0)
        books.wallet = Wallet(balance: 29, held: 0, version: 8)
        let found = BooksChecker.check(expected, against: books, prices: prices).map(\.message)
        #expect(found.contains { $0.contains("action ai.query: 3 debits, expected 2") })
        #expect(found.count == 1)  // the balance itself follows the ledger: only the count gives it away
        expected.uncertain["ai.query"] = 1  // an SDK action of unknown outcome may account for one more…
        #expect(BooksChecker.check(expected, against: books, prices: prices).isEmpty)
        books.entries.insert(entry("debit", -3, reason: "ai.query"), at: 0)  // …but not two
        books.wallet = Wallet(balance: 26, held: 0, version: 9)
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message) == ["action ai.query: 4 debits, expected 2...3"])
    }

    @Test mutating func aLostGrantOrAMissingChargeIsCaught() {
        var (expected, books) = balanced()
        expected.grants["g2"] = 10
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message).contains { $0.contains("grant g2") })
        (expected, books) = balanced()
        expected.debits["ai.query"] = 3
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message) == ["action ai.query: 2 debits, expected 3"])
    }

    @Test mutating func aRefusedRequestThatLeftAnEntryIsCaught() {
        var (expected, books) = balanced()
        books.entries.insert(entry("hold", 0, held: 1_000, reason: "refused-hold"), at: 0)
        books.wallet = Wallet(balance: 32, held: 1_000, version: 8)
        let found = BooksChecker.check(expected, against: books, prices: prices).map(\.message)
        #expect(found.contains { $0.contains("unexpected hold entries for refused-hold") })
        #expect(found.contains { $0.contains("held 1000 outside") })
        (expected, books) = balanced()
        books.entries.insert(entry("grant", 5, reason: "nobody asked"), at: 0)
        books.wallet = Wallet(balance: 37, held: 0, version: 8)
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message).contains { $0.contains("unexpected grant") })
    }

    @Test mutating func ledgerAndWalletMustAgree() {
        var (expected, books) = balanced()
        books.wallet = Wallet(balance: 31, held: 0, version: 7)
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message).contains("entries do not sum to the balance"))
        (expected, books) = balanced()
        books.wallet = Wallet(balance: -1, held: 0, version: 7)
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message).contains("negative balance -1"))
    }

    @Test mutating func freeQuotaAboveTheLimitIsCaught() {
        var (expected, books) = balanced()
        for _ in 0..<2 { expected.usedQuota("readings", resetsAt: window) }
        books.quotas = [Quota(name: "readings", limit: 3, used: 4, resetsAt: window, unlimited: false)]
        let found = BooksChecker.check(expected, against: books, prices: prices).map(\.message)
        #expect(found.contains { $0.contains("4 free uses in the window") })
        #expect(found.contains { $0.contains("used 4 > limit 3") })
    }

    @Test mutating func aCaptureAtTheWrongAmountIsCaught() {
        var (expected, books) = balanced()
        expected.holds["h1"] = .captured(amount: 4, charged: 3)
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message).contains { $0.contains("hold h1 captured for 3") })
    }

    @Test mutating func unansweredRequestsMayHaveActedAtMostOnce() {
        var (expected, books) = balanced()
        expected.uncertainGrants["g2"] = 10  // a grant that got no answer…
        expected.uncertainHolds = 1  // …and a hold whose creation got none
        #expect(BooksChecker.check(expected, against: books, prices: prices).isEmpty)  // neither happened: fine
        books.entries.insert(entry("grant", 10, reason: "g2"), at: 0)
        books.entries.insert(entry("hold", 0, held: 2, reason: "h3"), at: 0)
        books.wallet = Wallet(balance: 42, held: 2, version: 9)
        #expect(BooksChecker.check(expected, against: books, prices: prices).isEmpty)  // both happened once: fine
        books.entries.insert(entry("grant", 10, reason: "g2"), at: 0)
        books.entries.insert(entry("hold", 0, held: 2, reason: "h4"), at: 0)
        books.wallet = Wallet(balance: 52, held: 4, version: 11)
        let found = BooksChecker.check(expected, against: books, prices: prices).map(\.message)
        #expect(found.contains("unanswered grant g2 appears 2 times"))
        #expect(found.contains { $0.hasPrefix("unexpected hold entries") })
    }

    @Test mutating func aHoldWithAnUnansweredCaptureIsSettledAtMostOnce() {
        var (expected, books) = balanced()
        expected.holds["h1"] = .unknown(amount: 4)
        #expect(BooksChecker.check(expected, against: books, prices: prices).isEmpty)
        // h1, captured, is released as well. Another open hold of 4 keeps the held total in range, so that only
        // the second settlement can give it away.
        expected.holds["h3"] = .open(amount: 4)
        books.entries.insert(entry("hold", 0, held: 4, reason: "h3"), at: 0)
        books.entries.insert(entry("release", 0, held: -4, reason: "h1"), at: 0)
        books.wallet = Wallet(balance: 32, held: 0, version: 9)
        #expect(
            BooksChecker.check(expected, against: books, prices: prices).map(\.message)
                == ["hold h1 with an unanswered settlement is not in the ledger at most once"])
    }

    @Test mutating func unsettledRequestsFailTheRun() {
        var (expected, books) = balanced()
        expected.unsettled = 1
        #expect(BooksChecker.check(expected, against: books, prices: prices).map(\.message) == ["1 requests never got a definitive answer"])
    }
}
