import Foundation
import TallySQLite
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// The console overview's hourly bookkeeping: which hours are settled and read once, and numbers that always equal the
/// ledger's own totals over today (UTC) and the last 168 hours, on a real SQLite store over 9 days of injected time.
@Suite("Console overview", .timeLimit(.minutes(10)))
struct ConsoleOverviewTests {
    @Test("hours: the current one, 167 before it, UTC midnight, settled two minutes after their end")
    func hours() {
        let hour: TimeInterval = 3_600
        let midnight = Date(timeIntervalSince1970: 1_800_000_000 - 1_800_000_000.truncatingRemainder(dividingBy: 86_400))
        let current = Int64(midnight.timeIntervalSince1970 / hour)
        let justAfter = OverviewHours(now: midnight.addingTimeInterval(60))
        #expect(justAfter.current == current && justAfter.midnight == current && justAfter.first == current - 167)
        #expect(justAfter.lastSettled == current - 2, "the hour before midnight ended a minute ago: not settled yet")
        #expect(OverviewHours(now: midnight.addingTimeInterval(120)).lastSettled == current - 1)
        let late = OverviewHours(now: midnight.addingTimeInterval(23 * hour + 3_599))
        #expect(late.current == current + 23 && late.midnight == current && late.lastSettled == current + 22)
        #expect(justAfter.unread(readThrough: nil) == (current - 167)...(current - 2))
        #expect(justAfter.unread(readThrough: current - 3) == (current - 2)...(current - 2))
        #expect(justAfter.unread(readThrough: current - 2) == nil)
        #expect(justAfter.unread(readThrough: current + 5) == nil, "a clock set back reads nothing settled again")
    }

    @Test("the cached numbers equal the ledger's totals at every step over 9 days: hours settle, the week slides, midnight resets today")
    func numbersFollowTheLedger() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-overview-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try await store.migrate()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = ManualClock(start)
        let refresh = NewRefreshToken(hash: UUID().uuidString, expiresAt: clock.now.addingTimeInterval(30 * 86_400))
        let user = try await store.signInGuest(
            deviceHash: UUID().uuidString, ipHash: "ip", signupsPerHour: 100, signupGrant: 1_000_000, sessionId: UUID().uuidString,
            refresh: refresh, sessionsPerUser: 50, now: clock.now
        ).user.id
        var spent: [(at: Date, name: String, tokens: Int64)] = []
        var random = SystemRandomNumberGenerator()
        let cache = OverviewCache(store: store)
        for step in 0..<400 {
            // Every ~33 minutes on average, an action; sometimes a read in between, at any second.
            clock.advance(by: Double.random(in: 1...4_000, using: &random).rounded())
            let (name, tokens) = (["chat", "draw", "read"].randomElement(using: &random)!, Int64.random(in: 1...9, using: &random))
            _ = try await store.execute(
                .performAction(userId: user, action: ActionSpec(name: name, tokens: tokens), quotaLimit: nil), idempotency: nil,
                now: clock.now, render: { _ in StoredResponse(status: 200, body: []) })
            spent.append((clock.now, name, tokens))
            guard step % 3 == 0 else { continue }
            clock.advance(by: Double.random(in: 0...300, using: &random).rounded())
            let numbers = try await cache.refreshed(now: clock.now)
            let hours = OverviewHours(now: clock.now)
            for (period, from) in [(numbers.today, hours.midnight), (numbers.week, hours.first)] {
                let mine = spent.filter { $0.at >= OverviewHours.start(from) }
                #expect(period.since == OverviewHours.start(from))
                #expect(period.total(.debit) == KindTotal(kind: .debit, entries: mine.count, amount: -mine.map(\.tokens).reduce(0, +)), "step \(step)")
                let byName = Dictionary(grouping: mine, by: \.name).map { name, entries in
                    ReasonTotal(reason: name, entries: entries.count, tokens: entries.map(\.tokens).reduce(0, +))
                }
                #expect(period.topReasons == byName.sorted(by: ReasonTotal.mostTokensFirst), "step \(step)")
                #expect(period.total(.grant).entries == (start >= OverviewHours.start(from) ? 1 : 0), "step \(step): the sign-up grant")
            }
            #expect(numbers.users == UserCounts(guests: 1, accounts: 0))
        }
        #expect(clock.now.timeIntervalSince(start) > 8 * 86_400, "the week slid")
    }
}
