import TallyAPI
import TallyStore
import Testing

/// One ledger entry as the invariant check reads it: from a store's records or from the API's entries.
public struct LedgerLine: Sendable, Hashable {
    public var id: Int64
    public var amount: Int64
    public var heldChange: Int64
    public var balanceAfter: Int64
    /// The entry's kind (`grant`, `refund`, …); `nil` when unknown, which holds the books to the rule from before
    /// refunds: never below zero.
    public var kind: String?
    /// The App Store transaction of a purchase, refund or reversal, when known.
    public var reference: String?

    public init(id: Int64, amount: Int64, heldChange: Int64, balanceAfter: Int64, kind: String? = nil, reference: String? = nil) {
        self.id = id
        self.amount = amount
        self.heldChange = heldChange
        self.balanceAfter = balanceAfter
        self.kind = kind
        self.reference = reference
    }

    /// A row as a store returns it.
    public init(_ record: LedgerEntryRecord) {
        self.init(
            id: record.id, amount: record.amount, heldChange: record.heldChange, balanceAfter: record.balanceAfter,
            kind: record.kind.rawValue, reference: record.reference)
    }

    /// An entry as `GET /v1/wallet/entries` returns it.
    public init(_ entry: LedgerEntry) {
        self.init(id: entry.id, amount: entry.amount, heldChange: entry.heldChange, balanceAfter: entry.balanceAfter, kind: entry.kind)
    }
}

/// The invariants of one account's books, whichever store wrote them and however they were read (from the store
/// in the conformance suite, over HTTP in the server tests). Pure, so each rule is tested on hand-made books.
public enum LedgerInvariants {
    /// Every broken invariant of a wallet and all its entries (in any order; empty when the books hold):
    /// - replayed in id order, each entry's `balanceAfter` is the sum of the amounts up to it, and no entry leaves
    ///   a held amount below zero, nor less than nothing available (`balance - held < 0`) — unless it is a refund, or
    ///   (refunds being what puts a wallet there) an entry that does not lower what is available;
    /// - the amounts sum to the balance, the held changes to the held amount;
    /// - the held amount is never negative, and what is available is negative only after a refund;
    /// - one version per entry, and no entry twice;
    /// - per transaction (`reference`): at most one purchase; refunds and reversals alternate, each refund after the
    ///   purchase and taking back no more than it credited, each reversal after its own refund (the same reference:
    ///   the transaction, `#n` after it for its n-th refund), crediting exactly what that refund took.
    ///
    /// Books with an entry of unknown kind are held to the rule from before refunds: the balance never below zero,
    /// the held amount within `0...balance`, on the way and at the end.
    public static func violations(balance: Int64, held: Int64, version: Int64, entries: [LedgerLine]) -> [String] {
        var problems: [String] = []
        let kinded = !entries.isEmpty && entries.allSatisfy { $0.kind != nil }
        var (runningBalance, runningHeld) = (Int64(0), Int64(0))
        var previous: Int64?
        var refunded = false
        var moved: [String: Moved] = [:]  // transaction → what its entries did
        for entry in entries.sorted(by: { $0.id < $1.id }) {
            if entry.id == previous { problems.append("entry \(entry.id) appears twice") }
            previous = entry.id
            runningBalance += entry.amount
            runningHeld += entry.heldChange
            if entry.balanceAfter != runningBalance {
                problems.append("entry \(entry.id) says balance \(entry.balanceAfter) after it, the entries up to it sum to \(runningBalance)")
            }
            if kinded {
                refunded = refunded || entry.kind == "refund"
                let lowers = entry.amount < entry.heldChange
                if runningHeld < 0 || (runningHeld > runningBalance && entry.kind != "refund" && lowers) {
                    problems.append("entry \(entry.id) leaves balance \(runningBalance) held \(runningHeld)")
                }
                if let kind = entry.kind, let reference = entry.reference, ["purchase", "refund", "refund_reversed"].contains(kind) {
                    problems += once(entry, kind: kind, reference: reference, &moved)
                }
            } else if runningBalance < 0 || runningHeld < 0 || runningHeld > runningBalance {
                problems.append("entry \(entry.id) leaves balance \(runningBalance) held \(runningHeld)")
            }
        }
        if runningBalance != balance { problems.append("entries sum to \(runningBalance), the wallet's balance is \(balance)") }
        if runningHeld != held { problems.append("held changes sum to \(runningHeld), the wallet's held amount is \(held)") }
        if kinded {
            if held < 0 { problems.append("held \(held) below 0") }
            if held > balance && !refunded { problems.append("held \(held) above the balance \(balance) without a refund") }
        } else {
            if balance < 0 { problems.append("negative balance \(balance)") }
            if held < 0 || held > balance { problems.append("held \(held) outside 0...\(balance)") }
        }
        if Int64(entries.count) != version { problems.append("\(entries.count) entries, wallet version \(version): one version per entry") }
        return problems
    }

