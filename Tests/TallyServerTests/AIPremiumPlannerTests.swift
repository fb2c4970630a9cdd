import Foundation
import TallyStore
import Testing

/// The ledger's rules for a premium AI call's hold (``PremiumHold``), as pure functions: who holds nothing, when a
/// quota use is taken, and when a release gives it back.
@Suite("AI premium holds (LedgerPlanner)", .timeLimit(.minutes(1)))
struct AIPremiumPlannerTests {
    /// 2027-01-15T08:00:00Z; the user's zone is UTC, so the day's window ends 16 hours later.
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let midnight = t0.addingTimeInterval(16 * 3600)

    static func snapshot(premium: Bool, balance: Int64 = 0, counter: QuotaCounter? = nil, hold: HoldRecord? = nil, installation: QuotaCounter? = nil) -> LedgerSnapshot {
        LedgerSnapshot(
            user: UserRecord(
                id: "u1", email: nil, timezone: "UTC", language: nil, premiumUntil: premium ? t0.addingTimeInterval(86_400) : nil, createdAt: t0),
            wallet: WalletState(balance: balance, held: 0, version: 3), hold: hold, counter: counter,
            installation: installation.map { InstallationCounters(id: "i1", counters: ["answers": $0]) })
    }

    static func hold(_ premium: PremiumHold?) -> Command {
        .createHold(userId: "u1", holdId: "h1", amount: 50, expiresAt: t0.addingTimeInterval(20 * 3600), note: "ai m", premium: premium)
    }

    static func refusal(_ command: Command, _ snapshot: LedgerSnapshot, now: Date = t0) -> StoreError.Code? {
        do {
            _ = try LedgerPlanner.plan(command, snapshot: snapshot, now: now)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("A premium user's hold on a free model holds 0 tokens at balance 0; anyone else's holds the amount")
    func free() throws {
        let plan = try LedgerPlanner.plan(Self.hold(.free), snapshot: Self.snapshot(premium: true), now: Self.t0)
        #expect(plan.newHold?.amount == 0 && plan.payment == .premium && plan.counter == nil)
        #expect(plan.entry == PlannedEntry(kind: .hold, amount: 0, heldChange: 0, reason: "h1 ai m (premium: free)"))
        #expect(Self.refusal(Self.hold(.free), Self.snapshot(premium: false)) == .insufficientTokens)
        let paid = try LedgerPlanner.plan(Self.hold(.free), snapshot: Self.snapshot(premium: false, balance: 50), now: Self.t0)
        #expect(paid.newHold?.amount == 50 && paid.payment == nil && paid.entry?.heldChange == 50)
        #expect(Self.refusal(Self.hold(nil), Self.snapshot(premium: true)) == .insufficientTokens, "premium: tokens")
    }

    @Test("A premium quota hold takes a use of the account and of a guest's installation, and refuses when either has none left")
    func quota() throws {
        let plan = try LedgerPlanner.plan(
            Self.hold(.quota("answers", limit: 2)), snapshot: Self.snapshot(premium: true, installation: QuotaCounter(used: 1, windowEnd: Self.midnight)),
            now: Self.t0)
        #expect(plan.newHold?.amount == 0 && plan.payment == .useQuota)
        #expect(plan.counter?.quota == "answers" && plan.counter?.value == QuotaCounter(used: 1, windowEnd: Self.midnight))
        #expect(plan.installationCounter?.value == QuotaCounter(used: 2, windowEnd: Self.midnight))
        let spent = QuotaCounter(used: 2, windowEnd: Self.midnight)
        #expect(Self.refusal(Self.hold(.quota("answers", limit: 2)), Self.snapshot(premium: true, counter: spent)) == .quotaExhausted)
        #expect(Self.refusal(Self.hold(.quota("answers", limit: 2)), Self.snapshot(premium: true, installation: spent)) == .quotaExhausted)
        // The next day's window has its uses again; someone not premium pays tokens and takes none.
        #expect(Self.refusal(Self.hold(.quota("answers", limit: 2)), Self.snapshot(premium: true, counter: spent), now: Self.midnight) == nil)
        let paid = try LedgerPlanner.plan(Self.hold(.quota("answers", limit: 2)), snapshot: Self.snapshot(premium: false, balance: 60), now: Self.t0)
        #expect(paid.counter == nil && paid.newHold?.amount == 50)
    }

    @Test("A release gives the use back to the window it was taken in while it is open, never to a later one")
    func giveBack() throws {
        let hold = HoldRecord(id: "h1", userId: "u1", amount: 0, status: .open, capturedAmount: nil, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(90_000))
        let use = QuotaUse(quota: "answers", windowEnd: Self.midnight, installationWindowEnd: Self.midnight)
        let release = Command.releaseHold(userId: "u1", holdId: "h1", note: "ai m failed", giveBack: use)
        let counter = QuotaCounter(used: 2, windowEnd: Self.midnight)
        let same = try LedgerPlanner.plan(release, snapshot: Self.snapshot(premium: true, counter: counter, hold: hold, installation: counter), now: Self.t0)
        #expect(same.counter?.value.used == 1 && same.installationCounter?.value.used == 1 && same.entry?.heldChange == 0)
        // The window ended: nothing to give back (the next window never had the use).
        let later = try LedgerPlanner.plan(
            release, snapshot: Self.snapshot(premium: true, counter: counter, hold: hold), now: Self.midnight.addingTimeInterval(60))
        #expect(later.counter == nil && later.settleHold?.status == .released)
        let next = QuotaCounter(used: 1, windowEnd: Self.midnight.addingTimeInterval(86_400))
        let moved = try LedgerPlanner.plan(
            release, snapshot: Self.snapshot(premium: true, counter: next, hold: hold), now: Self.midnight.addingTimeInterval(60))
        #expect(moved.counter == nil)
        // Without a use to give back, a release is as ever.
        let plain = try LedgerPlanner.plan(
            .releaseHold(userId: "u1", holdId: "h1"), snapshot: Self.snapshot(premium: true, counter: counter, hold: hold), now: Self.t0)
        #expect(plain.counter == nil)
    }
}
