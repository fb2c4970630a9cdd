import Foundation
import Synchronization
import TallyStore

/// The hours the overview sums, from one instant: pure, so that the cache's bookkeeping is tested without a store.
///
/// "Today" is the UTC day so far; "7 days" is the current hour and the 167 before it. An hour is *settled* two minutes
/// after it ends: its totals are read once then and kept, since no write lands in it any more (a ledger entry takes its
/// writer's clock inside a transaction that lasts milliseconds; a write stamped more than two minutes late, from a
/// clock that far behind, would be missed until the process restarts). The hours after the last settled one are read
/// again on every refresh: at most an hour and two minutes of entries.
struct OverviewHours: Equatable {
    static let settleSeconds: Int64 = 120
    static let weekHours: Int64 = 7 * 24

    /// The hour `now` is in (hours since 1970, UTC).
    let current: Int64
    /// The first hour of the 7 days.
    let first: Int64
    /// The first hour of today (UTC).
    let midnight: Int64
    /// The newest settled hour.
    let lastSettled: Int64

    init(now: Date) {
        let millis = now.millis, hour = HourlyTotalsBuilder.hourMillis
        current = Self.floorDiv(millis, hour)
        first = current - Self.weekHours + 1
        midnight = current - Self.floorMod(current, 24)
        lastSettled = Self.floorDiv(millis - Self.settleSeconds * 1000, hour) - 1
    }

    /// The settled hours still to read when those up to `readThrough` have been read: `nil` when none.
    func unread(readThrough: Int64?) -> ClosedRange<Int64>? {
        let from = max(first, (readThrough ?? .min) &+ 1)
        return from <= lastSettled ? from...lastSettled : nil
    }

    /// The start of `hour`.
    static func start(_ hour: Int64) -> Date { Date(millis: hour * HourlyTotalsBuilder.hourMillis) }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }
    private static func floorMod(_ a: Int64, _ b: Int64) -> Int64 { a - floorDiv(a, b) * b }
}

/// The overview's numbers. A week of a busy ledger is a long range (2.2–2.5 s for 1,000,000 entries, debug build,
/// SQLite), so it is read once, by the hour: each settled hour's totals are kept (168 small buckets) and a refresh reads
/// only the unsettled hours. Numbers older than 10 s are answered as they are while one refresh at a time runs in a
/// task of its own; only the first overview of a process waits for the week, unless the sign-in page started the read. The user counts (the one whole-table
/// count) are read at most once a minute.
final class OverviewCache: Sendable {
    struct Numbers: Sendable {
        var users: UserCounts
        var usersCountedAt: Date
        var today: PeriodTotals
        var week: PeriodTotals
        var readAt: Date
    }

    private struct State {
        var numbers: Numbers?
        var refresh: Task<Numbers, any Error>?
        /// Settled hours with any totals, and the newest hour read.
        var settled: [Int64: PeriodTotals] = [:]
        var readThrough: Int64?
    }

    private let store: any ConsoleStore
    private let state = Mutex(State())

    init(store: any ConsoleStore) {
        self.store = store
    }

    /// The numbers as of at most 10 s ago, or the last ones read while a refresh runs; read now the first time.
    func numbers(now: Date) async throws -> Numbers {
        let (cached, refresh) = startRefreshIfStale(now: now)
        if let cached { return cached }
        return try await refresh!.value
    }

    /// Starts reading the numbers when they are missing or stale and no read runs, without waiting for it.
    func prefetch(now: Date) {
        _ = startRefreshIfStale(now: now)
    }

    /// The numbers (nil before the first read) and the read under way, started here when they are stale.
    private func startRefreshIfStale(now: Date) -> (Numbers?, Task<Numbers, any Error>?) {
        state.withLock { state -> (Numbers?, Task<Numbers, any Error>?) in
            if let numbers = state.numbers, now.timeIntervalSince(numbers.readAt) < 10, now >= numbers.readAt {
                return (numbers, nil)
            }
            if state.refresh == nil {
                state.refresh = Task { try await self.read(now: now) }
            }
            return (state.numbers, state.refresh)
        }
    }

    /// The numbers read at `now`, after any refresh under way: what the next overview shows once its refresh is done.
    func refreshed(now: Date) async throws -> Numbers {
        if let running = state.withLock({ $0.refresh }) { _ = try? await running.value }
        let refresh = state.withLock { state in
            if let running = state.refresh { return running }
            let refresh = Task { try await self.read(now: now) }
            state.refresh = refresh
            return refresh
        }
        return try await refresh.value
    }

    private func read(now: Date) async throws -> Numbers {
        defer { state.withLock { $0.refresh = nil } }
        let hours = OverviewHours(now: now)
        let (readThrough, previous) = state.withLock { ($0.readThrough, $0.numbers) }
        if let unread = hours.unread(readThrough: readThrough) {
            let read = try await store.hourlyTotals(
                from: OverviewHours.start(unread.lowerBound), to: OverviewHours.start(unread.upperBound + 1))
            state.withLock { state in
                for totals in read { state.settled[totals.since.millis / HourlyTotalsBuilder.hourMillis] = totals }
                state.readThrough = unread.upperBound
                state.settled = state.settled.filter { $0.key >= hours.first }
            }
        }
        let unsettled = try await store.hourlyTotals(from: OverviewHours.start(hours.lastSettled + 1), to: .distantFuture)
        var users = previous?.users
        var countedAt = previous?.usersCountedAt ?? now
        if users == nil || now.timeIntervalSince(countedAt) >= 60 || now < countedAt {
            users = try await store.userCounts()
            countedAt = now
        }
        let parts = state.withLock { $0.settled.filter { $0.key <= hours.lastSettled }.map(\.value) } + unsettled
        let numbers = Numbers(
            users: users!, usersCountedAt: countedAt,
            today: PeriodTotals.sum(parts.filter { $0.since >= OverviewHours.start(hours.midnight) }, since: OverviewHours.start(hours.midnight)),
            week: PeriodTotals.sum(parts.filter { $0.since >= OverviewHours.start(hours.first) }, since: OverviewHours.start(hours.first)),
            readAt: now)
        state.withLock { $0.numbers = numbers }
        return numbers
    }
}
