import Foundation
import TallyStore
import Testing

private func zone(_ identifier: String) throws -> TimeZone {
    try #require(TimeZone(identifier: identifier), "unknown zone \(identifier)")
}

/// Parses an ISO 8601 instant with an offset, e.g. `2027-03-14T00:00:00-05:00`.
private func instant(_ text: String) throws -> Date {
    try #require(ISO8601DateFormatter().date(from: text), "bad date \(text)")
}

/// Whether `date` is a local midnight in `timeZone`.
private func isLocalMidnight(_ date: Date, _ timeZone: TimeZone) -> Bool {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = timeZone
    let parts = calendar.dateComponents([.hour, .minute, .second, .nanosecond], from: date)
    return parts.hour == 0 && parts.minute == 0 && parts.second == 0 && (parts.nanosecond ?? 0) < 1_000_000
}

/// The windows an honest user in `timeZone` goes through from `start`, acting whenever a window ends.
private func windowEnds(from start: Date, count: Int, in timeZone: TimeZone) -> [Date] {
    var counter = QuotaWindow.current(nil, now: start, timeZone: timeZone)
    var ends = [counter.windowEnd]
    while ends.count < count {
        counter = QuotaWindow.current(counter, now: counter.windowEnd, timeZone: timeZone)
        ends.append(counter.windowEnd)
    }
    return ends
}

@Suite("QuotaWindow", .timeLimit(.minutes(1)))
struct QuotaWindowTests {
    @Test func windowEndsAtNextLocalMidnightInNewYork() throws {
        let newYork = try zone("America/New_York")
        let midnight = try instant("2027-01-16T00:00:00-05:00")
        for now in try ["2027-01-15T00:00:00-05:00", "2027-01-15T03:00:00-05:00", "2027-01-15T23:59:59-05:00"].map(instant) {
            #expect(QuotaWindow.current(nil, now: now, timeZone: newYork) == QuotaCounter(used: 0, windowEnd: midnight))
        }
    }

    @Test func windowEndsAtNextLocalMidnightInTokyo() throws {
        let tokyo = try zone("Asia/Tokyo")
        // 2027-01-15T08:00Z is 17:00 in Tokyo: the window ends at 2027-01-16T00:00+09:00 = 2027-01-15T15:00Z.
        let counter = QuotaWindow.current(nil, now: Date(timeIntervalSince1970: 1_800_000_000), timeZone: tokyo)
        #expect(counter == QuotaCounter(used: 0, windowEnd: try instant("2027-01-15T15:00:00Z")))
        #expect(isLocalMidnight(counter.windowEnd, tokyo))
    }

