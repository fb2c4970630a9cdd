import Foundation
import TallyStore
import Testing

/// The sign-in lockout rule, on its own: stored failures in, a decision out.
@Suite("Sign-in lockout policy", .timeLimit(.minutes(1)))
struct SignInPolicyTests {
    let policy = SignInPolicy()
    let start = defaultStart

    /// Applies the decision as a store would (admitted attempts are stored as failures).
    func attempt(_ pair: inout SignInFailures?, _ account: inout SignInFailures?, at now: Date) -> SignInDecision {
        let decision = policy.decide(pair: pair, account: account, now: now)
        if case .admit(let newPair, let newAccount, _) = decision {
            pair = newPair
            account = newAccount
        }
        return decision
    }

    @Test("Five failures of a pair lock it for the window; then it starts over")
    func pairLock() {
        var pair: SignInFailures?
        var account: SignInFailures?
        for index in 1...5 {
            guard case .admit(_, _, let locks) = attempt(&pair, &account, at: start) else {
                Issue.record("attempt \(index) refused")
                return
            }
            #expect(locks == (index == 5))
        }
        #expect(attempt(&pair, &account, at: start) == .refuse(retryAfter: 900))
        #expect(attempt(&pair, &account, at: start.addingTimeInterval(899)) == .refuse(retryAfter: 1))
        guard case .admit(let after, _, let locks) = attempt(&pair, &account, at: start.addingTimeInterval(900)) else {
            Issue.record("still locked after the window")
            return
        }
        #expect(after.count == 1 && !locks, "the count starts over after a lock")
    }

    @Test("Failures older than the window are forgotten")
    func windowForgets() {
        var pair: SignInFailures?
        var account: SignInFailures?
        for _ in 1...4 { _ = attempt(&pair, &account, at: start) }
        guard case .admit(let later, let total, let locks) = attempt(&pair, &account, at: start.addingTimeInterval(900)) else {
            Issue.record("refused")
            return
        }
        #expect(later.count == 1 && total.count == 1 && !locks)
    }

    @Test("Beyond the account's ceiling, a failing pair waits 2^n seconds up to the cap; a clean pair never waits")
    func accountDelay() {
        var account: SignInFailures? = SignInFailures(count: 20, lastAt: start)
        var failing: SignInFailures? = SignInFailures(count: 1, lastAt: start)
        // 20 failures in all: the failing pair waits 2^0 = 1 s after its own last failure.
        #expect(policy.decide(pair: failing, account: account, now: start) == .refuse(retryAfter: 1))
        guard case .admit = attempt(&failing, &account, at: start.addingTimeInterval(1)) else {
            Issue.record("refused after the delay")
            return
        }
        // 21 in all: 2 s.
        #expect(policy.decide(pair: failing, account: account, now: start.addingTimeInterval(2)) == .refuse(retryAfter: 1))
        #expect(policy.delay(afterAccountFailures: 28) == 256)
        #expect(policy.delay(afterAccountFailures: 29) == 300, "capped")
        #expect(policy.delay(afterAccountFailures: 10_000) == 300, "capped, no overflow")
        // The real user's address has no failures on the account: admitted at once.
        let busy = SignInFailures(count: 10_000, lastAt: start)
        guard case .admit(let fresh, let total, _) = policy.decide(pair: nil, account: busy, now: start) else {
            Issue.record("a clean pair was delayed")
            return
        }
        #expect(fresh.count == 1 && total.count == 10_001)
    }

    @Test("Nothing is permanent: a window after the last failure, every count has started over")
    func nothingPermanent() {
        let pair = SignInFailures(count: 5, lastAt: start, lockedUntil: start.addingTimeInterval(900))
        let account = SignInFailures(count: 1_000_000, lastAt: start)
        guard case .admit(let newPair, let newAccount, _) = policy.decide(pair: pair, account: account, now: start.addingTimeInterval(900))
        else {
            Issue.record("still refused after the window")
            return
        }
        #expect(newPair.count == 1 && newAccount.count == 1)
    }
}
