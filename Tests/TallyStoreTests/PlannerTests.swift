import Foundation
import TallyStore
import Testing

/// The instant the pure tests plan at: 2027-01-15T08:00:00Z.
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)
private let reading = ActionSpec(name: "reading", quota: "readings", tokens: 5)
private let aiQuery = ActionSpec(name: "ai.query", tokens: 3)
private let freeOnly = ActionSpec(name: "horoscope", quota: "readings")

private func snapshot(
    balance: Int64, held: Int64 = 0, hold: HoldRecord? = nil, counter: QuotaCounter? = nil,
    timezone: String = "UTC", premiumUntil: Date? = nil
) -> LedgerSnapshot {
    LedgerSnapshot(
        user: UserRecord(id: "u1", email: nil, timezone: timezone, language: nil, premiumUntil: premiumUntil, createdAt: t0),
        wallet: WalletState(balance: balance, held: held, version: 7), hold: hold, counter: counter)
}

private func openHold(_ amount: Int64 = 30, status: HoldStatus = .open, expiresAt: Date = t0.addingTimeInterval(600))
    -> HoldRecord
{
    HoldRecord(
        id: "h1", userId: "u1", amount: amount, status: status, capturedAmount: status == .captured ? amount : nil,
        createdAt: t0.addingTimeInterval(-60), expiresAt: expiresAt)
}

/// The code `plan` refuses with, or `nil` when it plans.
private func refusal(_ command: Command, _ snapshot: LedgerSnapshot, now: Date = t0) -> StoreError.Code? {
    do {
        _ = try LedgerPlanner.plan(command, snapshot: snapshot, now: now)
        return nil
    } catch {
        return error.code
    }
}

@Suite("LedgerPlanner", .timeLimit(.minutes(1)))
struct PlannerTests {
    @Test func grantAppendsOneEntry() throws {
        let plan = try LedgerPlanner.plan(.grant(userId: "u1", amount: 25, reason: "promo"), snapshot: snapshot(balance: 10), now: t0)
        #expect(plan.entry == PlannedEntry(kind: .grant, amount: 25, heldChange: 0, reason: "promo"))
        #expect(plan.newHold == nil && plan.settleHold == nil && plan.counter == nil && plan.user == nil && plan.payment == nil)
        #expect(WalletState(balance: 10, held: 0, version: 7).applying(plan.entry!) == WalletState(balance: 35, held: 0, version: 8))
        #expect(refusal(.grant(userId: "u1", amount: Limits.maxAmount, reason: "max"), snapshot(balance: 0)) == nil)
    }

    @Test(arguments: [Int64(0), -1, Limits.maxAmount + 1])
    func grantRefusesAmountsOutOfRange(amount: Int64) {
        #expect(refusal(.grant(userId: "u1", amount: amount, reason: "x"), snapshot(balance: 10)) == .invalidInput)
    }