    @Test func counterResetsAtLocalMidnightAndNotBefore() throws {
        let tokyo = try zone("Asia/Tokyo")
        let end = try instant("2027-01-16T00:00:00+09:00")
        let counter = QuotaCounter(used: 3, windowEnd: end)
        #expect(QuotaWindow.current(counter, now: end.addingTimeInterval(-0.001), timeZone: tokyo) == counter)
        #expect(
            QuotaWindow.current(counter, now: end, timeZone: tokyo)
                == QuotaCounter(used: 0, windowEnd: try instant("2027-01-17T00:00:00+09:00")))
        // Long after: the window of the day containing now, not a chain of missed days.
        let later = try instant("2027-02-03T13:00:00+09:00")
        #expect(
            QuotaWindow.current(counter, now: later, timeZone: tokyo)
                == QuotaCounter(used: 0, windowEnd: try instant("2027-02-04T00:00:00+09:00")))
    }

    @Test func springForwardDayIs23HoursAndEndsAtMidnight() throws {
        let newYork = try zone("America/New_York")
        // 2027-03-14 is the second Sunday of March: 02:00 EST becomes 03:00 EDT.
        let ends = windowEnds(from: try instant("2027-03-12T12:00:00-05:00"), count: 4, in: newYork)
        #expect(
            ends
                == (try [
                    "2027-03-13T00:00:00-05:00", "2027-03-14T00:00:00-05:00", "2027-03-15T00:00:00-04:00", "2027-03-16T00:00:00-04:00",
                ].map(instant)))
        #expect(ends[2].timeIntervalSince(ends[1]) == 23 * 3600)
        #expect(ends.allSatisfy { isLocalMidnight($0, newYork) })
        // First use in the afternoon of the short day.
        let afternoon = QuotaWindow.current(nil, now: try instant("2027-03-14T15:00:00-04:00"), timeZone: newYork)
        #expect(afternoon.windowEnd == (try instant("2027-03-15T00:00:00-04:00")))
    }

    @Test func fallBackDayIs25HoursAndEndsAtMidnight() throws {
        let newYork = try zone("America/New_York")
        // 2027-11-07 is the first Sunday of November: 02:00 EDT becomes 01:00 EST.
        let ends = windowEnds(from: try instant("2027-11-05T12:00:00-04:00"), count: 4, in: newYork)
        #expect(
            ends
                == (try [
                    "2027-11-06T00:00:00-04:00", "2027-11-07T00:00:00-04:00", "2027-11-08T00:00:00-05:00", "2027-11-09T00:00:00-05:00",
                ].map(instant)))
        #expect(ends[2].timeIntervalSince(ends[1]) == 25 * 3600)
        #expect(ends.allSatisfy { isLocalMidnight($0, newYork) })
        // During the repeated hour (01:30 EST, the second one).
        let repeated = QuotaWindow.current(nil, now: try instant("2027-11-07T01:30:00-05:00"), timeZone: newYork)
        #expect(repeated.windowEnd == (try instant("2027-11-08T00:00:00-05:00")))
    }

    @Test func zoneChangeNeverCutsAnOpenWindowShort() throws {
        let newYork = try zone("America/New_York")
        let counter = QuotaCounter(used: 3, windowEnd: try instant("2027-01-16T00:00:00-05:00"))
        // 16:00Z: already past midnight in Tokyo and Auckland, whose days ended earlier.
        let now = try instant("2027-01-15T16:00:00Z")
        for identifier in ["Asia/Tokyo", "Pacific/Auckland", "Pacific/Kiritimati", "Europe/London", "Pacific/Honolulu"] {
            #expect(QuotaWindow.current(counter, now: now, timeZone: try zone(identifier)) == counter, "moved to \(identifier)")
        }
        #expect(QuotaWindow.current(counter, now: now, timeZone: newYork) == counter)
    }

    @Test func zoneChangeNeverYieldsAWindowUnder23Hours() throws {
        // The New York window ended at 05:00Z; Halifax's midnight comes one hour earlier (04:00Z). The new
        // window cannot end at the Halifax midnight 23 hours later: it does not start at a local midnight,
        // so it runs to the first Halifax midnight at least 24 hours on.
        let previousEnd = try instant("2027-01-16T00:00:00-05:00")
        let counter = QuotaCounter(used: 3, windowEnd: previousEnd)
        let halifax = try zone("America/Halifax")
        let next = QuotaWindow.current(counter, now: previousEnd, timeZone: halifax)
        #expect(next == QuotaCounter(used: 0, windowEnd: try instant("2027-01-18T00:00:00-04:00")))

        // Every zone, at several moments after the end: the new window starts no earlier than the old one
        // ended, lasts at least 23 hours from there, and ends at a local midnight of the new zone.
        let zones = TimeZone.knownTimeZoneIdentifiers.compactMap(TimeZone.init(identifier:))
        #expect(zones.count > 300)
        for delay: TimeInterval in [0, 1, 1800, 3 * 3600, 11 * 3600 + 59 * 60] {
            let now = previousEnd.addingTimeInterval(delay)
            for timeZone in zones {
                let fresh = QuotaWindow.current(counter, now: now, timeZone: timeZone)
                #expect(fresh.used == 0)
                #expect(fresh.windowEnd.timeIntervalSince(previousEnd) >= 23 * 3600, "\(timeZone.identifier) after \(delay)s")
                #expect(fresh.windowEnd > now)
                #expect(QuotaWindow.startOfDay(containing: fresh.windowEnd, in: timeZone) == fresh.windowEnd, "\(timeZone.identifier)")
            }
        }
    }

    @Test func windowNotStartingAtLocalMidnightLastsAtLeast24Hours() throws {
        // A Tokyo window ended at 15:00Z; in New York that is 10:00, so the next window starts unaligned
        // and runs to the first New York midnight at least 24 hours later (2027-01-17T05:00Z, 38 hours).
        let previousEnd = try instant("2027-01-16T00:00:00+09:00")
        let next = QuotaWindow.current(
            QuotaCounter(used: 3, windowEnd: previousEnd), now: previousEnd, timeZone: try zone("America/New_York"))
        #expect(next == QuotaCounter(used: 0, windowEnd: try instant("2027-01-17T00:00:00-05:00")))
        // Aligned again, the day after is an ordinary day.
        let after = QuotaWindow.current(next, now: next.windowEnd, timeZone: try zone("America/New_York"))
        #expect(after.windowEnd.timeIntervalSince(next.windowEnd) == 24 * 3600)
    }

    /// Counts the windows a user goes through in `days` days from `start`, acting as soon as each window ends
    /// and moving, each time, to the zone `choose` picks. Returns the count and each window's length from its start.
    private func simulate(days: Int, from start: Date, firstZone: TimeZone, choose: (QuotaCounter, Date) -> TimeZone)
        -> (windows: Int, lengths: [TimeInterval])
    {
        let end = start.addingTimeInterval(TimeInterval(days) * 86_400)
        var counter = QuotaWindow.current(nil, now: start, timeZone: firstZone)
        var windows = 1
        var lengths = [counter.windowEnd.timeIntervalSince(start)]
        while counter.windowEnd < end {
            let now = counter.windowEnd
            let next = QuotaWindow.current(counter, now: now, timeZone: choose(counter, now))
            lengths.append(next.windowEnd.timeIntervalSince(now))
            counter = next
            windows += 1
        }
        return (windows, lengths)
    }

    @Test func honestUserGetsOneWindowPerDayPlusThePartialFirst() throws {
        let newYork = try zone("America/New_York")
        let result = simulate(days: 30, from: Date(timeIntervalSince1970: 1_800_000_000), firstZone: newYork) { _, _ in newYork }
        #expect(result.windows == 31)
    }

    /// A user who, every day, moves to the zone whose midnight ends the next window soonest. Changing zone
    /// cannot buy extra free uses: over 30 days, no more windows than an honest user (days + 1). Run from
    /// several dates, so daylight-saving changes (US, EU, Chile, Australia, New Zealand) fall inside.
    @Test(arguments: ["2027-01-15T08:00:00Z", "2027-03-01T08:00:00Z", "2027-09-20T08:00:00Z", "2027-10-20T08:00:00Z"])
    func zoneHoppingCannotBuyExtraWindows(start: String) throws {
        let days = 30
        let zones = TimeZone.knownTimeZoneIdentifiers.compactMap(TimeZone.init(identifier:))
        let newYork = try zone("America/New_York")
        let honest = simulate(days: days, from: try instant(start), firstZone: newYork) { _, _ in newYork }
        #expect(honest.windows == days + 1)
        let hopper = simulate(days: days, from: try instant(start), firstZone: newYork) { counter, now in
            zones.map { ($0, QuotaWindow.current(counter, now: now, timeZone: $0).windowEnd) }.min { $0.1 < $1.1 }!.0
        }
        #expect(hopper.windows <= days + 1)
        #expect(hopper.lengths.dropFirst().allSatisfy { $0 >= 23 * 3600 }, "\(hopper.lengths.map { $0 / 3600 })")
    }

    /// Of a guest's counter and its installation's, the one with more uses limits it; on a tie, the one that
    /// resets later (when the other resets, it still holds the same count).
    @Test func bindingCounterIsTheOneWithMoreUses() {
        let early = Date(timeIntervalSince1970: 1_800_000_000)
        let late = early.addingTimeInterval(3600)
        let own = QuotaCounter(used: 1, windowEnd: early)
        #expect(QuotaWindow.binding(own, installation: nil) == own)
        #expect(QuotaWindow.binding(own, installation: QuotaCounter(used: 3, windowEnd: early)).used == 3)
        #expect(QuotaWindow.binding(QuotaCounter(used: 2, windowEnd: late), installation: QuotaCounter(used: 0, windowEnd: early)).used == 2)
        #expect(
            QuotaWindow.binding(QuotaCounter(used: 3, windowEnd: early), installation: QuotaCounter(used: 3, windowEnd: late))
                == QuotaCounter(used: 3, windowEnd: late))
        #expect(
            QuotaWindow.binding(QuotaCounter(used: 3, windowEnd: late), installation: QuotaCounter(used: 3, windowEnd: early))
                == QuotaCounter(used: 3, windowEnd: late))
    }
}
