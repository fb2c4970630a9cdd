import Foundation
import TallyStore
import Testing

private let aiQuery = ActionSpec(name: "ai.query", tokens: 3)

/// Schema, secrets and housekeeping, against every store.
@Suite("Maintenance conformance")
struct MaintenanceConformanceTests {
    @Test("migrate is repeatable; ping answers", arguments: StoreKind.enabled)
    func migrateAndPing(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 9)
            try await f.store.migrate()
            try await f.store.ping()
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 9, "[\(kind)]")
        }
    }

    @Test("secret(named:orCreate:) creates once", arguments: StoreKind.enabled)
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

    @Test("purge forgets old idempotency keys and sign-ups only", arguments: StoreKind.enabled)
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

            try await f.store.purge(idempotencyBefore: start.addingTimeInterval(86_400), signupsBefore: start)
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
            try await f.store.purge(idempotencyBefore: start, signupsBefore: f.now.addingTimeInterval(-1))
            await expectStoreError(.rateLimited, kind) { try await f.signIn(ip: ip, signupsPerHour: 1) }
            try await f.store.purge(idempotencyBefore: start, signupsBefore: f.now.addingTimeInterval(1))
            #expect(try await f.signIn(ip: ip, signupsPerHour: 1).created, "[\(kind)]")
            // The rerun key survived the second purges (they cut off before it).
            #expect(try await f.execute(command, key: old) == .replayed(rerun), "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }
}
