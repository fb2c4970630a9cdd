import Foundation
import TallyStore
import Testing

private let reading = ActionSpec(name: "reading", quota: "readings", tokens: 5)
private let horoscope = ActionSpec(name: "horoscope", quota: "readings")
private let aiQuery = ActionSpec(name: "ai.query", tokens: 3)

/// Daily quotas, premium and the profile, against every store. The clock starts at 2027-01-15T08:00:00Z.
@Suite("Quota conformance", .timeLimit(.minutes(10)))
struct QuotaConformanceTests {
    /// 2027-01-16T00:00:00+09:00, the first Tokyo midnight after the default start.
    private let tokyoMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 7 * 3600)

    @Test("quotas: free uses, then tokens, then refusal; reset at local midnight", arguments: StoreKind.allCases)
    func quotaThenTokens(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 10)
            let profile = try await f.run(.updateProfile(userId: userId, timezone: "Asia/Tokyo", language: nil))
            #expect(profile.state.user.timezone == "Asia/Tokyo" && profile.entry == nil, "[\(kind)]")
            let perform = Command.performAction(userId: userId, action: reading, quotaLimit: 3)

            for used in 1...3 {
                let outcome = try await f.run(perform)
                #expect(outcome.payment == .useQuota && outcome.entry == nil, "[\(kind)] use \(used)")
                #expect(outcome.state.counters["readings"] == QuotaCounter(used: used, windowEnd: tokyoMidnight), "[\(kind)] use \(used)")
                #expect(outcome.state.wallet.balance == 10, "[\(kind)]")
            }
            for balance in [Int64(5), 0] {
                let outcome = try await f.run(perform)
                #expect(outcome.payment == .charge(5), "[\(kind)]")
                #expect(outcome.entry?.kind == .debit && outcome.entry?.amount == -5 && outcome.entry?.reason == "reading", "[\(kind)]")
                #expect(outcome.state.wallet.balance == balance, "[\(kind)]")
                #expect(outcome.state.counters["readings"]?.used == 3, "[\(kind)]")
            }
            let broke = await expectStoreError(.insufficientTokens, kind) { try await f.execute(perform) }
            #expect(broke?.state?.counters["readings"] == QuotaCounter(used: 3, windowEnd: tokyoMidnight), "[\(kind)]")
            #expect(broke?.state?.wallet.balance == 0, "[\(kind)]")
            let exhausted = await expectStoreError(.quotaExhausted, kind) {
                try await f.execute(.performAction(userId: userId, action: horoscope, quotaLimit: 3))
            }
            #expect(exhausted?.state?.counters["readings"]?.used == 3, "[\(kind)]")

            f.clock.set(tokyoMidnight.addingTimeInterval(-1))
            await expectStoreError(.quotaExhausted, kind) {
                try await f.execute(.performAction(userId: userId, action: horoscope, quotaLimit: 3))
            }
            f.clock.set(tokyoMidnight)
            let fresh = try await f.run(perform)
            #expect(fresh.payment == .useQuota, "[\(kind)]")
            #expect(
                fresh.state.counters["readings"] == QuotaCounter(used: 1, windowEnd: tokyoMidnight.addingTimeInterval(86_400)), "[\(kind)]")
            #expect(try await f.store.accountState(userId: userId, now: f.now)?.counters["readings"]?.used == 1, "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("quotas: a time-zone change keeps the open window and follows the new zone afterwards", arguments: StoreKind.allCases)
    func timezoneChange(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser()
            try await f.run(.updateProfile(userId: userId, timezone: "America/New_York", language: nil))
            let perform = Command.performAction(userId: userId, action: horoscope, quotaLimit: 3)
            let newYorkMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 21 * 3600)  // 2027-01-16T00:00-05:00
            for _ in 1...3 { try await f.run(perform) }

            // 16:00Z: Tokyo's day already turned over, but the New York window stays.
            f.clock.set(Date(timeIntervalSince1970: 1_800_000_000 + 8 * 3600))
            try await f.run(.updateProfile(userId: userId, timezone: "Asia/Tokyo", language: nil))
            let refused = await expectStoreError(.quotaExhausted, kind) { try await f.execute(perform) }
            #expect(refused?.state?.counters["readings"] == QuotaCounter(used: 3, windowEnd: newYorkMidnight), "[\(kind)]")

            // At the New York midnight a new window opens; it ends at a Tokyo midnight at least 23 hours later.
            f.clock.set(newYorkMidnight)
            let outcome = try await f.run(perform)
            #expect(
                outcome.state.counters["readings"]
                    == QuotaCounter(used: 1, windowEnd: Date(timeIntervalSince1970: 1_800_000_000 + 55 * 3600)), "[\(kind)]")
        }
    }

    @Test("quotas: premium makes quota actions free, token-only actions still cost", arguments: StoreKind.allCases)
    func premium(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 10)
            let perform = Command.performAction(userId: userId, action: reading, quotaLimit: 3)
            for _ in 1...3 { try await f.run(perform) }
            let until = f.now.addingTimeInterval(86_400)
            let premium = try await f.run(.setPremium(userId: userId, until: until))
            #expect(premium.state.user.premiumUntil == until && premium.entry == nil, "[\(kind)]")
            #expect(try await f.store.user(id: userId)?.premiumUntil == until, "[\(kind)]")

            for command in [perform, .performAction(userId: userId, action: horoscope, quotaLimit: 3)] {
                let outcome = try await f.run(command)
                #expect(outcome.payment == .premium && outcome.entry == nil, "[\(kind)]")
                #expect(outcome.state.wallet.balance == 10 && outcome.state.counters["readings"]?.used == 3, "[\(kind)]")
            }
            let query = try await f.run(.performAction(userId: userId, action: aiQuery, quotaLimit: nil))
            #expect(query.payment == .charge(3) && query.state.wallet.balance == 7, "[\(kind)]")

            // Premium ends; by then (08:00:01 the next day, UTC) the daily window has turned over too.
            f.clock.advance(by: 86_401)
            let lapsed = try await f.run(perform)
            #expect(lapsed.payment == .useQuota && lapsed.state.counters["readings"]?.used == 1, "[\(kind)]")

            let cleared = try await f.run(.setPremium(userId: userId, until: nil))
            #expect(cleared.state.user.premiumUntil == nil, "[\(kind)]")
            #expect(try await f.store.user(id: userId)?.premiumUntil == nil, "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("updateProfile: nil fields are left alone", arguments: StoreKind.allCases)
    func updateProfile(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 3)
            try await f.run(.updateProfile(userId: userId, timezone: "Europe/Paris", language: "fr"))
            let language = try await f.run(.updateProfile(userId: userId, timezone: nil, language: "de"))
            #expect(language.state.user.timezone == "Europe/Paris" && language.state.user.language == "de", "[\(kind)]")
            let zone = try await f.run(.updateProfile(userId: userId, timezone: "Asia/Tokyo", language: nil))
            #expect(zone.state.user.timezone == "Asia/Tokyo" && zone.state.user.language == "de", "[\(kind)]")
            let stored = try await f.store.user(id: userId)
            #expect(stored?.timezone == "Asia/Tokyo" && stored?.language == "de" && stored?.isGuest == true, "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now) == WalletState(balance: 3, held: 0, version: 1), "[\(kind)]")
            await expectStoreError(.userNotFound, kind) {
                try await f.execute(.updateProfile(userId: randomId(), timezone: "UTC", language: nil))
            }
        }
    }
}
