import Foundation
import TallyStore
import Testing

/// 2027-01-15T08:00:00Z, and the next UTC midnight.
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)
private let midnight = Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600)
/// An instant between two milliseconds, as a time zone's arithmetic or a client's date can give.
private let midnightAndABit = midnight.addingTimeInterval(0.000_4)
private let reading = ActionSpec(name: "reading", quota: "readings", tokens: 5)
private let aiQuery = ActionSpec(name: "ai.query", tokens: 3)
private let freeOnly = ActionSpec(name: "horoscope", quota: "readings")

private func account(
    balance: Int64, held: Int64 = 0, counters: [String: QuotaCounter] = [:], installation: InstallationCounters? = nil,
    premiumUntil: Date? = nil
) -> AccountState {
    AccountState(
        user: UserRecord(id: "u1", email: nil, timezone: "UTC", language: nil, premiumUntil: premiumUntil, createdAt: t0),
        wallet: WalletState(balance: balance, held: held, version: 7), counters: counters, installation: installation)
}

private func hold(_ id: String = "h1", amount: Int64 = 30) -> HoldRecord {
    HoldRecord(
        id: id, userId: "u1", amount: amount, status: .open, capturedAmount: nil, createdAt: t0.addingTimeInterval(-60),
        expiresAt: t0.addingTimeInterval(600))
}

/// One command of every kind (and every kind of action).
private let everyCommand: [Command] = [
    .grant(userId: "u1", amount: 25, reason: "promo"),
    .createHold(userId: "u1", holdId: "h2", amount: 10, expiresAt: t0.addingTimeInterval(600)),
    .captureHold(userId: "u1", holdId: "h1", amount: 12),
    .releaseHold(userId: "u1", holdId: "h1"),
    .performAction(userId: "u1", action: reading, quotaLimit: 3),
    .performAction(userId: "u1", action: aiQuery, quotaLimit: nil),
    .performAction(userId: "u1", action: freeOnly, quotaLimit: 3),
    .setPremium(userId: "u1", until: t0.addingTimeInterval(60)),
    .updateProfile(userId: "u1", timezone: "Europe/Paris", language: "fr"),
]

/// Accounts that make each command plan each way it can: rich or poor, with or without the hold, with the
/// quota open or spent, premium or not.
private let everyAccount: [(AccountState, HoldRecord?)] = [
    (account(balance: 100, held: 30), hold()),
    (account(balance: 100), nil),
    (account(balance: 100, held: 30, counters: ["readings": QuotaCounter(used: 3, windowEnd: midnight)]), hold()),
    (account(balance: 0, counters: ["readings": QuotaCounter(used: 1, windowEnd: midnight)]), nil),
    (account(balance: 100, counters: ["readings": QuotaCounter(used: 3, windowEnd: midnight)], premiumUntil: midnight), nil),
]

/// The plans of `command` in every account of ``everyAccount`` that does not refuse it.
private func plans(_ command: Command) -> [LedgerPlan] {
    everyAccount.compactMap { state, hold in try? LedgerPlanner.plan(command, state: state, hold: hold, now: t0) }
}

/// The rules both stores apply around ``LedgerPlanner`` when they run a command (``Command``'s classification,
/// ``LedgerSnapshot/init(for:state:hold:)``, ``LedgerPlanner/plan(_:state:hold:now:)``,
/// ``CommandOutcome/init(plan:state:hold:entryId:now:)``, ``IdempotencyKey/replay(_:storedFingerprint:)``),
/// checked against the planner rather than restated.
@Suite("CommandRules", .timeLimit(.minutes(1)))
struct CommandRulesTests {
    /// A store takes an entry id in passing exactly for the commands the planner can make append one.
    @Test(arguments: everyCommand)
    func mayAppendIsWhetherAPlanCanAppend(_ command: Command) {
        let appends = plans(command).contains { $0.entry != nil }
        #expect(command.mayAppend == appends, "\(command)")
    }

    /// The compare-and-set path takes the ledger commands; the planner changes the profile for the others only.
    @Test(arguments: everyCommand)
    func ledgerCommandsNeverChangeTheProfile(_ command: Command) {
        let planned = plans(command)
        #expect(!planned.isEmpty, "every command plans in some account")
        #expect(planned.allSatisfy { ($0.user == nil) == command.isLedgerCommand }, "\(command)")
    }

