import Foundation
import TallyStore
import Testing

/// Password reset and email verification codes (``AccountCodeStore``), against every store: a code works once, until it
/// expires, dies after five wrong tries, is replaced by a newer one; redeeming a reset revokes every session.
@Suite("Account code conformance", .timeLimit(.minutes(3)))
struct AccountCodeConformanceTests {
    /// A linked account with `sessions` live sessions: its id, email and session ids.
    static func linkedAccount(_ f: Fixture, sessions: Int = 1) async throws -> (userId: String, email: String, sessions: [String]) {
        let device = randomId("dev-")
        let first = try await f.signIn(device: device)
        let email = randomId("u-") + "@example.com"
        _ = try await f.store.linkCredentials(userId: first.user.id, email: email, passwordHash: "old-hash")
        var ids = [first.sessionId]
        for _ in 1..<max(sessions, 1) {
            ids.append(
                try await f.store.openSession(
                    userId: first.user.id, sessionId: randomId("ses-"), refresh: f.refresh(), sessionsPerUser: 50, now: f.now
                ).sessionId)
        }
        return (first.user.id, email, ids)
    }

    /// Issues a code with hash `hash` for `purpose`, valid for the policy's lifetime.
    static func issue(_ f: Fixture, _ userId: String, _ purpose: AccountCodePurpose, hash: String) async throws -> String? {
        try await f.store.issueAccountCode(
            NewAccountCode(userId: userId, purpose: purpose, hash: hash, expiresAt: f.now.addingTimeInterval(AccountCodePolicy().lifetime)),
            now: f.now)
    }

    /// Presents `hash` as the user's reset code with the new password hash `password`, under the default policy: the
    /// sessions it revoked.
    static func reset(_ f: Fixture, _ userId: String, _ hash: String, password: String = "new-hash") async throws -> [String]? {
        try await f.store.resetPassword(userId: userId, codeHash: hash, passwordHash: password, policy: AccountCodePolicy(), now: f.now)?
            .revokedSessions
    }