    @Test func createHoldNeedsAvailableTokens() throws {
        let expires = t0.addingTimeInterval(300)
        // 100 - 80 held = 20 available.
        #expect(
            refusal(.createHold(userId: "u1", holdId: "h2", amount: 21, expiresAt: expires), snapshot(balance: 100, held: 80))
                == .insufficientTokens)
        let plan = try LedgerPlanner.plan(
            .createHold(userId: "u1", holdId: "h2", amount: 20, expiresAt: expires), snapshot: snapshot(balance: 100, held: 80), now: t0)
        #expect(plan.entry == PlannedEntry(kind: .hold, amount: 0, heldChange: 20, reason: "h2"))
        #expect(
            plan.newHold
                == HoldRecord(id: "h2", userId: "u1", amount: 20, status: .open, capturedAmount: nil, createdAt: t0, expiresAt: expires))
        #expect(plan.settleHold == nil)
        #expect(WalletState(balance: 100, held: 80, version: 7).applying(plan.entry!).available == 0)
    }

    @Test func createHoldRefusesBadInput() {
        let later = t0.addingTimeInterval(60)
        #expect(refusal(.createHold(userId: "u1", holdId: "h", amount: 0, expiresAt: later), snapshot(balance: 10)) == .invalidInput)
        #expect(refusal(.createHold(userId: "u1", holdId: "h", amount: -5, expiresAt: later), snapshot(balance: 10)) == .invalidInput)
        #expect(refusal(.createHold(userId: "u1", holdId: "h", amount: 5, expiresAt: t0), snapshot(balance: 10)) == .invalidInput)
    }

    @Test func captureForLessReleasesTheRest() throws {
        let plan = try LedgerPlanner.plan(
            .captureHold(userId: "u1", holdId: "h1", amount: 12), snapshot: snapshot(balance: 100, held: 30, hold: openHold(30)), now: t0)
        #expect(plan.entry == PlannedEntry(kind: .capture, amount: -12, heldChange: -30, reason: "h1"))
        #expect(plan.settleHold?.status == .captured)
        #expect(plan.settleHold?.capturedAmount == 12)
        #expect(WalletState(balance: 100, held: 30, version: 7).applying(plan.entry!) == WalletState(balance: 88, held: 0, version: 8))
    }

    @Test(arguments: [Int64(0), 30])
    func captureWithinTheHoldIsAllowed(amount: Int64) throws {
        let plan = try LedgerPlanner.plan(
            .captureHold(userId: "u1", holdId: "h1", amount: amount), snapshot: snapshot(balance: 30, held: 30, hold: openHold(30)), now: t0
        )
        #expect(plan.entry == PlannedEntry(kind: .capture, amount: -amount, heldChange: -30, reason: "h1"))
        #expect(plan.settleHold?.capturedAmount == amount)
    }

    @Test(arguments: [Int64(31), -1])
    func captureOutsideTheHoldIsRefused(amount: Int64) {
        #expect(
            refusal(.captureHold(userId: "u1", holdId: "h1", amount: amount), snapshot(balance: 100, held: 30, hold: openHold(30)))
                == .invalidInput)
    }

    @Test func releaseReturnsTheHeldTokens() throws {
        let plan = try LedgerPlanner.plan(
            .releaseHold(userId: "u1", holdId: "h1"), snapshot: snapshot(balance: 50, held: 30, hold: openHold(30)), now: t0)
        #expect(plan.entry == PlannedEntry(kind: .release, amount: 0, heldChange: -30, reason: "h1"))
        #expect(plan.settleHold?.status == .released)
        #expect(plan.settleHold?.capturedAmount == nil)
    }

    @Test(arguments: [HoldStatus.captured, .released, .expired], [true, false])
    func settledHoldsCannotBeSettledAgain(status: HoldStatus, capture: Bool) {
        let command: Command = capture ? .captureHold(userId: "u1", holdId: "h1", amount: 1) : .releaseHold(userId: "u1", holdId: "h1")
        #expect(refusal(command, snapshot(balance: 50, held: 0, hold: openHold(30, status: status))) == .holdNotOpen)
    }

    @Test(arguments: [0.0, -1.0, -3600.0], [true, false])
    func openHoldPastItsExpiryIsNotOpen(secondsFromNow: TimeInterval, capture: Bool) {
        let hold = openHold(30, expiresAt: t0.addingTimeInterval(secondsFromNow))
        let command: Command = capture ? .captureHold(userId: "u1", holdId: "h1", amount: 1) : .releaseHold(userId: "u1", holdId: "h1")
        #expect(refusal(command, snapshot(balance: 50, held: 30, hold: hold)) == .holdNotOpen)
    }

    @Test func missingHoldIsNotFound() {
        #expect(refusal(.captureHold(userId: "u1", holdId: "h1", amount: 1), snapshot(balance: 50)) == .holdNotFound)
        #expect(refusal(.releaseHold(userId: "u1", holdId: "h1"), snapshot(balance: 50)) == .holdNotFound)
    }

    /// Whatever the hold's size: its expiry charges nothing, gives back every token the hold reserved (undoing the
    /// hold's opening, as releasing it would), and is recorded as the hold's expiry.
    @Test(arguments: [Int64(1), 30, Limits.maxAmount])
    func expiryReleasesTheWholeHold(amount: Int64) throws {
        let before = WalletState(balance: amount + 7, held: 0, version: 7)
        let hold = openHold(amount)
        let opening = try LedgerPlanner.plan(
            .createHold(userId: "u1", holdId: hold.id, amount: amount, expiresAt: hold.expiresAt), snapshot: snapshot(balance: before.balance),
            now: t0)
        let opened = before.applying(try #require(opening.entry))
        let expiry = LedgerPlanner.expiry(of: hold)
        let after = opened.applying(expiry)
        #expect(after.balance == before.balance, "an expired hold charges nothing")
        #expect(after.held == before.held && after.available == before.available, "held \(after.held), available \(after.available)")
        #expect(after.version == before.version + 2)
        let release = try #require(
            try LedgerPlanner.plan(
                .releaseHold(userId: "u1", holdId: hold.id), snapshot: snapshot(balance: opened.balance, held: opened.held, hold: hold), now: t0
            ).entry)
        #expect(expiry.amount == release.amount && expiry.heldChange == release.heldChange, "an expiry moves what a release would")
        #expect(expiry.kind == .expire && expiry.reason == hold.id)
    }

    /// Three free uses, then the token price, then 402; replays the plans on a simulated account.
    @Test func actionUsesQuotaThenTokensThenRefuses() throws {
        var state = snapshot(balance: 12)
        var payments: [ActionDecision] = []
        let nextMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600)  // 2027-01-16T00:00Z
        while true {
            let command = Command.performAction(userId: "u1", action: reading, quotaLimit: 3)
            if let code = refusal(command, state) {
                #expect(code == .insufficientTokens)
                break
            }
            let plan = try LedgerPlanner.plan(command, snapshot: state, now: t0)
            payments.append(try #require(plan.payment))
            if let counter = plan.counter {
                #expect(counter.quota == "readings")
                #expect(counter.value.windowEnd == nextMidnight)
                state.counter = counter.value
            }
            if let entry = plan.entry {
                #expect(entry == PlannedEntry(kind: .debit, amount: -5, heldChange: 0, reason: "reading"))
                state.wallet = state.wallet.applying(entry)
            }
            #expect(payments.count < 10)
        }
        #expect(payments == [.useQuota, .useQuota, .useQuota, .charge(5), .charge(5)])
        #expect(state.counter == QuotaCounter(used: 3, windowEnd: nextMidnight))
        #expect(state.wallet.balance == 2)
    }

    /// A guest's free use is charged to its installation too, and is free only while both have one left.
    @Test func guestUseIsChargedToItsInstallation() throws {
        let command = Command.performAction(userId: "u1", action: reading, quotaLimit: 3)
        let nextMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600)  // 2027-01-16T00:00Z
        // A new guest on an installation whose earlier guest used two of today's three.
        var state = snapshot(balance: 12)
        state.installation = InstallationCounters(id: "i1", counters: ["readings": QuotaCounter(used: 2, windowEnd: nextMidnight)])
        let plan = try LedgerPlanner.plan(command, snapshot: state, now: t0)
        #expect(plan.payment == .useQuota && plan.entry == nil)
        #expect(plan.counter?.value == QuotaCounter(used: 1, windowEnd: nextMidnight))
        let installation = try #require(plan.installationCounter)
        #expect(installation.installation == "i1" && installation.quota == "readings")
        #expect(installation.value == QuotaCounter(used: 3, windowEnd: nextMidnight))

        // The installation is spent although the guest itself used one: tokens.
        state.counter = plan.counter?.value
        state.installation?.counters["readings"] = installation.value
        let paid = try LedgerPlanner.plan(command, snapshot: state, now: t0)
        #expect(paid.payment == .charge(5) && paid.counter == nil && paid.installationCounter == nil)

        // A window of the installation that ended (at the last midnight) counts from zero again, in the guest's zone.
        state.installation?.counters["readings"] = QuotaCounter(used: 3, windowEnd: t0.addingTimeInterval(-8 * 3600))
        let renewed = try LedgerPlanner.plan(command, snapshot: state, now: t0)
        #expect(renewed.payment == .useQuota && renewed.installationCounter?.value == QuotaCounter(used: 1, windowEnd: nextMidnight))

        // Without an installation (a linked account), only the account counts.
        state.installation = nil
        let linked = try LedgerPlanner.plan(command, snapshot: state, now: t0)
        #expect(linked.payment == .useQuota && linked.counter?.value.used == 2 && linked.installationCounter == nil)
        // Premium counts nothing anywhere; token-only actions never touch a counter.
        state.installation = InstallationCounters(id: "i1", counters: [:])
        state.user.premiumUntil = t0.addingTimeInterval(60)
        let premium = try LedgerPlanner.plan(command, snapshot: state, now: t0)
        #expect(premium.payment == .premium && premium.counter == nil && premium.installationCounter == nil)
        let query = try LedgerPlanner.plan(.performAction(userId: "u1", action: aiQuery, quotaLimit: nil), snapshot: state, now: t0)
        #expect(query.payment == .charge(3) && query.installationCounter == nil)
    }

    @Test func freeUseCountsNoTokens() throws {
        let plan = try LedgerPlanner.plan(
            .performAction(userId: "u1", action: reading, quotaLimit: 3), snapshot: snapshot(balance: 0), now: t0)
        #expect(plan.payment == .useQuota)
        #expect(plan.entry == nil)
        #expect(plan.counter?.value.used == 1)
    }

    @Test func actionPaysFromAvailableNotBalance() {
        // Balance 10 but 8 held: 2 available, the price is 5.
        let exhausted = QuotaCounter(used: 3, windowEnd: t0.addingTimeInterval(3600))
        #expect(
            refusal(.performAction(userId: "u1", action: reading, quotaLimit: 3), snapshot(balance: 10, held: 8, counter: exhausted))
                == .insufficientTokens)
        #expect(
            refusal(.performAction(userId: "u1", action: aiQuery, quotaLimit: nil), snapshot(balance: 10, held: 8)) == .insufficientTokens)
    }

    @Test func quotaOnlyActionIsExhausted() throws {
        let exhausted = QuotaCounter(used: 3, windowEnd: t0.addingTimeInterval(3600))
        #expect(
            refusal(.performAction(userId: "u1", action: freeOnly, quotaLimit: 3), snapshot(balance: 1_000, counter: exhausted))
                == .quotaExhausted)
        let used2 = QuotaCounter(used: 2, windowEnd: t0.addingTimeInterval(3600))
        let plan = try LedgerPlanner.plan(
            .performAction(userId: "u1", action: freeOnly, quotaLimit: 3), snapshot: snapshot(balance: 0, counter: used2), now: t0)
        #expect(plan.payment == .useQuota)
        #expect(plan.counter?.value == QuotaCounter(used: 3, windowEnd: used2.windowEnd))
    }

    @Test func expiredCounterStartsANewWindow() throws {
        // The window ended at the last Tokyo midnight (2027-01-14T15:00Z); now is 17:00 JST: a fresh
        // window that ends at the next Tokyo midnight (2027-01-15T15:00Z).
        let expired = QuotaCounter(used: 3, windowEnd: t0.addingTimeInterval(-17 * 3600))
        let plan = try LedgerPlanner.plan(
            .performAction(userId: "u1", action: freeOnly, quotaLimit: 3),
            snapshot: snapshot(balance: 0, counter: expired, timezone: "Asia/Tokyo"),
            now: t0)
        #expect(plan.payment == .useQuota)
        #expect(plan.counter?.value == QuotaCounter(used: 1, windowEnd: t0.addingTimeInterval(7 * 3600)))
    }

    @Test func premiumMakesQuotaActionsFreeButStillChargesTokenOnlyActions() throws {
        let premium = t0.addingTimeInterval(86_400)
        let exhausted = QuotaCounter(used: 3, windowEnd: t0.addingTimeInterval(3600))
        for action in [reading, freeOnly] {
            let plan = try LedgerPlanner.plan(
                .performAction(userId: "u1", action: action, quotaLimit: 3),
                snapshot: snapshot(balance: 0, counter: exhausted, premiumUntil: premium), now: t0)
            #expect(plan.payment == .premium)
            #expect(plan.entry == nil)
            #expect(plan.counter == nil)
        }
        let charged = try LedgerPlanner.plan(
            .performAction(userId: "u1", action: aiQuery, quotaLimit: nil), snapshot: snapshot(balance: 10, premiumUntil: premium), now: t0)
        #expect(charged.payment == .charge(3))
        #expect(charged.entry == PlannedEntry(kind: .debit, amount: -3, heldChange: 0, reason: "ai.query"))
        #expect(
            refusal(.performAction(userId: "u1", action: aiQuery, quotaLimit: nil), snapshot(balance: 2, premiumUntil: premium))
                == .insufficientTokens)
        // Premium that ended at `now` is over.
        let lapsed = try LedgerPlanner.plan(
            .performAction(userId: "u1", action: reading, quotaLimit: 3), snapshot: snapshot(balance: 0, premiumUntil: t0), now: t0)
        #expect(lapsed.payment == .useQuota)
    }

    @Test func profileCommandsChangeOnlyTheUser() throws {
        let premium = try LedgerPlanner.plan(
            .setPremium(userId: "u1", until: t0.addingTimeInterval(60)), snapshot: snapshot(balance: 5), now: t0)
        #expect(premium.user?.premiumUntil == t0.addingTimeInterval(60))
        #expect(premium.entry == nil && premium.counter == nil && premium.payment == nil)
        let cleared = try LedgerPlanner.plan(
            .setPremium(userId: "u1", until: nil), snapshot: snapshot(balance: 5, premiumUntil: t0), now: t0)
        #expect(cleared.user?.premiumUntil == nil)

        var withLanguage = snapshot(balance: 5)
        withLanguage.user.language = "fr"
        let zone = try LedgerPlanner.plan(
            .updateProfile(userId: "u1", timezone: "Asia/Tokyo", language: nil), snapshot: withLanguage, now: t0)
        #expect(zone.user?.timezone == "Asia/Tokyo")
        #expect(zone.user?.language == "fr")
        let language = try LedgerPlanner.plan(.updateProfile(userId: "u1", timezone: nil, language: "de"), snapshot: withLanguage, now: t0)
        #expect(language.user?.timezone == "UTC")
        #expect(language.user?.language == "de")
        #expect(language.entry == nil)
    }
}

