import Foundation

/// How much of each App Store purchase an account spent, read from its ledger: what Tally answers Apple's consumption
/// requests with (`consumptionPercentage`, `sampleContentProvided`; docs/purchases.md, "Refund defense").
///
/// **The rule.** Tokens arrive in lots: one per purchase (all of a transaction's units together), one per grant, and a
/// merged guest's lots as its own ledger left them. A spend — a metered debit, a hold's capture, a negative grant —
/// takes from the grants first, oldest first, then from the purchases in the order they were credited: first bought,
/// first spent. A refund takes back what is left of its purchase's lot; the tokens of it already spent stay spent,
/// and the balance they leave owing is taken like a spend from the other lots, or, when there are none, owed: the next
/// tokens to arrive pay that debt before anything else and count as spent (they paid for tokens the user had used). A
/// reversed refund arrives again in its purchase's lot. A merge hands every lot, with what was spent of it, and any debt
/// to the account.
///
/// The rule is exact on the integers of the ledger: a purchase's percentage is `spent × 100,000 ÷ credited` rounded
/// down (milliunits, as Apple counts them), 60,000 for 60 of 100 tokens spent.
public struct PurchaseConsumption: Sendable, Hashable {
    /// One lot of tokens, as the ledger left it.
    public struct Lot: Sendable, Hashable {
        /// The App Store transaction it was bought in; nil for a grant's.
        public var transactionId: String?
        /// The tokens it brought.
        public var credited: Int64
        /// The tokens of it spent (or paying a debt).
        public var spent: Int64 = 0
        /// The tokens of it a refund took back unspent (zero again once the refund is reversed).
        public var refunded: Int64 = 0
        /// Whether a spend took from a grant before this lot arrived: the user had free uses before buying.
        public var freeSpentBefore = false

        /// What is left of it to spend.
        public var remaining: Int64 { credited - spent - refunded }

        /// The share of it spent, in milliunits (0–100,000), rounded down; 0 for a lot that brought nothing.
        public var consumptionMilliunits: Int {
            guard credited > 0 else { return 0 }
            let product = min(credited, max(0, spent)).multipliedFullWidth(by: 100_000)
            return Int(credited.dividingFullWidth(product).quotient)
        }

        /// Creates a lot.
        public init(transactionId: String?, credited: Int64, spent: Int64 = 0, refunded: Int64 = 0, freeSpentBefore: Bool = false) {
            self.transactionId = transactionId
            self.credited = credited
            self.spent = spent
            self.refunded = refunded
            self.freeSpentBefore = freeSpentBefore
        }
    }

    /// Every lot, in the order it arrived (a merged guest's where its merge came).
    public private(set) var lots: [Lot] = []
    /// Tokens owed: spent beyond every lot (a refund of spent tokens), paid by the next to arrive.
    public private(set) var debt: Int64 = 0
    /// Whether anything was ever spent from a grant.
    private var freeSpent = false

    /// The lots of the ledger `entries` (any order: they are taken by id); `mergedIn` is what each merged guest (by
    /// the guest's id, a `merge_in` entry's reference) handed over: its ``handedOver``. A merge whose guest is not in
    /// `mergedIn` arrives as a grant.
    public init(entries: [LedgerEntryRecord], mergedIn: [String: Handover] = [:]) {
        for entry in entries.sorted(by: { $0.id < $1.id }) { apply(entry, mergedIn: mergedIn) }
    }

    /// The lot of `transactionId`, if its purchase is in this ledger (or was merged into it).
    public func lot(of transactionId: String) -> Lot? { lots.first { $0.transactionId == transactionId } }

    /// What a guest's ledger handed over at its merge: its lots as they were then, and its debt.
    public struct Handover: Sendable, Hashable {
        /// The lots, with what was spent of each.
        public var lots: [Lot]
        /// The debt the account took over.
        public var debt: Int64
        /// Whether the guest had spent from a grant.
        public var freeSpent: Bool
        /// The tokens handed over: the `merge_in` entry's amount.
        public var balance: Int64 { lots.reduce(0) { $0 + $1.remaining } - debt }
    }

