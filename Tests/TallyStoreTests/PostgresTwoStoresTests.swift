import Foundation
import Logging
import PostgresNIO
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// Two `PostgresStore`s on one database behave like two server processes: each has its own pool, account
/// cache and account gate, so only the database stands between their writes.
@Suite("PostgreSQL: two stores on one database", .timeLimit(.minutes(1)))
struct PostgresTwoStoresTests {
    static let aiQuery = ActionSpec(name: "ai.query", tokens: 3)

    @Test("One idempotency key sent to both stores at once charges once, and no call hangs")
    func oneKeyAcrossStores() async throws {
        try await withTwoPostgresStores { first, second in
            let clock = ManualClock(defaultStart)
            let userId = try await newPostgresUser(first, tokens: 100, now: clock.now)
            let key = IdempotencyKey(scope: userId, key: randomId("key-"), fingerprint: "POST /v1/actions/ai.query")
            let command = Command.performAction(userId: userId, action: Self.aiQuery, quotaLimit: nil)
            for round in 0..<5 {
                let roundKey = IdempotencyKey(scope: key.scope, key: "\(key.key)-\(round)", fingerprint: key.fingerprint)
                let results = try await concurrently(40) { index in
                    try await (index % 2 == 0 ? first : second).execute(command, idempotency: roundKey, now: clock.now) {
                        try RenderedBody.render($0)
                    }
                }
                // One ran; each of the other 39 got its response byte for byte, or was told the key is in flight.
                try KeyedAttempts(results).expectOneCharge(of: 40, "round \(round):")
            }
            #expect(try await first.wallet(userId: userId, now: clock.now)?.balance == 100 - 5 * 3)
            #expect(try await second.wallet(userId: userId, now: clock.now)?.balance == 100 - 5 * 3)
            let books = Fixture(store: second, kind: .postgres, clock: clock)
            let debits = try await books.allEntries(userId).filter { $0.kind == .debit }
            #expect(debits.count == 5 && debits.allSatisfy { $0.amount == -3 }, "\(debits)")
            try await books.checkInvariants([userId])
        }
    }

    @Test("Both stores debiting one account keep the books exact")
    func contendedAccount() async throws {
        try await withTwoPostgresStores { first, second in
            let clock = ManualClock(defaultStart)
            let userId = try await newPostgresUser(first, tokens: 150, now: clock.now)
            let command = Command.performAction(userId: userId, action: Self.aiQuery, quotaLimit: nil)
            let results = try await concurrently(100) { index in
                let key = IdempotencyKey(scope: userId, key: randomId("k-"), fingerprint: "POST /v1/actions/ai.query")
                return try await (index % 2 == 0 ? first : second).execute(command, idempotency: key, now: clock.now) {
                    try RenderedBody.render($0)
                }
            }
            let executed = results.filter { if case .success(.executed) = $0 { true } else { false } }.count
            #expect(executed == 50, "\(results.filter { if case .success = $0 { false } else { true } })")
            #expect(try await second.wallet(userId: userId, now: clock.now)?.balance == 0)
            // Every other call was refused for want of tokens, with the account as it was then: spent to the last token.
            let refusals = results.compactMap { if case .failure(let error) = $0 { error } else { nil } }
            #expect(refusals.count == 50, "\(results.filter { if case .success = $0 { false } else { true } })")
            for refusal in refusals {
                #expect(refusal.code == .insufficientTokens && refusal.state?.wallet.balance == 0, "\(refusal) \(String(describing: refusal.state))")
            }
            // The books: one grant and 50 debits of 3, replayed to the wallet by either store.
            for store in [first, second] {
                let fixture = Fixture(store: store, kind: .postgres, clock: clock)
                let entries = try await fixture.allEntries(userId)
                #expect(entries.map(\.kind) == [.grant] + Array(repeating: .debit, count: 50), "\(entries.map(\.kind))")
                #expect(entries.dropFirst().allSatisfy { $0.amount == -3 && $0.reason == "ai.query" })
                try await fixture.checkInvariants([userId])
            }
        }
    }

