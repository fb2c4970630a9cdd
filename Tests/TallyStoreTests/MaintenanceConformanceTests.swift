import Foundation
import TallyStore
import Testing

private let aiQuery = ActionSpec(name: "ai.query", tokens: 3)

/// Schema, secrets and housekeeping, against every store.
@Suite("Maintenance conformance", .timeLimit(.minutes(10)))
struct MaintenanceConformanceTests {
    @Test("migrate is repeatable; ping answers", arguments: StoreKind.allCases)
    func migrateAndPing(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 9)
            try await f.store.migrate()
            try await f.store.ping()
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 9, "[\(kind)]")
        }
    }

    @Test("secret(named:orCreate:) creates once", arguments: StoreKind.allCases)
    func secrets(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let name = randomId("secret-")
            #expect(try await f.store.secret(named: name) { "first" } == "first", "[\(kind)]")
            #expect(try await f.store.secret(named: name) { "second" } == "first", "[\(kind)]")
            #expect(try await f.store.secret(named: randomId("secret-")) { "other" } == "other", "[\(kind)]")

            let contended = randomId("secret-")
            let attempts = try await concurrently(20) { index in
                try await f.store.secret(named: contended) { "value-\(index)" }
            }
            let values = attempts.compactMap { if case .success(let value) = $0 { value } else { nil } }
            #expect(values.count == 20, "[\(kind)] \(attempts.count - values.count) calls failed")
            #expect(Set(values).count == 1, "[\(kind)] \(Set(values))")
            #expect(try await f.store.secret(named: contended) { "late" } == values.first, "[\(kind)]")
        }
    }

    @Test("purge forgets old idempotency keys and sign-ups only", arguments: StoreKind.allCases)
    func purge(kind: StoreKind) async throws {
        // `purge` reaches every account: on PostgreSQL this test gets a schema of its own.
        try await withFixture(kind, isolated: true) { f in
            let start = f.now
            let userId = try await f.newUser(tokens: 100)
            let command = Command.performAction(userId: userId, action: aiQuery, quotaLimit: nil)
            let old = IdempotencyKey(scope: userId, key: randomId("key-"), fingerprint: "fp")
            let oldResponse = try await f.execute(command, key: old).response
            f.clock.advance(by: 2 * 86_400)
            let recent = IdempotencyKey(scope: userId, key: randomId("key-"), fingerprint: "fp")
            let recentResponse = try await f.execute(command, key: recent).response

            try await f.store.purge(idempotencyBefore: start.addingTimeInterval(86_400), signupsBefore: start, signInFailuresBefore: start)
            // The old key is forgotten: the same request runs again.
            guard case .executed(let rerun) = try await f.execute(command, key: old) else {
                Issue.record("[\(kind)] a purged key replayed")
                return
            }
            #expect(try RenderedBody.decode(rerun).balance == 91, "[\(kind)]")
            #expect(rerun != oldResponse, "[\(kind)]")
            #expect(try await f.execute(command, key: recent) == .replayed(recentResponse), "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 91, "[\(kind)]")

            // Sign-ups: one allowed per hour from this address; purging them lifts the limit.
            let ip = randomId("ip-")
            _ = try await f.signIn(ip: ip, signupsPerHour: 1)
            await expectStoreError(.rateLimited, kind) { try await f.signIn(ip: ip, signupsPerHour: 1) }
            try await f.store.purge(idempotencyBefore: start, signupsBefore: f.now.addingTimeInterval(-1), signInFailuresBefore: start)
            await expectStoreError(.rateLimited, kind) { try await f.signIn(ip: ip, signupsPerHour: 1) }
            try await f.store.purge(idempotencyBefore: start, signupsBefore: f.now.addingTimeInterval(1), signInFailuresBefore: start)
            #expect(try await f.signIn(ip: ip, signupsPerHour: 1).created, "[\(kind)]")
            // The rerun key survived the second purges (they cut off before it).
            #expect(try await f.execute(command, key: old) == .replayed(rerun), "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("purgeSessions deletes revoked and expired sessions and expired tokens; keeps what could still be presented", arguments: StoreKind.allCases)
    func purgeSessions(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let day: TimeInterval = 86_400
            let revokedToken = f.refresh()
            let revoked = try await f.signIn(refresh: revokedToken)
            try await f.store.revokeSession(id: revoked.sessionId, now: f.now)
            // Live, but its only token expires in an hour: it can never be refreshed after that.
            let shortToken = f.refresh(expiresIn: 3600)
            let expired = try await f.signIn(refresh: shortToken)
            #expect(try await f.store.liveSessionUser(sessionId: expired.sessionId) == expired.user.id, "[\(kind)]")
            // Live and rotated: its first token (expired in an hour) goes, the session and its next token stay.
            let rotatedFirst = f.refresh(expiresIn: 3600)
            let rotated = try await f.signIn(refresh: rotatedFirst)
            let rotatedNext = f.refresh()
            _ = try await f.store.rotateRefreshToken(hash: rotatedFirst.hash, next: rotatedNext, now: f.now)
            // Live and rotated, its used token still unexpired: kept, so presenting it again is caught as reuse.
            let usedToken = f.refresh()
            let reused = try await f.signIn(refresh: usedToken)
            _ = try await f.store.rotateRefreshToken(hash: usedToken.hash, next: f.refresh(), now: f.now)

            f.clock.advance(by: 2 * day)
            let cutoff = f.now.addingTimeInterval(-day)
            var deleted = 0
            while true {
                let batch = try await f.store.purgeSessions(before: cutoff, limit: 100)
                if batch == 0 { break }
                deleted += batch
            }
            // The revoked session (its token goes with it, uncounted), the expired session and its token, the
            // rotated session's first token.
            #expect(deleted == 4, "[\(kind)] deleted \(deleted) rows")
            #expect(try await f.store.refreshTokenSession(hash: revokedToken.hash) == nil, "[\(kind)]")
            #expect(try await f.store.refreshTokenSession(hash: shortToken.hash) == nil, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: expired.sessionId) == nil, "[\(kind)] a purged session is still live")
            #expect(try await f.store.refreshTokenSession(hash: rotatedFirst.hash) == nil, "[\(kind)]")
            #expect(try await f.store.refreshTokenSession(hash: rotatedNext.hash) == rotated.sessionId, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: rotated.sessionId) == rotated.user.id, "[\(kind)]")
            _ = try await f.store.rotateRefreshToken(hash: rotatedNext.hash, next: f.refresh(), now: f.now)
            await expectStoreError(.refreshTokenReused, kind) {
                try await f.store.rotateRefreshToken(hash: usedToken.hash, next: f.refresh(), now: f.now)
            }
            #expect(try await f.store.liveSessionUser(sessionId: reused.sessionId) == nil, "[\(kind)]")
            // Accounts stay: only sessions go.
            #expect(try await f.store.user(id: expired.user.id) != nil, "[\(kind)]")
        }
    }

    @Test("purgeSessions works in bounded batches", arguments: StoreKind.allCases)
    func purgeSessionsInBatches(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let device = randomId("dev-")
            var tokens: [NewRefreshToken] = []
            // One device signing in again and again: the cap revokes all but two sessions.
            for _ in 0..<7 {
                let refresh = f.refresh()
                _ = try await f.signIn(device: device, refresh: refresh, sessionsPerUser: 2)
                tokens.append(refresh)
                f.clock.advance(by: 1)
            }
            f.clock.advance(by: 2 * 86_400)
            let cutoff = f.now.addingTimeInterval(-86_400)
            #expect(try await f.store.purgeSessions(before: cutoff, limit: 2) == 2, "[\(kind)] one batch of two revoked sessions")
            #expect(try await f.store.purgeSessions(before: cutoff, limit: 2) == 2, "[\(kind)]")
            #expect(try await f.store.purgeSessions(before: cutoff, limit: 2) == 1, "[\(kind)]")
            #expect(try await f.store.purgeSessions(before: cutoff, limit: 2) == 0, "[\(kind)]")
            let remaining = try await tokens.asyncFilter { try await f.store.refreshTokenSession(hash: $0.hash) != nil }
            #expect(remaining == Array(tokens.suffix(2)), "[\(kind)] the two live sessions keep their tokens")
        }
    }
}

extension Array where Element: Sendable {
    /// The elements for which `isIncluded` holds, in order, awaiting each.
    func asyncFilter(_ isIncluded: (Element) async throws -> Bool) async rethrows -> [Element] {
        var kept: [Element] = []
        for element in self where try await isIncluded(element) { kept.append(element) }
        return kept
    }
}
