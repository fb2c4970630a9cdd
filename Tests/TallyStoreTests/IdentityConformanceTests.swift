import Foundation
import TallyStore
import Testing

/// Guest sign-in, sessions, refresh tokens and credentials, against every store.
@Suite("Identity conformance", .timeLimit(.minutes(10)))
struct IdentityConformanceTests {
    @Test("signInGuest: one account per device", arguments: StoreKind.allCases)
    func sameDeviceSameUser(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let first = try await f.signIn(device: device)
            let second = try await f.signIn(device: device)
            #expect(first.created, "[\(kind)]")
            #expect(!second.created, "[\(kind)]")
            #expect(first.user.id == second.user.id, "[\(kind)]")
            #expect(first.sessionId != second.sessionId, "[\(kind)]")
            #expect(first.user.isGuest && first.user.timezone == "UTC" && first.user.premiumUntil == nil, "[\(kind)]")
            #expect(first.user.createdAt == f.now, "[\(kind)]")
            #expect(try await f.store.user(id: first.user.id) == first.user, "[\(kind)]")
            let other = try await f.signIn()
            #expect(other.created && other.user.id != first.user.id, "[\(kind)]")
            #expect(
                try await f.store.wallet(userId: first.user.id, now: f.now) == WalletState(balance: 0, held: 0, version: 0), "[\(kind)]")
            #expect(try await f.store.entries(userId: first.user.id, before: nil, limit: 10).isEmpty, "[\(kind)]")
        }
    }

    @Test("signInGuest: 50 concurrent first calls create one account", arguments: StoreKind.allCases)
    func concurrentFirstSignIn(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let ip = randomId("ip-")
            let attempts = try await concurrently(50) { _ in
                try await f.signIn(device: device, ip: ip, signupsPerHour: 5, signupGrant: 25)
            }
            let grants = attempts.compactMap { if case .success(let grant) = $0 { grant } else { nil } }
            #expect(grants.count == 50, "[\(kind)] failures: \(attempts.filter { if case .success = $0 { false } else { true } })")
            let userIds = Set(grants.map(\.user.id))
            #expect(userIds.count == 1, "[\(kind)] \(userIds.count) accounts for one device")
            #expect(grants.filter(\.created).count == 1, "[\(kind)]")
            #expect(Set(grants.map(\.sessionId)).count == 50, "[\(kind)]")
            let userId = try #require(userIds.first)
            for grant in grants {
                #expect(try await f.store.liveSessionUser(sessionId: grant.sessionId) == userId, "[\(kind)]")
            }
            // One sign-up grant, one wallet.
            let entries = try await f.allEntries(userId)
            #expect(entries.map(\.kind) == [.grant], "[\(kind)]")
            #expect(entries.first?.amount == 25, "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 25, "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("signInGuest: the sign-up grant is a ledger entry", arguments: StoreKind.allCases)
    func signupGrant(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let grant = try await f.signIn(device: device, signupGrant: 40)
            let entries = try await f.allEntries(grant.user.id)
            #expect(entries.count == 1, "[\(kind)]")
            let entry = try #require(entries.first)
            #expect(entry.kind == .grant && entry.amount == 40 && entry.heldChange == 0 && entry.balanceAfter == 40, "[\(kind)]")
            #expect(entry.createdAt == f.now, "[\(kind)]")
            #expect(
                try await f.store.wallet(userId: grant.user.id, now: f.now) == WalletState(balance: 40, held: 0, version: 1), "[\(kind)]")
            // Signing in again grants nothing.
            #expect(try await f.signIn(device: device, signupGrant: 40).user.id == grant.user.id, "[\(kind)]")
            let again = try await f.store.accountState(userId: grant.user.id, now: f.now)
            #expect(again?.wallet.balance == 40, "[\(kind)]")
        }
    }

    @Test("signInGuest: new devices per address are rate limited per hour", arguments: StoreKind.allCases)
    func signupRateLimit(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let ip = randomId("ip-")
            let limit = 3
            var devices: [String] = []
            for _ in 0..<limit {
                let device = randomId("dev-")
                devices.append(device)
                #expect(try await f.signIn(device: device, ip: ip, signupsPerHour: limit).created, "[\(kind)]")
            }
            f.clock.advance(by: 600)
            let refused = randomId("dev-")
            let error = await expectStoreError(.rateLimited, kind) {
                try await f.signIn(device: refused, ip: ip, signupsPerHour: limit)
            }
            let retryAfter = try #require(error?.retryAfter, "[\(kind)] rateLimited without retryAfter")
            #expect(retryAfter > 0 && retryAfter <= 3000, "[\(kind)] retryAfter \(retryAfter)")
            // Existing devices sign in from the same address; other addresses are not limited.
            let existing = try await f.signIn(device: devices[0], ip: ip, signupsPerHour: limit)
            #expect(!existing.created, "[\(kind)]")
            #expect(try await f.signIn(ip: randomId("ip-"), signupsPerHour: limit).created, "[\(kind)]")
            await expectStoreError(.rateLimited, kind) { try await f.signIn(ip: ip, signupsPerHour: limit) }

            // Past the hour: sign-ups work again, and the refusals did not count.
            f.clock.advance(by: 3000 + 1)
            let late = try await f.signIn(device: refused, ip: ip, signupsPerHour: limit)
            #expect(late.created, "[\(kind)]")
            for _ in 1..<limit { #expect(try await f.signIn(ip: ip, signupsPerHour: limit).created, "[\(kind)]") }
            await expectStoreError(.rateLimited, kind) { try await f.signIn(ip: ip, signupsPerHour: limit) }
        }
    }

    @Test("sessions: open, live, revoke", arguments: StoreKind.allCases)
    func sessions(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.signIn()
            let userId = guest.user.id
            let sessionId = randomId("ses-")
            let refresh = f.refresh()
            let opened = try await f.store.openSession(userId: userId, sessionId: sessionId, refresh: refresh, sessionsPerUser: 50, now: f.now)
            #expect(opened.user.id == userId && opened.sessionId == sessionId && !opened.created, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: sessionId) == userId, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: randomId()) == nil, "[\(kind)]")

            try await f.store.revokeSession(id: sessionId, now: f.now)
            #expect(try await f.store.liveSessionUser(sessionId: sessionId) == nil, "[\(kind)]")
            // Its refresh token stops working; the other session is untouched; revoking twice is harmless.
            await expectStoreError(.invalidRefreshToken, kind) {
                try await f.store.rotateRefreshToken(hash: refresh.hash, next: f.refresh(), now: f.now)
            }
            #expect(try await f.store.liveSessionUser(sessionId: guest.sessionId) == userId, "[\(kind)]")
            try await f.store.revokeSession(id: sessionId, now: f.now)
            try await f.store.revokeSession(id: randomId(), now: f.now)

            await expectStoreError(.userNotFound, kind) {
                try await f.store.openSession(userId: randomId(), sessionId: randomId(), refresh: f.refresh(), sessionsPerUser: 50, now: f.now)
            }
        }
    }

    @Test("rotateRefreshToken: rotation, reuse detection, expiry", arguments: StoreKind.allCases)
    func refreshRotation(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let first = f.refresh()
            let guest = try await f.signIn(refresh: first)
            let other = try await f.store.openSession(userId: guest.user.id, sessionId: randomId(), refresh: f.refresh(), sessionsPerUser: 50, now: f.now)

            f.clock.advance(by: 60)
            let second = f.refresh()
            let rotated = try await f.store.rotateRefreshToken(hash: first.hash, next: second, now: f.now)
            #expect(rotated.sessionId == guest.sessionId && rotated.user.id == guest.user.id && !rotated.created, "[\(kind)]")
            let third = f.refresh()
            #expect(
                try await f.store.rotateRefreshToken(hash: second.hash, next: third, now: f.now).sessionId == guest.sessionId, "[\(kind)]")

            // The first token again: reuse, and the whole session is revoked.
            await expectStoreError(.refreshTokenReused, kind) {
                try await f.store.rotateRefreshToken(hash: first.hash, next: f.refresh(), now: f.now)
            }
            await expectStoreError(.invalidRefreshToken, kind) {
                try await f.store.rotateRefreshToken(hash: third.hash, next: f.refresh(), now: f.now)
            }
            #expect(try await f.store.liveSessionUser(sessionId: guest.sessionId) == nil, "[\(kind)]")
            #expect(
                try await f.store.liveSessionUser(sessionId: other.sessionId) == guest.user.id, "[\(kind)] reuse revoked another session")

            await expectStoreError(.invalidRefreshToken, kind) {
                try await f.store.rotateRefreshToken(hash: randomId("unknown-"), next: f.refresh(), now: f.now)
            }
        }
    }

    @Test("sessionsPerUser: opening one more session revokes the oldest, never the new one", arguments: StoreKind.allCases)
    func sessionCap(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            var opened: [(grant: SessionGrant, refresh: NewRefreshToken)] = []
            for _ in 0..<5 {
                let refresh = f.refresh()
                opened.append((try await f.signIn(device: device, refresh: refresh, sessionsPerUser: 3), refresh))
                f.clock.advance(by: 1)
            }
            let userId = opened[0].grant.user.id
            for (index, session) in opened.enumerated() {
                let live = try await f.store.liveSessionUser(sessionId: session.grant.sessionId)
                #expect(live == (index >= 2 ? userId : nil), "[\(kind)] session \(index)")
            }
            await expectStoreError(.invalidRefreshToken, kind) {
                try await f.store.rotateRefreshToken(hash: opened[0].refresh.hash, next: f.refresh(), now: f.now)
            }
            // A password sign-in counts the same sessions.
            let signedIn = try await f.store.openSession(
                userId: userId, sessionId: randomId("ses-"), refresh: f.refresh(), sessionsPerUser: 3, now: f.now)
            #expect(try await f.store.liveSessionUser(sessionId: opened[2].grant.sessionId) == nil, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: signedIn.sessionId) == userId, "[\(kind)]")

            // Many at the same instant: still at most three live, the newest always among them.
            var burst: [String] = [signedIn.sessionId, opened[3].grant.sessionId, opened[4].grant.sessionId]
            for _ in 0..<6 {
                let grant = try await f.signIn(device: device, sessionsPerUser: 3)
                #expect(try await f.store.liveSessionUser(sessionId: grant.sessionId) == userId, "[\(kind)] the new session was revoked")
                burst.append(grant.sessionId)
            }
            var live = 0
            for id in burst where try await f.store.liveSessionUser(sessionId: id) != nil { live += 1 }
            #expect(live == 3, "[\(kind)] \(live) live sessions")
            // Other accounts are untouched.
            let other = try await f.signIn(sessionsPerUser: 1)
            #expect(try await f.store.liveSessionUser(sessionId: other.sessionId) == other.user.id, "[\(kind)]")
        }
    }

    @Test("refreshTokenSession finds a token's session, used or not", arguments: StoreKind.allCases)
    func refreshTokenSession(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let first = f.refresh()
            let guest = try await f.signIn(refresh: first)
            #expect(try await f.store.refreshTokenSession(hash: first.hash) == guest.sessionId, "[\(kind)]")
            let next = f.refresh()
            _ = try await f.store.rotateRefreshToken(hash: first.hash, next: next, now: f.now)
            #expect(try await f.store.refreshTokenSession(hash: first.hash) == guest.sessionId, "[\(kind)]")
            #expect(try await f.store.refreshTokenSession(hash: next.hash) == guest.sessionId, "[\(kind)]")
            #expect(try await f.store.refreshTokenSession(hash: randomId("unknown-")) == nil, "[\(kind)]")
        }
    }

    @Test("rotateRefreshToken: an expired token is invalid", arguments: StoreKind.allCases)
    func expiredRefreshToken(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let shortLived = f.refresh(expiresIn: 60)
            let guest = try await f.signIn(refresh: shortLived)
            f.clock.advance(by: 61)
            await expectStoreError(.invalidRefreshToken, kind) {
                try await f.store.rotateRefreshToken(hash: shortLived.hash, next: f.refresh(), now: f.now)
            }
            // Expiry is not reuse: the session stays.
            #expect(try await f.store.liveSessionUser(sessionId: guest.sessionId) == guest.user.id, "[\(kind)]")
        }
    }

    @Test("linkCredentials: in place, once, unique email", arguments: StoreKind.allCases)
    func linkCredentials(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 50)
            try await f.run(.performAction(userId: userId, action: ActionSpec(name: "ai.query", tokens: 3), quotaLimit: nil))
            let walletBefore = try await f.store.wallet(userId: userId, now: f.now)
            let entriesBefore = try await f.allEntries(userId)
            let email = "\(randomId())@example.com"

            let linked = try await f.store.linkCredentials(userId: userId, email: email, passwordHash: "hash-1")
            #expect(linked.id == userId && linked.email == email && !linked.isGuest, "[\(kind)]")
            #expect(try await f.store.user(id: userId)?.email == email, "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now) == walletBefore, "[\(kind)]")
            #expect(try await f.allEntries(userId) == entriesBefore, "[\(kind)]")
            let found = try await f.store.passwordHash(email: email)
            #expect(found?.userId == userId && found?.passwordHash == "hash-1", "[\(kind)]")
            #expect(try await f.store.passwordHash(email: "\(randomId())@example.com") == nil, "[\(kind)]")

            let other = try await f.newUser()
            await expectStoreError(.credentialInUse, kind) {
                try await f.store.linkCredentials(userId: other, email: email, passwordHash: "hash-2")
            }
            #expect(try await f.store.user(id: other)?.email == nil, "[\(kind)]")
            await expectStoreError(.alreadyLinked, kind) {
                try await f.store.linkCredentials(userId: userId, email: "\(randomId())@example.com", passwordHash: "hash-3")
            }
            await expectStoreError(.userNotFound, kind) {
                try await f.store.linkCredentials(userId: randomId(), email: "\(randomId())@example.com", passwordHash: "hash-4")
            }
            #expect(try await f.store.passwordHash(email: email)?.passwordHash == "hash-1", "[\(kind)]")
        }
    }

    @Test("deleteUser removes the account and everything it owns", arguments: StoreKind.allCases)
    func deleteUser(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let refresh = f.refresh()
            let guest = try await f.signIn(device: device, signupGrant: 30, refresh: refresh)
            let userId = guest.user.id
            let email = "\(randomId())@example.com"
            _ = try await f.store.linkCredentials(userId: userId, email: email, passwordHash: "hash")
            let holdId = randomId("hold-")
            try await f.run(.createHold(userId: userId, holdId: holdId, amount: 10, expiresAt: f.now.addingTimeInterval(600)))
            try await f.run(
                .performAction(userId: userId, action: ActionSpec(name: "reading", quota: "readings", tokens: 5), quotaLimit: 3))
            let key = IdempotencyKey(scope: userId, key: randomId(), fingerprint: "fp")
            _ = try await f.execute(.grant(userId: userId, amount: 1, reason: "keyed"), key: key)
            let survivor = try await f.newUser(tokens: 7)

            #expect(try await f.store.deleteUser(id: userId), "[\(kind)]")
            #expect(try await f.store.user(id: userId) == nil, "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now) == nil, "[\(kind)]")
            #expect(try await f.store.accountState(userId: userId, now: f.now) == nil, "[\(kind)]")
            #expect(try await f.store.entries(userId: userId, before: nil, limit: 100).isEmpty, "[\(kind)]")
            #expect(try await f.store.hold(id: holdId, userId: userId) == nil, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: guest.sessionId) == nil, "[\(kind)]")
            #expect(try await f.store.passwordHash(email: email) == nil, "[\(kind)]")
            await expectStoreError(.invalidRefreshToken, kind) {
                try await f.store.rotateRefreshToken(hash: refresh.hash, next: f.refresh(), now: f.now)
            }
            await expectStoreError(.userNotFound, kind) {
                try await f.execute(.grant(userId: userId, amount: 1, reason: "ghost"))
            }
            #expect(try await f.store.deleteUser(id: userId) == false, "[\(kind)]")
            // The device and the email are free again; other accounts are untouched.
            let again = try await f.signIn(device: device)
            #expect(again.created && again.user.id != userId, "[\(kind)]")
            _ = try await f.store.linkCredentials(userId: again.user.id, email: email, passwordHash: "hash-new")
            #expect(try await f.store.wallet(userId: survivor, now: f.now)?.balance == 7, "[\(kind)]")
            try await f.checkInvariants([survivor, again.user.id])
        }
    }
}
