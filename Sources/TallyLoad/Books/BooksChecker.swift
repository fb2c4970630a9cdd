import Foundation
import TallyAPI

/// One account as the server reports it after the run.
public struct ServerBooks: Sendable, Hashable {
    /// The wallet.
    public var wallet: Wallet
    /// The quota counters of the current window.
    public var quotas: [Quota]
    /// Every ledger entry, newest first.
    public var entries: [LedgerEntry]

    /// Creates the books of one account.
    public init(wallet: Wallet, quotas: [Quota], entries: [LedgerEntry]) {
        self.wallet = wallet
        self.quotas = quotas
        self.entries = entries
    }
}

/// A broken invariant, found by ``BooksChecker``.
public struct Violation: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The account.
    public var userId: String
    /// What is wrong.
    public var message: String
    /// `user: message`.
    public var description: String { "\(userId): \(message)" }
}

/// Compares what the tool saw with what the server's ledger holds. Pure: no I/O, so it is tested on
/// hand-made books that break each rule.
public enum BooksChecker {
    /// Every violation for one account (empty when its books balance).
    public static func check(_ expected: ExpectedBooks, against books: ServerBooks, prices: PriceList) -> [Violation] {
        var problems: [String] = []
        let wallet = books.wallet
        let entries = books.entries

        // The ledger sums to the wallet, which is never negative and never holds more than it owns.
        if entries.reduce(0, { $0 + $1.amount }) != wallet.balance { problems.append("entries do not sum to the balance") }
        if entries.reduce(0, { $0 + $1.heldChange }) != wallet.held { problems.append("entries do not sum to the held amount") }
        if wallet.balance < 0 { problems.append("negative balance \(wallet.balance)") }
        if wallet.held < 0 || wallet.held > wallet.balance { problems.append("held \(wallet.held) outside 0...\(wallet.balance)") }

        // Every grant the tool saw succeed is there exactly once, and no other.
        let grants = entries.filter { $0.kind == "grant" }
        let grantReasons = Dictionary(grouping: grants, by: { $0.reason ?? "" })
        for (reason, amount) in expected.grants {
            let found = grantReasons[reason] ?? []
            if found.count != 1 || found.first?.amount != amount {
                problems.append("grant \(reason) of \(amount) appears \(found.count) times")
            }
        }
        for (reason, amount) in expected.uncertainGrants {
            let found = grantReasons[reason] ?? []
            if found.count > 1 || found.contains(where: { $0.amount != amount }) {
                problems.append("unanswered grant \(reason) appears \(found.count) times")
            }
        }
        for reason in grantReasons.keys where expected.grants[reason] == nil && expected.uncertainGrants[reason] == nil {
            problems.append("unexpected grant \(reason)")
        }

        // Token-paid actions: each success charged once at its price; an uncertain one at most once.
        let debits = Dictionary(grouping: entries.filter { $0.kind == "debit" }, by: { $0.reason ?? "" })
        for name in Set(debits.keys).union(expected.debits.keys).union(expected.uncertain.keys) {
            let found = debits[name] ?? []
            let known = expected.debits[name] ?? 0
            let most = known + (expected.uncertain[name] ?? 0)
            if found.count < known || found.count > most {
                problems.append("action \(name): \(found.count) debits, expected \(known == most ? "\(known)" : "\(known)...\(most)")")
            }
            if let price = prices.tokens[name], found.contains(where: { $0.amount != -price }) {
                problems.append("action \(name) debited at a price other than \(price)")
            } else if prices.tokens[name] == nil, !found.isEmpty {
                problems.append("action \(name) has no token price but was debited")
            }
        }

        // Holds: each one the tool opened has one hold entry and ends as the tool saw; a refused one left nothing.
        let holdEntries = Dictionary(grouping: entries.filter { ["hold", "capture", "release", "expire"].contains($0.kind) }, by: { $0.reason ?? "" })
        for (id, fate) in expected.holds {
            let found = holdEntries[id] ?? []
            let opened = found.filter { $0.kind == "hold" }
            let settled = found.filter { $0.kind != "hold" }
            switch fate {
            case .open(let amount):
                if opened.count != 1 || opened[0].heldChange != amount || settled.count > 1 {
                    problems.append("open hold \(id) has \(opened.count) hold and \(settled.count) settling entries")
                }
            case .captured(let amount, let charged):
                if opened.count != 1 || opened[0].heldChange != amount || settled.count != 1 || settled[0].kind != "capture"
                    || settled[0].amount != -charged || settled[0].heldChange != -amount
                {
                    problems.append("hold \(id) captured for \(charged) of \(amount) is not in the ledger exactly once")
                }
            case .unknown(let amount):
                if opened.count != 1 || opened[0].heldChange != amount || settled.count > 1
                    || settled.contains(where: { $0.heldChange != -amount || $0.amount > 0 || $0.amount < -amount })
                {
                    problems.append("hold \(id) with an unanswered settlement is not in the ledger at most once")
                }
            case .released(let amount):
                if opened.count != 1 || opened[0].heldChange != amount || settled.count != 1 || settled[0].amount != 0
                    || settled[0].heldChange != -amount
                {
                    problems.append("hold \(id) released is not in the ledger exactly once")
                }
            }
        }
        // Holds the tool never heard back about: at most as many as it tried, each opened once and settled at most once.
        let strangers = holdEntries.filter { expected.holds[$0.key] == nil }
        for (id, found) in strangers {
            let opened = found.filter { $0.kind == "hold" }
            if strangers.count > expected.uncertainHolds || opened.count != 1 || found.count > 2 {
                problems.append("unexpected hold entries for \(id)")
            }
        }

        // Nothing else: the only kinds of entry are the ones above.
        let known: Set<String> = ["grant", "debit", "hold", "capture", "release", "expire"]
        for entry in entries where !known.contains(entry.kind) { problems.append("unexpected \(entry.kind) entry \(entry.id)") }

        // balance = grants − token charges − captured holds (where the tool has no answer, what the ledger
        // holds, already checked above to be at most once and within bounds).
        let granted = expected.grants.values.reduce(0, +)
            + grants.filter { expected.uncertainGrants[$0.reason ?? ""] != nil }.reduce(0) { $0 + $1.amount }
        let debited = entries.filter { $0.kind == "debit" }.reduce(0) { $0 - $1.amount }
        let captured = entries.filter { $0.kind == "capture" }.reduce(Int64(0)) { sum, entry in
            if case .captured(_, let charged) = expected.holds[entry.reason ?? ""] { return sum + charged }
            return sum - entry.amount
        }
        if wallet.balance != granted - debited - captured {
            problems.append("balance \(wallet.balance) ≠ grants \(granted) − debits \(debited) − captures \(captured)")
        }

        // Free quota: never above the daily limit, and the current window's count is what the tool saw.
        for (quota, windows) in expected.quotaUses {
            let limit = prices.dailyLimit[quota] ?? 0
            for (end, uses) in windows where uses > limit {
                problems.append("quota \(quota): \(uses) free uses in the window ending \(end), limit \(limit)")
            }
        }
        for quota in books.quotas where !quota.unlimited {
            if quota.used > quota.limit { problems.append("quota \(quota.name): used \(quota.used) > limit \(quota.limit)") }
            let seen = expected.quotaUses[quota.name]?[quota.resetsAt] ?? 0
            let uncertain = expected.uncertain.filter { prices.quota[$0.key] == quota.name }.values.reduce(0, +)
            if quota.used < seen || quota.used > seen + uncertain {
                problems.append("quota \(quota.name): server counts \(quota.used) uses, the tool saw \(seen)")
            }
        }
        if expected.unsettled > 0 { problems.append("\(expected.unsettled) requests never got a definitive answer") }
        return problems.map { Violation(userId: expected.userId, message: $0) }
    }
}
