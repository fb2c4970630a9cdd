import TallyTestSupport
import Testing

/// The shared ledger invariants (TallyTestSupport's ``LedgerInvariants``, run after every conformance case and by the
/// server tests' `expectBooksBalance`) on hand-made books: balanced ones pass, and each rule catches its own breakage.
@Suite("Ledger invariants", .timeLimit(.minutes(1)))
struct LedgerInvariantsTests {
    /// 20 granted, 5 held, 3 captured of the 5: balance 17, nothing held, four entries.
    static let balanced: [LedgerLine] = [
        LedgerLine(id: 10, amount: 20, heldChange: 0, balanceAfter: 20),
        LedgerLine(id: 11, amount: 0, heldChange: 5, balanceAfter: 20),
        LedgerLine(id: 14, amount: -3, heldChange: -5, balanceAfter: 17),
        LedgerLine(id: 15, amount: -2, heldChange: 0, balanceAfter: 15),
    ]

    static func check(_ entries: [LedgerLine], balance: Int64 = 15, held: Int64 = 0, version: Int64? = nil) -> [String] {
        LedgerInvariants.violations(balance: balance, held: held, version: version ?? Int64(entries.count), entries: entries)
    }

    @Test("Balanced books pass, in whatever order the entries come")
    func balancedBooksPass() {
        #expect(Self.check(Self.balanced).isEmpty)
        #expect(Self.check(Array(Self.balanced.reversed())).isEmpty)
        #expect(Self.check([], balance: 0).isEmpty)
    }

    @Test("Entries that do not sum to the wallet are caught")
    func sumsMustMatchTheWallet() {
        #expect(Self.check(Self.balanced, balance: 16) == ["entries sum to 15, the wallet's balance is 16"])
        #expect(
            Self.check(Self.balanced, balance: 15, held: 1)
                == ["held changes sum to 0, the wallet's held amount is 1"])
    }

    @Test("An entry whose balanceAfter does not follow from the entries before it is caught")
    func balanceAfterFollowsTheEntries() {
        var entries = Self.balanced
        entries[1].balanceAfter = 21
        #expect(Self.check(entries) == ["entry 11 says balance 21 after it, the entries up to it sum to 20"])
    }

    @Test("A balance that went negative or a hold above the balance on the way is caught, even when the end is fine")
    func noEntryLeavesTheBooksOutOfRange() {
        // The capture is written before the grant that paid for it.
        let overdrawn = [
            LedgerLine(id: 1, amount: -3, heldChange: 0, balanceAfter: -3), LedgerLine(id: 2, amount: 5, heldChange: 0, balanceAfter: 2),
        ]
        #expect(Self.check(overdrawn, balance: 2) == ["entry 1 leaves balance -3 held 0"])
        let overheld = [
            LedgerLine(id: 1, amount: 0, heldChange: 4, balanceAfter: 0), LedgerLine(id: 2, amount: 5, heldChange: 0, balanceAfter: 5),
        ]
        #expect(Self.check(overheld, balance: 5, held: 4) == ["entry 1 leaves balance 0 held 4"])
    }

    @Test("A negative wallet or one holding more than it owns is caught")
    func theWalletStaysInRange() {
        let debt = [LedgerLine(id: 1, amount: 2, heldChange: 0, balanceAfter: 2), LedgerLine(id: 2, amount: -3, heldChange: 0, balanceAfter: -1)]
        #expect(
            Self.check(debt, balance: -1) == ["entry 2 leaves balance -1 held 0", "negative balance -1", "held 0 outside 0...-1"])
        let released = [LedgerLine(id: 1, amount: 0, heldChange: -1, balanceAfter: 0)]
        #expect(Self.check(released, balance: 0, held: -1) == ["entry 1 leaves balance 0 held -1", "held -1 outside 0...0"])
    }

    @Test("A wallet version that is not one per entry, or an entry listed twice, is caught")
    func oneVersionPerEntry() {
        #expect(Self.check(Self.balanced, version: 5) == ["4 entries, wallet version 5: one version per entry"])
        let repeated = Self.balanced + [LedgerLine(id: 16, amount: 0, heldChange: 0, balanceAfter: 15)]
        #expect(Self.check(repeated).isEmpty)  // an entry that moves nothing is still an entry…
        var twice = Self.balanced
        twice.append(twice[3])
        twice[4].balanceAfter = 13  // …but the same entry read twice is caught even when its sums would follow
        #expect(Self.check(twice, balance: 13) == ["entry 15 appears twice"])
    }

    @Test("A transaction's refunds and reversals alternate, each reversal undoing its own refund; a second refund while one stands is caught")
    func refundsAlternate() {
        // Bought 100; refunded 40, reversed; refunded 100 (`#2`), reversed; refunded 30 (`#3`).
        let line = { (id: Int64, kind: String, amount: Int64, balance: Int64, reference: String) in
            LedgerLine(id: id, amount: amount, heldChange: 0, balanceAfter: balance, kind: kind, reference: reference)
        }
        let books = [
            line(1, "purchase", 100, 100, "t"), line(2, "refund", -40, 60, "t"), line(3, "refund_reversed", 40, 100, "t"),
            line(4, "refund", -100, 0, "t#2"), line(5, "refund_reversed", 100, 100, "t#2"), line(6, "refund", -30, 70, "t#3"),
        ]
        #expect(Self.check(books, balance: 70).isEmpty, "\(Self.check(books, balance: 70))")
        // A refund while the one before stands, a reversal of another refund than the one standing, a refund twice.
        let unreversed = [line(1, "purchase", 100, 100, "t"), line(2, "refund", -40, 60, "t"), line(3, "refund", -60, 0, "t#2")]
        #expect(Self.check(unreversed, balance: 0) == ["refund 3 of t#2 comes before the refund standing was reversed"])
        let crossed = [line(1, "purchase", 100, 100, "t"), line(2, "refund", -40, 60, "t#2"), line(3, "refund_reversed", 40, 100, "t")]
        #expect(Self.check(crossed, balance: 100) == ["reversal 3 of t comes before any refund of it to reverse"])
        let twice = [
            line(1, "purchase", 100, 100, "t"), line(2, "refund", -40, 60, "t"), line(3, "refund_reversed", 40, 100, "t"),
            line(4, "refund", -40, 60, "t"),
        ]
        #expect(Self.check(twice, balance: 60) == ["t has a second refund entry (4)"])
        let bought = [line(1, "purchase", 100, 100, "t"), line(2, "purchase", 100, 200, "t")]
        #expect(Self.check(bought, balance: 200) == ["t has a second purchase entry (2)"])
    }
}