    @Test("A reset code works once: password set, email verified, every session revoked", arguments: StoreKind.allCases)
    func resetOnce(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let account = try await Self.linkedAccount(f, sessions: 3)
            #expect(try await Self.issue(f, account.userId, .passwordReset, hash: "h-right") == account.email, "[\(kind)]")
            let revoked = try await Self.reset(f, account.userId, "h-right", password: "new-hash")
            #expect(Set(revoked ?? []) == Set(account.sessions), "[\(kind)]")
            for session in account.sessions {
                #expect(try await f.store.liveSessionUser(sessionId: session) == nil, "[\(kind)] session still live")
            }
            #expect(try await f.store.passwordHash(email: account.email)?.passwordHash == "new-hash", "[\(kind)]")
            #expect(try await f.store.user(id: account.userId)?.emailVerifiedAt == f.now, "[\(kind)] the code proved the email")
            // Used: the same code again changes nothing.
            #expect(try await Self.reset(f, account.userId, "h-right", password: "other") == nil, "[\(kind)]")
            #expect(try await f.store.passwordHash(email: account.email)?.passwordHash == "new-hash", "[\(kind)]")
        }
    }

    @Test("A code dies at its fifth wrong try, and the fourth leaves it working", arguments: StoreKind.allCases)
    func wrongTries(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let policy = AccountCodePolicy()
            for wrong in [policy.maxAttempts - 1, policy.maxAttempts] {
                let account = try await Self.linkedAccount(f)
                _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-right")
                for attempt in 0..<wrong {
                    let result = try await Self.reset(f, account.userId, "h-wrong-\(attempt)", password: "bad")
                    #expect(result == nil, "[\(kind)]")
                }
                let right = try await Self.reset(f, account.userId, "h-right", password: "new")
                #expect((right != nil) == (wrong < policy.maxAttempts), "[\(kind)] after \(wrong) wrong tries")
                #expect(try await f.store.passwordHash(email: account.email)?.passwordHash == (right != nil ? "new" : "old-hash"), "[\(kind)]")
            }
        }
    }

    @Test("Concurrent tries: the right code is redeemed once; wrong ones are each counted", arguments: StoreKind.allCases)
    func concurrentTries(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let policy = AccountCodePolicy()
            let account = try await Self.linkedAccount(f)
            _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-right")
            let rights = try await concurrently(10) { index in
                try await Self.reset(f, account.userId, "h-right", password: "new-\(index)")
            }
            let redeemed = rights.compactMap { if case .success(let revoked?) = $0 { revoked } else { nil } }
            let refused = rights.filter { if case .success(nil) = $0 { true } else { false } }
            #expect(redeemed.count == 1 && refused.count == 9, "[\(kind)] \(rights)")

            // Exactly maxAttempts wrong tries at once kill the code: none of them went uncounted.
            let other = try await Self.linkedAccount(f)
            _ = try await Self.issue(f, other.userId, .passwordReset, hash: "h-right")
            let wrongs = try await concurrently(policy.maxAttempts) { index in
                try await Self.reset(f, other.userId, "h-wrong-\(index)", password: "bad")
            }
            #expect(wrongs.allSatisfy { if case .success(nil) = $0 { true } else { false } }, "[\(kind)] \(wrongs)")
            let after = try await Self.reset(f, other.userId, "h-right", password: "new")
            #expect(after == nil, "[\(kind)] a wrong try was lost")
        }
    }

    @Test("A code expires after its lifetime; a newer code replaces the older", arguments: StoreKind.allCases)
    func expiryAndSuperseding(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let policy = AccountCodePolicy()
            let account = try await Self.linkedAccount(f)
            _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-first")
            f.clock.advance(by: policy.lifetime - 1)
            _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-second")
            #expect(try await Self.reset(f, account.userId, "h-first", password: "x") == nil, "[\(kind)] the replaced code still works")
            f.clock.advance(by: policy.lifetime)
            #expect(try await Self.reset(f, account.userId, "h-second", password: "x") == nil, "[\(kind)] the expired code still works")
            #expect(try await f.store.passwordHash(email: account.email)?.passwordHash == "old-hash", "[\(kind)]")
            // One second before expiry it works.
            _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-third")
            f.clock.advance(by: policy.lifetime - 1)
            #expect(try await Self.reset(f, account.userId, "h-third", password: "y") != nil, "[\(kind)]")
        }
    }

    @Test("Verification marks the email verified; codes of one purpose do nothing for the other", arguments: StoreKind.allCases)
    func verification(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let policy = AccountCodePolicy()
            let account = try await Self.linkedAccount(f)
            #expect(try await f.store.user(id: account.userId)?.emailVerifiedAt == nil, "[\(kind)]")
            _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-reset")
            _ = try await Self.issue(f, account.userId, .emailVerification, hash: "h-verify")
            #expect(try await f.store.verifyEmail(userId: account.userId, codeHash: "h-reset", policy: policy, now: f.now) == nil, "[\(kind)]")
            let verified = try await f.store.verifyEmail(userId: account.userId, codeHash: "h-verify", policy: policy, now: f.now)
            #expect(verified?.emailVerifiedAt == f.now && verified?.email == account.email, "[\(kind)]")
            #expect(try await f.store.user(id: account.userId) == verified, "[\(kind)]")
            #expect(try await f.store.accountState(userId: account.userId, now: f.now)?.user == verified, "[\(kind)] the account read")
            // The verification code is used up; the reset code does not verify and is not verified by the other one
            // (each such try counts against the code it was presented for), and still works.
            #expect(try await f.store.verifyEmail(userId: account.userId, codeHash: "h-verify", policy: policy, now: f.now) == nil, "[\(kind)]")
            #expect(try await Self.reset(f, account.userId, "h-verify", password: "x") == nil, "[\(kind)]")
            #expect(try await Self.reset(f, account.userId, "h-reset", password: "x") != nil, "[\(kind)]")
            // A later verification keeps the first instant.
            f.clock.advance(by: 60)
            _ = try await Self.issue(f, account.userId, .emailVerification, hash: "h-again")
            let again = try await f.store.verifyEmail(userId: account.userId, codeHash: "h-again", policy: policy, now: f.now)
            #expect(again?.emailVerifiedAt == verified?.emailVerifiedAt, "[\(kind)]")
        }
    }

    @Test("A guest gets no code and cannot change a password; a change revokes the other sessions only", arguments: StoreKind.allCases)
    func guestsAndChanges(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.signIn()
            #expect(try await Self.issue(f, guest.user.id, .passwordReset, hash: "h") == nil, "[\(kind)]")
            #expect(try await Self.issue(f, randomId("nobody-"), .passwordReset, hash: "h") == nil, "[\(kind)]")
            await expectStoreError(.userNotFound, kind) {
                try await f.store.changePassword(userId: guest.user.id, passwordHash: "x", keepingSession: guest.sessionId, now: f.now)
            }
            #expect(try await f.store.liveSessionUser(sessionId: guest.sessionId) == guest.user.id, "[\(kind)]")

            let account = try await Self.linkedAccount(f, sessions: 3)
            _ = try await Self.issue(f, account.userId, .passwordReset, hash: "h-pending")
            let kept = account.sessions[1]
            let revoked = try await f.store.changePassword(userId: account.userId, passwordHash: "changed", keepingSession: kept, now: f.now)
            #expect(Set(revoked) == Set(account.sessions).subtracting([kept]), "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: kept) == account.userId, "[\(kind)]")
            for session in revoked { #expect(try await f.store.liveSessionUser(sessionId: session) == nil, "[\(kind)]") }
            #expect(try await f.store.passwordHash(email: account.email)?.passwordHash == "changed", "[\(kind)]")
            // The reset code asked for before the change no longer works.
            #expect(
                try await Self.reset(f, account.userId, "h-pending", password: "x") == nil,
                "[\(kind)]")
            // Deleting the account deletes its codes with it (no error, nothing left to redeem).
            _ = try await Self.issue(f, account.userId, .emailVerification, hash: "h-last")
            #expect(try await f.store.deleteUser(id: account.userId), "[\(kind)]")
            #expect(
                try await f.store.verifyEmail(userId: account.userId, codeHash: "h-last", policy: AccountCodePolicy(), now: f.now) == nil,
                "[\(kind)]")
        }
    }
}

@Suite("Account code policy", .timeLimit(.minutes(1)))
struct AccountCodePolicyTests {
    @Test("The verdicts: right, wrong with attempts left, the last wrong one, expired, absent")
    func verdicts() {
        let policy = AccountCodePolicy()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let live = StoredAccountCode(hash: "a", expiresAt: now.addingTimeInterval(1), failedAttempts: 0)
        #expect(policy.check(live, presented: "a", now: now) == .redeem)
        #expect(policy.check(live, presented: "b", now: now) == .wrong(failedAttempts: 1))
        var worn = live
        worn.failedAttempts = policy.maxAttempts - 1
        #expect(policy.check(worn, presented: "b", now: now) == .discard)
        #expect(policy.check(worn, presented: "a", now: now) == .redeem)
        worn.failedAttempts = policy.maxAttempts
        #expect(policy.check(worn, presented: "a", now: now) == .discard)
        #expect(policy.check(live, presented: "a", now: now.addingTimeInterval(1)) == .discard, "expired at its instant")
        #expect(policy.check(nil, presented: "a", now: now) == .absent)
    }
}
