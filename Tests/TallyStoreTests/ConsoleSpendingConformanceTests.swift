import Foundation
import TallyStore
import Testing

/// The overview's spending groups (issue 43, finding 14) as both stores compute them in SQL: an AI call's capture (or
/// the debit of one whose hold expired) counts under its model, a wallet-API hold's capture under one group, anything
/// else under its reason — exactly as ``SpendingGroup/of(kind:reason:)`` says, for every reason a ledger can hold.
extension ConsoleConformanceTests {
    @Test("overview: AI calls grouped by model, wallet-API holds in one group, the SQL as SpendingGroup.of says", arguments: StoreKind.allCases)
    func spendingGroups(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let console = try Self.console(f)
            let user = try await f.newUser(tokens: 100_000)
            let since = f.now
            var expected: [String: ReasonTotal] = [:]
            var amount: Int64 = 0
            func spent(_ kind: EntryKind, _ reason: String, _ tokens: Int64) {
                let group = SpendingGroup.of(kind: kind, reason: reason)!
                expected[group, default: ReasonTotal(reason: group, entries: 0, tokens: 0)].entries += 1
                expected[group]!.tokens += tokens
            }
            /// A hold captured with `note` (nil: none, as the wallet API's), `tokens` charged.
            func capture(_ holdId: String, note: String?) async throws {
                amount += 1
                try await f.run(.createHold(userId: user, holdId: holdId, amount: 100, expiresAt: f.now.addingTimeInterval(600), note: note.map { _ in "held" }))
                try await f.run(.captureHold(userId: user, holdId: holdId, amount: amount, note: note))
                spent(.capture, note.map { holdId + " " + $0 } ?? holdId, amount)
            }
            let id = { UUID().uuidString.lowercased() }
            for model in ["chat", "chat", "chat", "gpt-4o-mini", "模型-ü", "gpt-4o-mini"] {
                try await capture(id(), note: "ai \(model) prompt=12 completion=30")
            }
            try await capture(id(), note: "ai chat prompt=1 completion=1 (estimated)")
            try await capture(id(), note: "ai chat")  // the model, then the end
            try await capture(id(), note: nil)
            try await capture(id(), note: nil)
            try await capture("short-id", note: "ai chat prompt=1 completion=1")  // no 36-character hold id before it: not an AI call
            try await capture(id(), note: "ai  prompt=1")  // an empty model name is a group of its own
            // A charge after an expired hold, as the gateway writes it, and actions.
            for name in ["\(id()) ai chat prompt=3 completion=4 (after its hold expired)", "reading", "reading", "x ai chat", "ai chat"] {
                amount += 1
                try await f.run(.performAction(userId: user, action: ActionSpec(name: name, tokens: amount), quotaLimit: nil))
                spent(.debit, name, amount)
            }
            let totals = PeriodTotals.sum(try await console.hourlyTotals(from: since, to: .distantFuture), since: since, reasons: 100)
            #expect(totals.topReasons == expected.values.sorted(by: ReasonTotal.mostTokensFirst), "[\(kind)]")
            #expect(Set(totals.topReasons.map(\.reason)).isSuperset(of: ["AI chat", "AI gpt-4o-mini", "AI 模型-ü", SpendingGroup.walletHolds, "reading"]), "[\(kind)]")
            #expect(totals.topReasons.first { $0.reason == "AI chat" }?.entries == 6, "[\(kind)]: five captures and the expired one")
        }
    }
}