    /// A command that settles a hold cannot plan without it; for every other command the hold a store did not
    /// read changes nothing.
    @Test(arguments: everyCommand)
    func settledHoldIsTheOnlyHoldThePlannerNeeds(_ command: Command) throws {
        if let holdId = command.settledHoldId {
            let error = #expect(throws: StoreError.self) {
                try LedgerPlanner.plan(command, state: account(balance: 100, held: 30), hold: nil, now: t0)
            }
            #expect(error?.code == .holdNotFound)
            let settled = try LedgerPlanner.plan(command, state: account(balance: 100, held: 30), hold: hold(holdId), now: t0)
            #expect(settled.settleHold != nil)
        } else {
            for (state, _) in everyAccount {
                let without = try? LedgerPlanner.plan(command, state: state, hold: nil, now: t0)
                let with = try? LedgerPlanner.plan(command, state: state, hold: hold(), now: t0)
                #expect(with == without, "\(command)")
                #expect(with?.settleHold == nil)
            }
        }
    }

    /// The counter a store hands the planner is the one of the action's quota, which is the one it counts on.
    @Test(arguments: everyCommand)
    func quotaIsTheCounterThePlannerCounts(_ command: Command) {
        let counted = plans(command).compactMap { $0.counter?.quota }
        #expect(counted.allSatisfy { $0 == command.quota }, "\(command)")
        if case .performAction(_, let action, _) = command, action.quota != nil {
            #expect(!counted.isEmpty, "an action with a quota counts on it in some account")
        }
    }

    @Test func snapshotTakesTheActionsCounterTheHoldAndTheInstallation() {
        let readings = QuotaCounter(used: 2, windowEnd: midnight)
        let other = QuotaCounter(used: 9, windowEnd: midnight)
        let installation = InstallationCounters(id: "i1", counters: ["readings": QuotaCounter(used: 1, windowEnd: midnight)])
        let state = account(balance: 40, held: 30, counters: ["readings": readings, "other": other], installation: installation)
        let action = LedgerSnapshot(for: .performAction(userId: "u1", action: reading, quotaLimit: 3), state: state, hold: nil)
        #expect(action == LedgerSnapshot(user: state.user, wallet: state.wallet, counter: readings, installation: installation))
        let capture = LedgerSnapshot(for: .captureHold(userId: "u1", holdId: "h1", amount: 5), state: state, hold: hold())
        #expect(capture == LedgerSnapshot(user: state.user, wallet: state.wallet, hold: hold(), installation: installation))
        let tokensOnly = LedgerSnapshot(for: .performAction(userId: "u1", action: aiQuery, quotaLimit: nil), state: state, hold: nil)
        #expect(tokensOnly.counter == nil)
    }

    /// A refusal shows the client the account as the command found it; a plan is the planner's own.
    @Test func refusalCarriesTheAccountState() throws {
        let poor = account(balance: 2, counters: ["readings": QuotaCounter(used: 3, windowEnd: midnight)])
        let refusals: [(Command, HoldRecord?, StoreError.Code)] = [
            (.performAction(userId: "u1", action: reading, quotaLimit: 3), nil, .insufficientTokens),
            (.performAction(userId: "u1", action: freeOnly, quotaLimit: 3), nil, .quotaExhausted),
            (.captureHold(userId: "u1", holdId: "h1", amount: 1), nil, .holdNotFound),
            (.grant(userId: "u1", amount: 0, reason: "none"), nil, .invalidInput),
        ]
        for (command, held, code) in refusals {
            let error = #expect(throws: StoreError.self) { try LedgerPlanner.plan(command, state: poor, hold: held, now: t0) }
            #expect(error?.code == code)
            #expect(error?.state == poor)
        }
        let rich = account(balance: 100, counters: ["readings": QuotaCounter(used: 1, windowEnd: midnight)])
        for command in everyCommand where command.settledHoldId == nil {
            let snapshot = LedgerSnapshot(for: command, state: rich, hold: nil)
            let planned = try LedgerPlanner.plan(command, state: rich, hold: nil, now: t0)
            #expect(try planned == LedgerPlanner.plan(command, snapshot: snapshot, now: t0))
        }
    }

    @Test func outcomeOfADebit() throws {
        let state = account(balance: 10)
        let plan = try LedgerPlanner.plan(.performAction(userId: "u1", action: aiQuery, quotaLimit: nil), state: state, hold: nil, now: t0)
        let outcome = CommandOutcome(plan: plan, state: state, hold: nil, entryId: 42, now: t0)
        #expect(outcome.state.wallet == WalletState(balance: 7, held: 0, version: 8))
        #expect(
            outcome.entry
                == LedgerEntryRecord(id: 42, kind: .debit, amount: -3, heldChange: 0, balanceAfter: 7, reason: "ai.query", createdAt: t0))
        #expect(outcome.hold == nil && outcome.payment == .charge(3))
        #expect(outcome.state.user == state.user && outcome.state.counters.isEmpty)
    }

    /// The counters the response shows are the ones the rows keep: their window end in whole milliseconds.
    @Test func outcomeOfAGuestsFreeUseShowsBothCountersAsStored() throws {
        let open = QuotaCounter(used: 1, windowEnd: midnightAndABit)
        let installation = InstallationCounters(id: "i1", counters: ["readings": QuotaCounter(used: 2, windowEnd: midnightAndABit)])
        let state = account(balance: 0, counters: ["readings": open, "other": open], installation: installation)
        let plan = try LedgerPlanner.plan(.performAction(userId: "u1", action: reading, quotaLimit: 3), state: state, hold: nil, now: t0)
        #expect(plan.counter?.value == QuotaCounter(used: 2, windowEnd: midnightAndABit))
        let outcome = CommandOutcome(plan: plan, state: state, hold: nil, entryId: nil, now: t0)
        let stored = Date(millis: midnightAndABit.millis)
        #expect(stored != midnightAndABit)
        #expect(outcome.state.counters == ["readings": QuotaCounter(used: 2, windowEnd: stored), "other": open])
        let installationAfter = InstallationCounters(id: "i1", counters: ["readings": QuotaCounter(used: 3, windowEnd: stored)])
        #expect(outcome.state.installation == installationAfter)
        #expect(outcome.state.wallet == state.wallet && outcome.entry == nil && outcome.payment == .useQuota)
    }

    @Test func outcomeOfHolds() throws {
        let state = account(balance: 100, held: 30)
        let capture = try LedgerPlanner.plan(.captureHold(userId: "u1", holdId: "h1", amount: 12), state: state, hold: hold(), now: t0)
        let captured = CommandOutcome(plan: capture, state: state, hold: hold(), entryId: 5, now: t0)
        var settled = hold()
        (settled.status, settled.capturedAmount) = (.captured, 12)
        #expect(captured.hold == settled)
        #expect(captured.state.wallet == WalletState(balance: 88, held: 0, version: 8))
        #expect(captured.entry?.id == 5 && captured.entry?.balanceAfter == 88 && captured.entry?.kind == .capture)

        let expiresAt = t0.addingTimeInterval(300)
        let create = try LedgerPlanner.plan(
            .createHold(userId: "u1", holdId: "h2", amount: 20, expiresAt: expiresAt), state: state, hold: nil, now: t0)
        let created = CommandOutcome(plan: create, state: state, hold: nil, entryId: 6, now: t0)
        #expect(
            created.hold
                == HoldRecord(id: "h2", userId: "u1", amount: 20, status: .open, capturedAmount: nil, createdAt: t0, expiresAt: expiresAt))
        #expect(created.state.wallet == WalletState(balance: 100, held: 50, version: 8))
    }

    /// The profile the response shows is the row's: its instants in whole milliseconds.
    @Test func outcomeOfAProfileChangeShowsTheUserAsStored() throws {
        let state = account(balance: 5)
        let plan = try LedgerPlanner.plan(.setPremium(userId: "u1", until: midnightAndABit), state: state, hold: nil, now: t0)
        let outcome = CommandOutcome(plan: plan, state: state, hold: nil, entryId: nil, now: t0)
        #expect(outcome.state.user.premiumUntil == Date(millis: midnightAndABit.millis))
        #expect(outcome.state.user.premiumUntil != midnightAndABit)
        #expect(outcome.state.wallet == state.wallet && outcome.entry == nil && outcome.hold == nil)
    }

    @Test func replayNeedsTheSameRequest() throws {
        let key = IdempotencyKey(scope: "u1", key: "k1", fingerprint: "POST /v1/actions/reading {}")
        let stored = StoredResponse(status: 201, body: Array("{\"ok\":true}".utf8))
        #expect(try key.replay(stored, storedFingerprint: key.fingerprint) == stored)
        let error = #expect(throws: StoreError.self) { try key.replay(stored, storedFingerprint: "POST /v1/actions/other {}") }
        #expect(error?.code == .idempotencyMismatch)
    }
}
