import Foundation
import TallyStore
import Testing

/// ``PurchaseConsumption``: the rule Tally answers Apple's consumption requests by, on ledgers written as the stores
/// write them (ids increasing, `balanceAfter` running, purchases and refunds referencing their transaction).
@Suite("Purchase consumption: first bought, first spent, after grants", .timeLimit(.minutes(1)))
struct PurchaseConsumptionTests {
    /// A ledger written entry by entry, its balance kept as the stores keep it.
    struct Ledger {
        var entries: [LedgerEntryRecord] = []
        var balance: Int64 = 0

        mutating func add(_ kind: EntryKind, _ amount: Int64, _ reference: String? = nil) {
            balance += amount
            entries.append(
                LedgerEntryRecord(
                    id: Int64(entries.count + 1), kind: kind, amount: amount, heldChange: 0, balanceAfter: balance, reason: nil,
                    createdAt: Date(timeIntervalSince1970: Double(entries.count)), reference: reference))
        }

        mutating func buy(_ transaction: String, _ tokens: Int64) { add(.purchase, tokens, transaction) }
        mutating func spend(_ tokens: Int64) { add(.debit, -tokens) }
        mutating func grant(_ tokens: Int64) { add(.grant, tokens) }
        mutating func refund(_ transaction: String, _ tokens: Int64) { add(.refund, -tokens, transaction) }

        var consumption: PurchaseConsumption { PurchaseConsumption(entries: entries.shuffled()) }
    }

    @Test("A pack 60 % spent is 60,000 milliunits; a third is rounded down")
    func plainPercentages() throws {
        var ledger = Ledger()
        ledger.buy("t1", 100)
        ledger.spend(60)
        #expect(try #require(ledger.consumption.lot(of: "t1")).consumptionMilliunits == 60_000)
        var third = Ledger()
        third.buy("t1", 3)
        third.spend(1)
        #expect(try #require(third.consumption.lot(of: "t1")).consumptionMilliunits == 33_333)
    }

    @Test("Grants are spent before purchases; a grant spent before buying is the sample the user had")
    func grantsFirst() throws {
        var ledger = Ledger()
        ledger.grant(10)
        ledger.buy("t1", 100)
        ledger.spend(30)
        let lot = try #require(ledger.consumption.lot(of: "t1"))
        #expect(lot.spent == 20 && lot.consumptionMilliunits == 20_000 && !lot.freeSpentBefore)

        var sampled = Ledger()
        sampled.grant(10)
        sampled.spend(5)
        sampled.buy("t1", 100)
        sampled.spend(25)
        let after = try #require(sampled.consumption.lot(of: "t1"))
        #expect(after.spent == 20 && after.freeSpentBefore)
    }

    @Test("Buy, spend, buy, spend: the first pack is used up before the second is touched")
    func buySpendBuySpend() throws {
        var ledger = Ledger()
        ledger.buy("t1", 100)
        ledger.spend(70)
        ledger.buy("t2", 100)
        ledger.spend(50)
        let consumption = ledger.consumption
        #expect(consumption.lot(of: "t1")?.consumptionMilliunits == 100_000)
        #expect(consumption.lot(of: "t2")?.consumptionMilliunits == 20_000)
    }

    @Test("A transaction of quantity 2 is one lot of both units: 50 of 200 tokens is 25,000")
    func quantityTwo() throws {
        var ledger = Ledger()
        ledger.buy("t1", 200)
        ledger.spend(50)
        #expect(ledger.consumption.lot(of: "t1")?.consumptionMilliunits == 25_000)
    }

    @Test("A hold's capture is a spend; holds, releases and expiries move nothing")
    func holds() throws {
        var ledger = Ledger()
        ledger.buy("t1", 100)
        ledger.add(.hold, 0)
        ledger.add(.capture, -30)
        ledger.add(.hold, 0)
        ledger.add(.release, 0)
        ledger.add(.expire, 0)
        ledger.add(.premium, 0)
        #expect(ledger.consumption.lot(of: "t1")?.spent == 30)
    }

    @Test("A refund of spent tokens leaves a debt the next pack pays first: that pack counts those tokens as spent")
    func refundThenDebt() throws {
        var ledger = Ledger()
        ledger.buy("t1", 100)
        ledger.spend(60)
        ledger.refund("t1", 100)
        var consumption = ledger.consumption
        #expect(consumption.lot(of: "t1") == PurchaseConsumption.Lot(transactionId: "t1", credited: 100, spent: 60, refunded: 40))
        #expect(consumption.debt == 60 && consumption.balance == -60)
        ledger.buy("t2", 100)
        consumption = ledger.consumption
        #expect(consumption.lot(of: "t2")?.spent == 60 && consumption.balance == 40)
    }

