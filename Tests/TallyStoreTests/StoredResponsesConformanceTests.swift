import Foundation
import TallyStore
import Testing

/// Reading a series of stored responses by key prefix, against every store.
@Suite("Stored responses by prefix conformance", .timeLimit(.minutes(10)))
struct StoredResponsesConformanceTests {
    @Test("storedResponses(scope:keyPrefix:limit:) finds the scope's keys that begin with the prefix, newest first, at most limit", arguments: StoreKind.allCases)
    func byPrefix(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 100)
            let other = try await f.newUser(tokens: 100)
            func store(_ key: String, for user: String = userId, _ body: String) async throws {
                let command = Command.performAction(userId: user, action: ActionSpec(name: "daily", tokens: 1), quotaLimit: nil)
                _ = try await f.store.execute(
                    command, idempotency: IdempotencyKey(scope: user, key: key, fingerprint: "f-" + key), now: f.now
                ) { _ in StoredResponse(status: 200, body: Array(body.utf8)) }
                f.clock.advance(by: 1)
            }
            try await store("tally.daily a/2027-01-16T00:00:00Z", "first")
            try await store("tally.daily ab/2027-01-16T00:00:00Z", "another series sharing the first letters")
            try await store("tally.daily a/2027-01-17T00:00:00Z", "second")
            try await store("tally.daily a/2027-01-17T00:00:00Z+", "third, 日本")
            try await store("tally.daily a/2027-01-18T00:00:00Z", for: other, "another user's")
            try await store("TALLY.DAILY A/2027-01-19T00:00:00Z", "another case")
            let all = try await f.store.storedResponses(scope: userId, keyPrefix: "tally.daily a/", limit: 10)
            #expect(all.map { String(decoding: $0.body, as: UTF8.self) } == ["third, 日本", "second", "first"], "[\(kind)]")
            #expect(all.allSatisfy { $0.status == 200 })
            let latest = try await f.store.storedResponses(scope: userId, keyPrefix: "tally.daily a/", limit: 1)
            #expect(latest.map { String(decoding: $0.body, as: UTF8.self) } == ["third, 日本"], "[\(kind)]")
            // A prefix with SQL's wildcards in it matches them literally.
            #expect(try await f.store.storedResponses(scope: userId, keyPrefix: "tally.daily %", limit: 10).isEmpty, "[\(kind)]")
            #expect(try await f.store.storedResponses(scope: userId, keyPrefix: "tally.daily _/", limit: 10).isEmpty, "[\(kind)]")
            #expect(try await f.store.storedResponses(scope: randomId(), keyPrefix: "tally.daily a/", limit: 10).isEmpty, "[\(kind)]")
        }
    }
}
