import Foundation

/// When daily quota windows start and end: pure functions, tested without I/O.
///
/// A window normally runs from one local midnight to the next in the user's time zone (23 or 25 hours
/// on the days daylight saving time changes). Two rules keep a time-zone change from buying extra free uses:
/// - an unexpired window is never cut short: it keeps the end it was created with;
/// - a new window starts no earlier than the previous one ended; if that start is not a local midnight
///   (the zone changed), the window runs to the first local midnight at least 24 hours later.
/// So a user who changes zone gets windows of 24 to 48 hours until they are aligned again: never more
/// free uses than staying put.
public enum QuotaWindow {
    /// The shortest window that does not start at a local midnight.
    public static let minimumUnalignedLength: TimeInterval = 24 * 3600

    /// The counter that applies at `now`: `counter` itself while its window is open, else a fresh
    /// zero counter for the window that contains `now`.
    public static func current(_ counter: QuotaCounter?, now: Date, timeZone: TimeZone) -> QuotaCounter {
        if let counter, now < counter.windowEnd { return counter }
        let localMidnight = startOfDay(containing: now, in: timeZone)
        let start = max(counter?.windowEnd ?? localMidnight, localMidnight)
        let aligned = startOfDay(containing: start, in: timeZone) == start
        let end =
            aligned
            ? firstMidnight(atOrAfter: start.addingTimeInterval(1), in: timeZone)
            : firstMidnight(atOrAfter: start.addingTimeInterval(minimumUnalignedLength), in: timeZone)
        return QuotaCounter(used: 0, windowEnd: end)
    }

    /// The counter that limits a guest, of its own and its installation's (each as
    /// ``current(_:now:timeZone:)`` gives it): the one with more uses, or on a tie the one whose window
    /// ends later. The guest has `limit - used` free uses left until its `windowEnd`. Without an
    /// installation (a linked account), the account's counter.
    public static func binding(_ account: QuotaCounter, installation: QuotaCounter?) -> QuotaCounter {
        guard let installation, installation.used >= account.used else { return account }
        return installation.used > account.used || installation.windowEnd > account.windowEnd ? installation : account
    }

    /// The local midnight that begins the day containing `instant`.
    public static func startOfDay(containing instant: Date, in timeZone: TimeZone) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar.startOfDay(for: instant)
    }

    /// The first local midnight at or after `instant`.
    public static func firstMidnight(atOrAfter instant: Date, in timeZone: TimeZone) -> Date {
        let midnight = startOfDay(containing: instant, in: timeZone)
        if midnight == instant { return midnight }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let nextDay = calendar.date(byAdding: .day, value: 1, to: midnight) ?? midnight.addingTimeInterval(86_400)
        return calendar.startOfDay(for: nextDay)
    }
}

/// How a metered action is paid: a pure decision over the state read in the transaction.
public enum ActionDecision: Sendable, Hashable {
    /// Spend one free use of the action's quota.
    case useQuota
    /// Free under premium; nothing is counted.
    case premium
    /// Charge this many tokens.
    case charge(Int64)
    /// Refuse: the action costs tokens and too few are available.
    case insufficientTokens
    /// Refuse: a quota-only action with no free use left.
    case quotaExhausted

    /// Decides how `action` is paid for.
    /// - Parameters:
    ///   - quotaRemaining: free uses left in the action's quota window (`nil` if it has no quota).
    ///   - available: the wallet's spendable tokens.
    public static func decide(action: ActionSpec, isPremium: Bool, quotaRemaining: Int?, available: Int64) -> ActionDecision {
        if action.quota != nil {
            if isPremium { return .premium }
            if let quotaRemaining, quotaRemaining > 0 { return .useQuota }
        }
        guard let tokens = action.tokens else { return .quotaExhausted }
        return available >= tokens ? .charge(tokens) : .insufficientTokens
    }
}