    @Test("A refund of spent tokens with other packs left takes from them, as a spend would")
    func refundTakesFromOthers() throws {
        var ledger = Ledger()
        ledger.buy("t1", 100)
        ledger.buy("t2", 100)
        ledger.spend(100)
        ledger.refund("t1", 100)
        let consumption = ledger.consumption
        #expect(consumption.lot(of: "t1")?.consumptionMilliunits == 100_000)
        #expect(consumption.lot(of: "t2")?.consumptionMilliunits == 100_000)
        #expect(consumption.balance == 0)
    }

    @Test("A reversed refund pays the debt, then gives the pack back what the refund took unspent")
    func reversal() throws {
        var ledger = Ledger()
        ledger.buy("t1", 100)
        ledger.spend(60)
        ledger.refund("t1", 100)
        ledger.add(.refundReversed, 100, "t1")
        let consumption = ledger.consumption
        #expect(consumption.lot(of: "t1")?.remaining == 40 && consumption.debt == 0 && consumption.balance == 40)
        var second = Ledger()
        second.buy("t1", 50)
        second.buy("t1x", 50)
        second.refund("t1", 50)
        second.refund("t1", 50)  // a second refund of the same transaction: `#2` in the ledger
        second.entries[second.entries.count - 1].reference = "t1#2"
        second.add(.refundReversed, 50, "t1#2")
        #expect(second.consumption.balance == second.balance)
    }

    @Test("A guest's packs come with it into the account, with what was spent of them")
    func merge() throws {
        var guest = Ledger()
        guest.buy("t1", 100)
        guest.spend(30)
        guest.add(.mergeOut, -70, "account")
        let handover = try #require(PurchaseConsumption(entries: guest.entries).handedOver)
        #expect(handover.balance == 70)

        var account = Ledger()
        account.grant(5)
        account.add(.mergeIn, 70, "guest")
        account.spend(50)
        let consumption = PurchaseConsumption(entries: account.entries, mergedIn: ["guest": handover])
        #expect(consumption.lot(of: "t1")?.spent == 75 && consumption.lot(of: "t1")?.consumptionMilliunits == 75_000)
        #expect(consumption.balance == account.balance)
        // Without the guest's ledger the merge arrives as a grant (spent first): the pack is not found here.
        #expect(PurchaseConsumption(entries: account.entries).lot(of: "t1") == nil)
    }

    @Test("On 2,000 random ledgers the lots always add up to the balance, and no pack is spent beyond what it brought")
    func randomLedgers() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var ledger = Ledger()
            var bought: [(String, Int64, refunded: Bool)] = []
            for step in 0..<Int.random(in: 1...40, using: &generator) {
                switch Int.random(in: 0..<10, using: &generator) {
                case 0...2:
                    let tokens = Int64.random(in: 1...200, using: &generator)
                    bought.append(("t\(step)", tokens, false))
                    ledger.buy("t\(step)", tokens)
                case 3: ledger.grant(Int64.random(in: 1...50, using: &generator))
                case 4:
                    if let index = bought.indices.filter({ !bought[$0].refunded }).randomElement(using: &generator) {
                        bought[index].refunded = true
                        ledger.refund(bought[index].0, bought[index].1)
                    }
                case 5:
                    if let index = bought.indices.filter({ bought[$0].refunded }).randomElement(using: &generator) {
                        bought[index].refunded = false
                        ledger.add(.refundReversed, bought[index].1, bought[index].0)
                    }
                case 6: ledger.add(.capture, -Int64.random(in: 0...max(0, ledger.balance), using: &generator))
                default:
                    if ledger.balance > 0 { ledger.spend(Int64.random(in: 1...ledger.balance, using: &generator)) }
                }
                let consumption = ledger.consumption
                #expect(consumption.balance == ledger.balance, "\(ledger.entries)")
                for lot in consumption.lots {
                    #expect(lot.spent >= 0 && lot.refunded >= 0 && lot.remaining >= 0 && lot.spent <= lot.credited)
                    #expect((0...100_000).contains(lot.consumptionMilliunits))
                }
                #expect(consumption.debt >= 0)
            }
        }
    }
}