    /// What one transaction's entries did so far (``once(_:kind:reference:_:)``).
    private struct Moved {
        /// What its purchase entry credited.
        var credited: Int64?
        /// The refund not reversed yet: its reference and what it took back.
        var standing: (reference: String, taken: Int64)?
        /// `<kind> <reference>` of each entry seen.
        var seen: Set<String> = []
    }

    /// The purchase, refunds and reversals of one transaction (a refund's reference is the transaction, `#n` after it
    /// for its n-th refund from the second; its reversal's the same): the purchase once; each refund once, after the
    /// purchase, no more than it credited, and only once the refund before was reversed; each reversal once, right
    /// after its own refund, crediting what that refund took.
    private static func once(_ entry: LedgerLine, kind: String, reference: String, _ moved: inout [String: Moved]) -> [String] {
        var problems: [String] = []
        let transaction = String(reference.prefix { $0 != "#" })
        var books = moved[transaction, default: Moved()]
        if !books.seen.insert(kind + " " + reference).inserted { problems.append("\(reference) has a second \(kind) entry (\(entry.id))") }
        switch kind {
        case "purchase":
            books.credited = entry.amount
        case "refund":
            if let credited = books.credited {
                if -entry.amount > credited { problems.append("refund \(entry.id) takes back \(-entry.amount) of \(credited) credited") }
            } else {
                problems.append("refund \(entry.id) of \(reference) comes before any purchase of it")
            }
            if books.standing != nil { problems.append("refund \(entry.id) of \(reference) comes before the refund standing was reversed") }
            books.standing = (reference, -entry.amount)
        case "refund_reversed":
            if let standing = books.standing, standing.reference == reference {
                if entry.amount != standing.taken { problems.append("reversal \(entry.id) credits \(entry.amount), its refund took \(standing.taken)") }
            } else {
                problems.append("reversal \(entry.id) of \(reference) comes before any refund of it to reverse")
            }
            books.standing = nil
        default: break
        }
        moved[transaction] = books
        return problems
    }

    /// The broken invariants of a store's wallet and every entry of its account.
    public static func violations(_ wallet: WalletState, _ entries: [LedgerEntryRecord]) -> [String] {
        violations(balance: wallet.balance, held: wallet.held, version: wallet.version, entries: entries.map(LedgerLine.init))
    }

    /// The broken invariants of the API's wallet and every entry of its account.
    public static func violations(_ wallet: Wallet, _ entries: [LedgerEntry]) -> [String] {
        violations(balance: wallet.balance, held: wallet.held, version: wallet.version, entries: entries.map(LedgerLine.init))
    }
}

/// Records an issue for each broken ledger invariant of a store's account (see ``LedgerInvariants``), prefixed
/// with `label` (e.g. "[postgres] user 1a2b…").
public func expectLedgerInvariants(
    _ wallet: WalletState, _ entries: [LedgerEntryRecord], _ label: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    record(LedgerInvariants.violations(wallet, entries), label, sourceLocation)
}

/// Records an issue for each broken ledger invariant of an account read over HTTP (see ``LedgerInvariants``).
public func expectLedgerInvariants(
    _ wallet: Wallet, _ entries: [LedgerEntry], _ label: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    record(LedgerInvariants.violations(wallet, entries), label, sourceLocation)
}

private func record(_ violations: [String], _ label: String, _ sourceLocation: SourceLocation) {
    for violation in violations { Issue.record(Comment(rawValue: "\(label): \(violation)"), sourceLocation: sourceLocation) }
}