    @Test("A session revoked, reused or deleted through one store stops being live in the other at its next poll")
    func revocationFeed() async throws {
        try await withTwoPostgresStores { first, second in
            let clock = ManualClock(defaultStart)
            var sessions: [(user: String, session: String, refresh: String)] = []
            for _ in 0..<3 {
                let (session, refresh) = (randomId("session-"), randomId("refresh-"))
                let grant = try await first.signInGuest(
                    deviceHash: randomId("device-"), ipHash: randomId("ip-"), signupsPerHour: 1_000_000, signupGrant: 0,
                    sessionId: session, refresh: NewRefreshToken(hash: refresh, expiresAt: clock.now.addingTimeInterval(3600)),
                    sessionsPerUser: 50, now: clock.now)
                sessions.append((grant.user.id, session, refresh))
            }
            try await first.pollRevocations()
            try await second.pollRevocations()
            for entry in sessions {
                #expect(first.sessions.user(of: entry.session) == entry.user, "the store that opened a session knows it live")
                #expect(second.sessions.user(of: entry.session) == nil)
                #expect(try await second.liveSessionUser(sessionId: entry.session) == entry.user)
                #expect(second.sessions.user(of: entry.session) == entry.user, "answered from memory while the feed is fresh")
            }

            try await first.revokeSession(id: sessions[0].session, now: clock.now)
            let next = NewRefreshToken(hash: randomId("refresh-"), expiresAt: clock.now.addingTimeInterval(3600))
            _ = try await first.rotateRefreshToken(hash: sessions[1].refresh, next: next, now: clock.now)
            await #expect(throws: StoreError.self) { try await first.rotateRefreshToken(hash: sessions[1].refresh, next: next, now: clock.now) }
            #expect(try await first.deleteUser(id: sessions[2].user))

            try await second.pollRevocations()
            for entry in sessions {
                #expect(second.sessions.user(of: entry.session) == nil)
                #expect(try await second.liveSessionUser(sessionId: entry.session) == nil)
                #expect(try await first.liveSessionUser(sessionId: entry.session) == nil)
            }
        }
    }

    @Test("A sign-out or deletion announced by the other store stops its sessions at once, without a poll")
    func announcedRevocations() async throws {
        try await withTwoPostgresStores { first, second in
            let clock = ManualClock(defaultStart)
            var sessions: [(user: String, session: String)] = []
            for _ in 0..<2 {
                let session = randomId("session-")
                let grant = try await first.signInGuest(
                    deviceHash: randomId("device-"), ipHash: randomId("ip-"), signupsPerHour: 1_000_000, signupGrant: 0,
                    sessionId: session, refresh: NewRefreshToken(hash: randomId("refresh-"), expiresAt: clock.now.addingTimeInterval(3600)),
                    sessionsPerUser: 50, now: clock.now)
                sessions.append((grant.user.id, session))
            }
            try await second.pollRevocations()
            for entry in sessions {
                #expect(try await second.liveSessionUser(sessionId: entry.session) == entry.user)
                #expect(second.sessions.user(of: entry.session) == entry.user, "answered from memory for the next hour")
            }
            try await first.revokeSession(id: sessions[0].session, now: clock.now)
            #expect(try await first.deleteUser(id: sessions[1].user))
            // No poll: what the other process announced is all the second store hears.
            second.sessionEnded(id: sessions[0].session)
            second.accountDeleted(userId: sessions[1].user)
            for entry in sessions {
                #expect(second.sessions.user(of: entry.session) == nil)
                #expect(try await second.liveSessionUser(sessionId: entry.session) == nil)
            }
        }
    }

    @Test("Sign-in failures counted through both stores at once lock the pair after five, in all")
    func lockoutAcrossStores() async throws {
        try await withTwoPostgresStores { first, second in
            let (account, address, now) = (randomId("acct-"), randomId("addr-"), defaultStart)
            let attempts = try await concurrently(40) { index in
                try await (index % 2 == 0 ? first : second).beginSignIn(
                    account: account, address: address, policy: SignInPolicy(), now: now)
            }
            let admitted = attempts.filter { if case .success(.admit) = $0 { true } else { false } }.count
            #expect(admitted == 5, "\(attempts)")
            #expect(
                try await second.beginSignIn(account: account, address: address, policy: SignInPolicy(), now: now)
                    == .refuse(retryAfter: 900))
        }
    }
}
