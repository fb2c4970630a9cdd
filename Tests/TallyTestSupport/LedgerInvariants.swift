import TallyAPI
import TallyStore
import Testing

/// One ledger entry as the invariant check reads it: from a store's records or from the API's entries.
public struct LedgerLine: Sendable, Hashable {
    public var id: Int64
    public var amount: Int64
    public var heldChange: Int64
    public var balanceAfter: Int64

    public init(id: Int64, amount: Int64, heldChange: Int64, balanceAfter: Int64) {
        self.id = id
        self.amount = amount
        self.heldChange = heldChange
        self.balanceAfter = balanceAfter
    }

    /// A row as a store returns it.
    public init(_ record: LedgerEntryRecord) {
        self.init(id: record.id, amount: record.amount, heldChange: record.heldChange, balanceAfter: record.balanceAfter)
    }

    /// An entry as `GET /v1/wallet/entries` returns it.
    public init(_ entry: LedgerEntry) {
        self.init(id: entry.id, amount: entry.amount, heldChange: entry.heldChange, balanceAfter: entry.balanceAfter)
    }
}

/// The invariants of one account's books, whichever store wrote them and however they were read (from the store
/// in the conformance suite, over HTTP in the server tests). Pure, so each rule is tested on hand-made books.
public enum LedgerInvariants {
    /// Every broken invariant of a wallet and all its entries (in any order; empty when the books hold):
    /// - replayed in id order, each entry's `balanceAfter` is the sum of the amounts up to it, and no entry leaves
    ///   a negative balance or a held amount outside `0...balance`;
    /// - the amounts sum to the balance, the held changes to the held amount;
    /// - the balance is never negative, the held amount within `0...balance`;
    /// - one version per entry, and no entry twice.
    public static func violations(balance: Int64, held: Int64, version: Int64, entries: [LedgerLine]) -> [String] {
        var problems: [String] = []
        var (runningBalance, runningHeld) = (Int64(0), Int64(0))
        var previous: Int64?
        for entry in entries.sorted(by: { $0.id < $1.id }) {
            if entry.id == previous { problems.append("entry \(entry.id) appears twice") }
            previous = entry.id
            runningBalance += entry.amount
            runningHeld += entry.heldChange
            if entry.balanceAfter != runningBalance {
                problems.append("entry \(entry.id) says balance \(entry.balanceAfter) after it, the entries up to it sum to \(runningBalance)")
            }
            if runningBalance < 0 || runningHeld < 0 || runningHeld > runningBalance {
                problems.append("entry \(entry.id) leaves balance \(runningBalance) held \(runningHeld)")
            }
        }
        if runningBalance != balance { problems.append("entries sum to \(runningBalance), the wallet's balance is \(balance)") }
        if runningHeld != held { problems.append("held changes sum to \(runningHeld), the wallet's held amount is \(held)") }
        if balance < 0 { problems.append("negative balance \(balance)") }
        if held < 0 || held > balance { problems.append("held \(held) outside 0...\(balance)") }
        if Int64(entries.count) != version { problems.append("\(entries.count) entries, wallet version \(version): one version per entry") }
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