    /// What this ledger handed over at its merge (a guest's), nil when it was not merged.
    public private(set) var handedOver: Handover?

    private mutating func apply(_ entry: LedgerEntryRecord, mergedIn: [String: Handover]) {
        switch entry.kind {
        case .purchase:
            arrive(Lot(transactionId: entry.reference ?? "", credited: entry.amount, freeSpentBefore: freeSpent))
        case .grant:
            if entry.amount >= 0 { arrive(Lot(transactionId: nil, credited: entry.amount)) } else { spend(-entry.amount) }
        case .debit, .capture:
            spend(-entry.amount)
        case .refund:
            refund(Self.transaction(of: entry.reference), -entry.amount)
        case .refundReversed:
            reverse(Self.transaction(of: entry.reference), entry.amount)
        case .mergeOut:
            handedOver = Handover(lots: lots, debt: debt, freeSpent: freeSpent)
            lots = lots.map { lot in
                var gone = lot
                gone.refunded = lot.credited - lot.spent  // nothing left here: its remainder went with the merge
                return gone
            }
            debt = 0
        case .mergeIn:
            if let guest = entry.reference.flatMap({ mergedIn[$0] }), guest.balance == entry.amount {
                for lot in guest.lots where lot.transactionId != nil || lot.remaining > 0 { lots.append(lot) }
                spend(guest.debt)
                freeSpent = freeSpent || guest.freeSpent
            } else if entry.amount >= 0 {
                arrive(Lot(transactionId: nil, credited: entry.amount))
            } else {
                spend(-entry.amount)
            }
        case .hold, .release, .expire, .premium:
            break  // no tokens move (a hold's charge is its capture)
        }
    }

    /// A refund's or reversal's reference is its transaction's id, with `#n` after the n-th refund from the second.
    private static func transaction(of reference: String?) -> String {
        guard let reference else { return "" }
        return String(reference.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// `lot` arrives: it pays the debt first.
    private mutating func arrive(_ lot: Lot) {
        var lot = lot
        let paid = min(debt, max(0, lot.credited))
        lot.spent += paid
        debt -= paid
        lots.append(lot)
    }

    /// `amount` spent: from the grants, oldest first, then the purchases in the order bought; the rest is owed.
    private mutating func spend(_ amount: Int64) {
        guard amount > 0 else { return }
        var left = amount
        for pass in [true, false] {  // grants, then purchases
            for index in lots.indices where left > 0 && (lots[index].transactionId == nil) == pass {
                let taken = min(left, max(0, lots[index].remaining))
                guard taken > 0 else { continue }
                lots[index].spent += taken
                left -= taken
                if pass { freeSpent = true }
            }
        }
        debt += left
    }

    /// `transactionId` refunded `amount` tokens: its lot's remainder taken back; the spent part owed like a spend.
    private mutating func refund(_ transactionId: String, _ amount: Int64) {
        guard amount > 0 else { return }
        var owed = amount
        if let index = lots.lastIndex(where: { $0.transactionId == transactionId }) {
            let taken = min(owed, max(0, lots[index].remaining))
            lots[index].refunded += taken
            owed -= taken
        }
        spend(owed)
    }

    /// A refund of `transactionId` reversed: `amount` arrives again. It pays any debt first, then gives the lot back
    /// what the refund took of it unspent; the rest (what the refund had taken from other lots) arrives as a grant.
    private mutating func reverse(_ transactionId: String, _ amount: Int64) {
        guard amount > 0 else { return }
        let paid = min(debt, amount)
        debt -= paid
        var rest = amount - paid
        if let index = lots.lastIndex(where: { $0.transactionId == transactionId }) {
            let restored = min(rest, lots[index].refunded)
            lots[index].refunded -= restored
            rest -= restored
        }
        if rest > 0 { lots.append(Lot(transactionId: nil, credited: rest)) }
    }

    /// What is left to spend, less the debt: the balance the ledger shows, whatever happened (the rule's invariant).
    public var balance: Int64 { lots.reduce(0) { $0 + $1.remaining } - debt }
}