/// One row of the ``ActionDecision/decide(action:isPremium:quotaRemaining:available:)`` table.
struct DecisionCase: Sendable, CustomTestStringConvertible {
    var action: ActionSpec
    var isPremium: Bool
    var quotaRemaining: Int?
    var available: Int64
    var expected: ActionDecision

    var testDescription: String {
        "\(action.name) premium=\(isPremium) remaining=\(quotaRemaining.map(String.init) ?? "nil") available=\(available) → \(expected)"
    }

    static let all: [DecisionCase] = [
        DecisionCase(action: reading, isPremium: false, quotaRemaining: 1, available: 0, expected: .useQuota),
        DecisionCase(action: reading, isPremium: false, quotaRemaining: 0, available: 5, expected: .charge(5)),
        DecisionCase(action: reading, isPremium: false, quotaRemaining: 0, available: 4, expected: .insufficientTokens),
        DecisionCase(action: reading, isPremium: false, quotaRemaining: -2, available: 9, expected: .charge(5)),
        DecisionCase(action: reading, isPremium: false, quotaRemaining: nil, available: 5, expected: .charge(5)),
        DecisionCase(action: reading, isPremium: true, quotaRemaining: 0, available: 0, expected: .premium),
        DecisionCase(action: reading, isPremium: true, quotaRemaining: 3, available: 0, expected: .premium),
        DecisionCase(action: freeOnly, isPremium: false, quotaRemaining: 2, available: 0, expected: .useQuota),
        DecisionCase(action: freeOnly, isPremium: false, quotaRemaining: 0, available: 100, expected: .quotaExhausted),
        DecisionCase(action: freeOnly, isPremium: false, quotaRemaining: nil, available: 100, expected: .quotaExhausted),
        DecisionCase(action: freeOnly, isPremium: true, quotaRemaining: 0, available: 0, expected: .premium),
        DecisionCase(action: aiQuery, isPremium: false, quotaRemaining: nil, available: 3, expected: .charge(3)),
        DecisionCase(action: aiQuery, isPremium: false, quotaRemaining: 5, available: 3, expected: .charge(3)),
        DecisionCase(action: aiQuery, isPremium: true, quotaRemaining: nil, available: 3, expected: .charge(3)),
        DecisionCase(action: aiQuery, isPremium: true, quotaRemaining: nil, available: 2, expected: .insufficientTokens),
    ]
}

@Suite("ActionDecision", .timeLimit(.minutes(1)))
struct ActionDecisionTests {
    @Test(arguments: DecisionCase.all)
    func decide(_ row: DecisionCase) {
        let decision = ActionDecision.decide(
            action: row.action, isPremium: row.isPremium, quotaRemaining: row.quotaRemaining, available: row.available)
        #expect(decision == row.expected)
    }
}
