import Foundation
import TallySQLite
import TallyStore
import Testing

/// The sign-in lockout's failure counts, against every store: atomic under concurrency, kept per pair and
/// per account, forgotten by a success, purged when old, and kept across a restart.
@Suite("Sign-in lockout conformance", .timeLimit(.minutes(10)))
struct SignInConformanceTests {
    @Test("beginSignIn counts per pair and account; a success forgets the account and its own pair only", arguments: StoreKind.allCases)
    func countsAndReset(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let policy = SignInPolicy()
            let (account, attacker, user) = (randomId("acct-"), randomId("addr-"), randomId("addr-"))
            for index in 1...5 {
                let decision = try await f.store.beginSignIn(account: account, address: attacker, policy: policy, now: f.now)
                guard case .admit(let pair, let total, let locks) = decision else {
                    Issue.record("[\(kind)] attempt \(index) refused")
                    return
                }
                #expect(pair.count == index && total.count == index && locks == (index == 5), "[\(kind)]")
            }
            #expect(
                try await f.store.beginSignIn(account: account, address: attacker, policy: policy, now: f.now) == .refuse(retryAfter: 900),
                "[\(kind)] the attacker's pair is locked")
            // Refusals count nothing: the account still has 5 failures, and the user's address is free.
            guard case .admit(let pair, let total, _) = try await f.store.beginSignIn(account: account, address: user, policy: policy, now: f.now)
            else {
                Issue.record("[\(kind)] the user's address is locked too")
                return
            }
            #expect(pair.count == 1 && total.count == 6, "[\(kind)]")
            try await f.store.signInSucceeded(account: account, address: user)
            #expect(
                try await f.store.beginSignIn(account: account, address: attacker, policy: policy, now: f.now) == .refuse(retryAfter: 900),
                "[\(kind)] a success elsewhere does not unlock the attacker")
            guard case .admit(_, let afterReset, _) = try await f.store.beginSignIn(account: account, address: user, policy: policy, now: f.now)
            else {
                Issue.record("[\(kind)] refused after a success")
                return
            }
            #expect(afterReset.count == 1, "[\(kind)] the success forgot the account's failures")
            // Another account is untouched by all of this.
            guard case .admit(_, let other, _) = try await f.store.beginSignIn(
                account: randomId("acct-"), address: attacker, policy: policy, now: f.now)
            else {
                Issue.record("[\(kind)] another account is locked")
                return
            }
            #expect(other.count == 1, "[\(kind)]")
        }
    }

    @Test("50 concurrent attempts of one pair: exactly 5 are admitted", arguments: StoreKind.allCases)
    func concurrentAttempts(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (account, address) = (randomId("acct-"), randomId("addr-"))
            let attempts = try await concurrently(50) { _ in
                try await f.store.beginSignIn(account: account, address: address, policy: SignInPolicy(), now: f.now)
            }
            let admitted = attempts.filter { if case .success(.admit) = $0 { true } else { false } }
            let refused = attempts.filter { if case .success(.refuse) = $0 { true } else { false } }
            #expect(admitted.count == 5 && refused.count == 45, "[\(kind)] \(attempts)")
        }
    }

    @Test("purge deletes failures older than its cutoff", arguments: StoreKind.allCases)
    func purge(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let policy = SignInPolicy()
            let (account, address) = (randomId("acct-"), randomId("addr-"))
            for _ in 1...5 { _ = try await f.store.beginSignIn(account: account, address: address, policy: policy, now: f.now) }
            try await f.store.purge(idempotencyBefore: f.now, signupsBefore: f.now, signInFailuresBefore: f.now)
            #expect(
                try await f.store.beginSignIn(account: account, address: address, policy: policy, now: f.now) == .refuse(retryAfter: 900),
                "[\(kind)] failures at the cutoff are kept")
            try await f.store.purge(idempotencyBefore: f.now, signupsBefore: f.now, signInFailuresBefore: f.now.addingTimeInterval(1))
            guard case .admit(let pair, let total, _) = try await f.store.beginSignIn(
                account: account, address: address, policy: policy, now: f.now)
            else {
                Issue.record("[\(kind)] still locked after the purge")
                return
            }
            #expect(pair.count == 1 && total.count == 1, "[\(kind)]")
        }
    }

    @Test("The failures outlive the store: a lock holds after a restart")
    func survivesRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tally.sqlite").path
        let (account, address, now) = (randomId("acct-"), randomId("addr-"), defaultStart)
        do {
            let store = try SQLiteStore(path: path)
            try await store.migrate()
            for _ in 1...5 { _ = try await store.beginSignIn(account: account, address: address, policy: SignInPolicy(), now: now) }
        }
        let reopened = try SQLiteStore(path: path)
        try await reopened.migrate()
        #expect(
            try await reopened.beginSignIn(account: account, address: address, policy: SignInPolicy(), now: now.addingTimeInterval(60))
                == .refuse(retryAfter: 840))
    }
}
