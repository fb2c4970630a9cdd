import Foundation
import TallyStore
import Testing

private let reading = ActionSpec(name: "reading", quota: "readings", tokens: 5)
private let horoscope = ActionSpec(name: "horoscope", quota: "readings")

/// Installations (device secrets): one guest at a time, never a linked account, and free uses counted per
/// installation for guests, against every store. The clock starts at 2027-01-15T08:00:00Z (UTC accounts).
@Suite("Installation conformance", .timeLimit(.minutes(10)))
struct InstallationConformanceTests {
    /// 2027-01-16T00:00:00Z, the end of the first UTC day.
    private let utcMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600)

    @Test("signInGuest: one guest per installation; a linked account is never opened by the device secret", arguments: StoreKind.allCases)
    func linkDetachesTheInstallation(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let first = try await f.signIn(device: device)
            let again = try await f.signIn(device: device)
            #expect(first.created && !again.created && again.user.id == first.user.id, "[\(kind)] sign-out and in must keep the guest")

            let email = "\(randomId())@example.com"
            _ = try await f.store.linkCredentials(userId: first.user.id, email: email, passwordHash: "hash")
            let next = try await f.signIn(device: device)
            #expect(next.created, "[\(kind)]")
            #expect(next.user.id != first.user.id, "[\(kind)] the device secret opened the linked account")
            #expect(next.user.isGuest, "[\(kind)]")
            #expect(try await f.signIn(device: device).user.id == next.user.id, "[\(kind)] the new guest is the installation's")
            // The linked account is reached by its password only, and still works.
            #expect(try await f.store.passwordHash(email: email)?.userId == first.user.id, "[\(kind)]")
            let session = try await f.store.openSession(
                userId: first.user.id, sessionId: randomId("ses-"), refresh: f.refresh(), sessionsPerUser: 50, now: f.now)
            #expect(session.user.email == email, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: first.sessionId) == first.user.id, "[\(kind)]")
        }
    }

    @Test("quotas: a new guest on the installation continues the day; linked accounts count alone", arguments: StoreKind.allCases)
    func installationKeepsTheDay(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let first = try await f.signIn(device: device).user.id
            for used in 1...3 {
                let outcome = try await f.run(.performAction(userId: first, action: reading, quotaLimit: 3))
                #expect(outcome.payment == .useQuota, "[\(kind)]")
                #expect(outcome.state.installation?.id == device, "[\(kind)]")
                #expect(outcome.state.installation?.counters["readings"] == QuotaCounter(used: used, windowEnd: utcMidnight), "[\(kind)]")
            }
            _ = try await f.store.linkCredentials(userId: first, email: "\(randomId())@example.com", passwordHash: "hash")

            // A new guest on the installation: no free reading left today, though it never used one.
            let second = try await f.signIn(device: device).user.id
            try await f.run(.grant(userId: second, amount: 20, reason: "test"))
            let state = try #require(try await f.store.accountState(userId: second, now: f.now), "[\(kind)]")
            #expect(state.counters.isEmpty, "[\(kind)]")
            #expect(state.installation == InstallationCounters(
                id: device, counters: ["readings": QuotaCounter(used: 3, windowEnd: utcMidnight)]), "[\(kind)]")
            let paid = try await f.run(.performAction(userId: second, action: reading, quotaLimit: 3))
            #expect(paid.payment == .charge(5) && paid.state.wallet.balance == 15, "[\(kind)]")
            let refused = await expectStoreError(.quotaExhausted, kind) {
                try await f.execute(.performAction(userId: second, action: horoscope, quotaLimit: 3))
            }
            #expect(refused?.state?.installation?.counters["readings"]?.used == 3, "[\(kind)]")

            // The linked account goes on with its own count, and no longer charges the installation.
            let linked = try #require(try await f.store.accountState(userId: first, now: f.now), "[\(kind)]")
            #expect(linked.installation == nil && linked.counters["readings"]?.used == 3, "[\(kind)]")
            f.clock.set(utcMidnight)
            let linkedUse = try await f.run(.performAction(userId: first, action: horoscope, quotaLimit: 3))
            #expect(linkedUse.payment == .useQuota && linkedUse.state.installation == nil, "[\(kind)]")
            for used in 1...3 {
                let outcome = try await f.run(.performAction(userId: second, action: horoscope, quotaLimit: 3))
                #expect(outcome.state.counters["readings"]?.used == used, "[\(kind)]")
                #expect(outcome.state.installation?.counters["readings"]?.used == used, "[\(kind)] the linked use was charged to it")
            }
            await expectStoreError(.quotaExhausted, kind) {
                try await f.execute(.performAction(userId: second, action: horoscope, quotaLimit: 3))
            }

            // A deleted guest's installation keeps its day too.
            #expect(try await f.store.deleteUser(id: second), "[\(kind)]")
            let third = try await f.signIn(device: device)
            #expect(third.created && third.user.id != second, "[\(kind)]")
            await expectStoreError(.quotaExhausted, kind) {
                try await f.execute(.performAction(userId: third.user.id, action: horoscope, quotaLimit: 3))
            }
            try await f.checkInvariants([first, third.user.id])
        }
    }

    @Test("quotas: the installation's window follows its own end, then the guest's zone", arguments: StoreKind.allCases)
    func installationWindowKeepsItsEnd(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let first = try await f.signIn(device: device).user.id
            // 08:00Z is 17:00 in Tokyo: the first guest's day (and the installation's window) ends at 15:00Z.
            try await f.run(.updateProfile(userId: first, timezone: "Asia/Tokyo", language: nil))
            let tokyoMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 7 * 3600)
            for _ in 1...3 { try await f.run(.performAction(userId: first, action: horoscope, quotaLimit: 3)) }
            _ = try await f.store.linkCredentials(userId: first, email: "\(randomId())@example.com", passwordHash: "hash")

            // The next guest is in UTC, whose day ends later: the installation's window still ends at Tokyo's midnight.
            let second = try await f.signIn(device: device).user.id
            let refused = await expectStoreError(.quotaExhausted, kind) {
                try await f.execute(.performAction(userId: second, action: horoscope, quotaLimit: 3))
            }
            #expect(refused?.state?.installation?.counters["readings"]?.windowEnd == tokyoMidnight, "[\(kind)]")
            f.clock.set(tokyoMidnight)
            let outcome = try await f.run(.performAction(userId: second, action: horoscope, quotaLimit: 3))
            #expect(outcome.payment == .useQuota, "[\(kind)]")
            // A new window starting at a moment that is not a UTC midnight lasts to the first UTC midnight 24 h on.
            let end = Date(timeIntervalSince1970: 1_800_000_000 + 40 * 3600)  // 2027-01-17T00:00Z
            #expect(outcome.state.installation?.counters["readings"] == QuotaCounter(used: 1, windowEnd: end), "[\(kind)]")
            #expect(outcome.state.counters["readings"] == QuotaCounter(used: 1, windowEnd: utcMidnight), "[\(kind)]")
        }
    }

    @Test("quotas: concurrent uses of a guest get exactly the installation's last free use", arguments: StoreKind.allCases)
    func concurrentLastUse(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let first = try await f.signIn(device: device).user.id
            for _ in 1...2 { try await f.run(.performAction(userId: first, action: horoscope, quotaLimit: 3)) }
            _ = try await f.store.linkCredentials(userId: first, email: "\(randomId())@example.com", passwordHash: "hash")
            let second = try await f.signIn(device: device).user.id
            try await f.run(.grant(userId: second, amount: 100, reason: "test"))

            let attempts = try await concurrently(12) { _ in
                try await f.run(.performAction(userId: second, action: reading, quotaLimit: 3), key: IdempotencyKey(
                    scope: second, key: randomId(), fingerprint: "fp"))
            }
            let outcomes = attempts.compactMap { if case .success(let outcome) = $0 { outcome } else { nil } }
            #expect(outcomes.count == 12, "[\(kind)] \(attempts.filter { if case .success = $0 { false } else { true } })")
            #expect(outcomes.filter { $0.payment == .useQuota }.count == 1, "[\(kind)]")
            #expect(outcomes.filter { $0.payment == .charge(5) }.count == 11, "[\(kind)]")
            let state = try #require(try await f.store.accountState(userId: second, now: f.now))
            #expect(state.counters["readings"]?.used == 1 && state.installation?.counters["readings"]?.used == 3, "[\(kind)]")
            #expect(state.wallet.balance == 45, "[\(kind)]")
            try await f.checkInvariants([second])
        }
    }

    /// Many guests at once, each using a free reading while holding and being granted tokens: on PostgreSQL
    /// their writes share batch statements of every shape (with and without holds and installation counters).
    @Test("quotas: guests' free uses written in batches with other accounts' holds and grants", arguments: StoreKind.allCases)
    func mixedBatches(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let guests = try await concurrently(24) { _ in try await f.signIn().user.id }.compactMap {
                if case .success(let userId) = $0 { userId } else { nil }
            }
            #expect(guests.count == 24, "[\(kind)]")
            for userId in guests { try await f.run(.grant(userId: userId, amount: 3, reason: "holds")) }
            for round in 0..<3 {
                let attempts = try await concurrently(guests.count * 3) { index in
                    let userId = guests[index / 3]
                    switch index % 3 {
                    case 0: return try await f.run(.performAction(userId: userId, action: reading, quotaLimit: 3))
                    case 1: return try await f.run(.grant(userId: userId, amount: 10, reason: "round \(round)"))
                    default:
                        return try await f.run(
                            .createHold(userId: userId, holdId: randomId("hold-"), amount: 1, expiresAt: f.now.addingTimeInterval(600)))
                    }
                }
                let failures = attempts.filter { if case .success = $0 { false } else { true } }
                #expect(failures.isEmpty, "[\(kind)] round \(round): \(failures)")
            }
            for userId in guests {
                let state = try #require(try await f.store.accountState(userId: userId, now: f.now))
                #expect(state.counters["readings"]?.used == 3 && state.installation?.counters["readings"]?.used == 3, "[\(kind)]")
                #expect(state.wallet == WalletState(balance: 33, held: 3, version: 7), "[\(kind)]")
            }
            try await f.checkInvariants(guests)
        }
    }

    /// The guest's uses race its own link and the next guest's uses: every free use made as a guest is on
    /// the installation exactly once, and the installation never gives more than its limit.
    @Test("quotas: a guest's uses racing its link and the next guest's uses count exactly", arguments: StoreKind.allCases)
    func handoverRace(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            for round in 0..<4 {
                let device = randomId("dev-")
                let first = try await f.signIn(device: device).user.id
                for _ in 1...2 { try await f.run(.performAction(userId: first, action: horoscope, quotaLimit: 3)) }
                @Sendable func uses(of userId: String) async throws -> [Attempt<CommandOutcome>] {
                    try await concurrently(3) { _ in try await f.run(.performAction(userId: userId, action: horoscope, quotaLimit: 3)) }
                }
                @Sendable func handover() async throws -> (String, [Attempt<CommandOutcome>]) {
                    _ = try await f.store.linkCredentials(userId: first, email: "\(randomId())@example.com", passwordHash: "hash")
                    let second = try await f.signIn(device: device).user.id
                    return (second, try await uses(of: second))
                }
                async let racing = uses(of: first)
                let (second, secondUses) = try await handover()
                let firstUses = try await racing
                let asGuest = firstUses.filter { if case .success(let outcome) = $0 { outcome.state.installation != nil } else { false } }.count
                let secondFree = secondUses.filter { if case .success = $0 { true } else { false } }.count
                for attempt in firstUses + secondUses {
                    if case .failure(let error) = attempt { #expect(error.code == .quotaExhausted, "[\(kind)] round \(round)") }
                    if case .other(let error) = attempt { Issue.record("[\(kind)] round \(round): \(error)") }
                }
                let installation = try #require(try await f.store.accountState(userId: second, now: f.now)?.installation)
                let used = installation.counters["readings"]?.used ?? 0
                #expect(used == 2 + asGuest + secondFree, "[\(kind)] round \(round): \(asGuest) guest uses, \(secondFree) of the next guest")
                #expect(used <= 3, "[\(kind)] round \(round)")
            }
        }
    }
}
