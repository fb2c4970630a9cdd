import Foundation
import TallyPostgres
import TallyStore
import Testing

/// `AttestationStore` on every store: a challenge is used once and not after it expires, a key is attested once, its
/// counter only rises and is accepted once even when 20 callers — or two processes — raise it to the same value, and a
/// merged guest's key acts for its account.
@Suite("Attestation conformance", .timeLimit(.minutes(2)))
struct AttestationConformanceTests {
    static func key(for userId: String, at now: Date) -> AttestedKeyRecord {
        AttestedKeyRecord(
            keyId: Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString(), userId: userId,
            installation: randomId("inst-"), publicKey: [4] + (0..<64).map { _ in UInt8.random(in: 0...255) },
            environment: "development", receipt: [1, 2, 3], attestedAt: now)
    }

    @Test("A challenge is used once, within its lifetime; expired ones are purged", arguments: StoreKind.allCases)
    func challenges(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let hash = randomId("challenge-")
            try await f.store.issueAttestationChallenge(hash: hash, expiresAt: f.now.addingTimeInterval(300))
            let used = try await concurrently(20) { _ in try await f.store.consumeAttestationChallenge(hash: hash, now: f.now) }
            #expect(used.compactMap { if case .success(let ok) = $0 { ok } else { nil } }.filter { $0 }.count == 1, "[\(kind)]")
            let late = randomId("challenge-")
            try await f.store.issueAttestationChallenge(hash: late, expiresAt: f.now.addingTimeInterval(300))
            #expect(try await f.store.consumeAttestationChallenge(hash: late, now: f.now.addingTimeInterval(300)) == false, "[\(kind)]")
            #expect(try await f.store.purgeAttestationChallenges(now: f.now.addingTimeInterval(300)) >= 1, "[\(kind)]")
        }
    }

    @Test("A key is stored once; its counter rises once per value, also with 20 callers at once", arguments: StoreKind.allCases)
    func keysAndCounters(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let key = Self.key(for: user, at: f.now)
            #expect(try await f.store.saveAttestedKey(key), "[\(kind)]")
            #expect(try await f.store.saveAttestedKey(Self.key(for: user, at: f.now).with(keyId: key.keyId)) == false, "[\(kind)]")
            let stored = try #require(try await f.store.attestedKey(keyId: key.keyId))
            #expect(stored == key, "[\(kind)]")
            #expect(try await f.store.hasAttestedKey(userId: user), "[\(kind)]")
            let raised = try await concurrently(20) { _ in try await f.store.advanceAssertionCounter(keyId: key.keyId, to: 5) }
            #expect(raised.compactMap { if case .success(let ok) = $0 { ok } else { nil } }.filter { $0 }.count == 1, "[\(kind)]")
            #expect(try await f.store.advanceAssertionCounter(keyId: key.keyId, to: 4) == false, "[\(kind)] never backwards")
            #expect(try await f.store.advanceAssertionCounter(keyId: key.keyId, to: 6), "[\(kind)]")
            #expect(try await f.store.attestedKey(keyId: key.keyId)?.counter == 6, "[\(kind)]")
        }
    }

    @Test("A merged guest's key acts for the account it was merged into", arguments: StoreKind.allCases)
    func mergedGuest(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guest = try await f.signIn(device: randomId("dev-")).user.id
            let key = Self.key(for: guest, at: f.now)
            #expect(try await f.store.saveAttestedKey(key), "[\(kind)]")
            let account = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
            _ = try await f.store.merge(guestId: guest, into: account, now: f.now)
            let stored = try #require(try await f.store.attestedKey(keyId: key.keyId))
            #expect(stored.userId == guest && stored.accountId == account, "[\(kind)]")
            #expect(try await f.store.hasAttestedKey(userId: account), "[\(kind)]")
            try await f.store.recordUnattestedSpend(userId: account, reason: "missing", now: f.now)
            try await f.store.recordUnattestedSpend(userId: account, reason: "invalid_signature", now: f.now)
            #expect(try await f.store.unattestedSpends(userId: account) == UnattestedSpends(count: 2, lastReason: "invalid_signature", lastAt: f.now))
        }
    }

    @Test("Two processes raising one key's counter to the same value: one succeeds")
    func twoProcesses() async throws {
        try await withTwoPostgresStores { first, second in
            let user = try await newPostgresUser(first, tokens: 0, now: defaultStart)
            let key = Self.key(for: user, at: defaultStart)
            #expect(try await first.saveAttestedKey(key))
            for counter in UInt32(1)...20 {
                async let a = first.advanceAssertionCounter(keyId: key.keyId, to: counter)
                async let b = second.advanceAssertionCounter(keyId: key.keyId, to: counter)
                let (x, y) = try await (a, b)
                #expect(x != y, "counter \(counter): exactly one process accepts it")
            }
        }
    }
}

extension AttestedKeyRecord {
    func with(keyId: String) -> AttestedKeyRecord {
        var copy = self
        copy.keyId = keyId
        return copy
    }
}
