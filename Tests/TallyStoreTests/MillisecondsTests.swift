import Foundation
import TallyTestSupport
import TallyStore
import Testing

/// Milliseconds, the unit every instant is stored in, and the cursors that carry them (issue 43, finding 1): the
/// conversion is total and exact, and a cursor names only an instant the server can have issued.
@Suite("Milliseconds and the cursors that carry them", .timeLimit(.minutes(1)))
struct MillisecondsTests {
    @Test("Date(millis: m).millis == m for every m the server writes (a plain floor gave m - 1 for one in about 170)")
    func roundTrip() {
        var random = SplitMix64(seed: 43)
        let span = UInt64(Date.writableMillis.upperBound - Date.writableMillis.lowerBound)
        var wrong: [Int64] = []
        for _ in 0..<200_000 {
            let m = Date.writableMillis.lowerBound + Int64(random.next() % span)
            if Date(millis: m).millis != m { wrong.append(m) }
        }
        for m in [0, 1, -1, 1_800_000_000_001, 8_723_990_965_911, 1_080_075_346_353, Date.writableMillis.lowerBound, Date.writableMillis.upperBound] {
            if Date(millis: m).millis != m { wrong.append(m) }
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong, e.g. \(wrong.prefix(5))")
    }

    @Test("millis rounds down, but a hair below a whole millisecond is that one: Date(millis: m) <= d + 10 µs, d < Date(millis: m + 1)")
    func floorOfAnyInstant() {
        var random = SplitMix64(seed: 44)
        for _ in 0..<100_000 {
            let seconds = (random.unit() * 2 - 1) * 4e9  // 1843 to 2096
            let date = Date(timeIntervalSince1970: seconds)
            let millis = date.millis
            #expect(Date(millis: millis) <= date.addingTimeInterval(1e-5) && date < Date(millis: millis + 1), "\(seconds) s: \(millis)")
        }
        // Arithmetic that means a whole millisecond, as the server does it (a sign-up window's start, a hold's end).
        let now = Date(millis: 1_800_000_000_123)
        #expect(now.addingTimeInterval(-3_599.999).millis == 1_799_996_400_124)
        #expect(now.addingTimeInterval(0.0004).millis == now.millis && now.addingTimeInterval(0.0009).millis == now.millis)
        #expect(now.addingTimeInterval(-0.0001).millis == now.millis - 1)
    }

    @Test("Any instant has milliseconds: beyond 64 bits it is clamped, NaN is 0 — never a trap")
    func total() {
        #expect(Date(timeIntervalSince1970: 9.3e15).millis == .max)
        #expect(Date(timeIntervalSince1970: 1e300).millis == .max)
        #expect(Date(timeIntervalSince1970: .infinity).millis == .max)
        #expect(Date(timeIntervalSince1970: -9.3e15).millis == .min)
        #expect(Date(timeIntervalSince1970: -.infinity).millis == .min)
        #expect(Date(timeIntervalSince1970: .nan).millis == 0)
        #expect(Date(millis: .max).millis == .max, "the issue's cursor: Date(millis: Int64.max).millis trapped")
        #expect(Date(millis: .min).millis < -9_223_372_036_854_000_000, "near Int64.min, where a double no longer tells milliseconds apart")
        #expect(Date(timeIntervalSince1970: 9_223_372_036_854_775.0).millis == .max)
    }

    @Test("Int(saturating:) and Int64(saturating:) round as told, clamp beyond the range, take NaN as 0")
    func saturating() {
        #expect(Int64(saturating: 1.9) == 1 && Int64(saturating: -1.9) == -1)
        #expect(Int64(saturating: 1.1, rounding: .up) == 2 && Int64(saturating: -1.1, rounding: .down) == -2)
        #expect(Int64(saturating: 1e300) == .max && Int64(saturating: -1e300) == .min)
        #expect(Int64(saturating: 9.223372036854775807e18) == .max, "2⁶³ itself does not fit")
        #expect(Int64(saturating: .infinity) == .max && Int64(saturating: -.infinity) == .min && Int64(saturating: .nan) == 0)
        #expect(Int(saturating: 86_400.0) == 86_400 && Int32(saturating: 1e10) == .max && UInt8(saturating: -3) == 0)
    }

    @Test("A purchase cursor names an instant within RFC 3339's years 0000 to 9999, or is refused")
    func purchaseCursors() {
        for token in [
            "9223372036854775807.x", "-9223372036854775808.x", "253402300800000.x", "-62167219200001.x", "99999999999999999999.x",
            "1e3.x", "NaN.x", "+5.x", "05.x", "-0.x", "5.", ".x", "x", "", " 5.x",
        ] {
            #expect(PurchaseCursor(token: token) == nil, "\(token)")
        }
        for millis in [Date.writableMillis.lowerBound, 0, 1_800_000_000_123, Date.writableMillis.upperBound] {
            let cursor = PurchaseCursor(token: "\(millis).2000000123456789")
            #expect(cursor?.purchasedAt.millis == millis && cursor?.transactionId == "2000000123456789", "\(millis)")
            #expect(cursor.map { PurchaseCursor(token: $0.token) == $0 } == true, "its token reads back")
        }
    }

    @Test("A console user cursor names an instant within 0000–9999 and a user id, or is refused; its token reads back")
    func userCursors() {
        let id = "3f0e0a53-7bb1-4c50-9d39-2a5c1e7b0001"
        for token in ["9223372036854775807.\(id)", "253402300800000.\(id)", "5.not-a-uuid", "5", "1e3.\(id)", ""] {
            #expect(UserCursor(token: token) == nil, "\(token)")
        }
        var random = SplitMix64(seed: 45)
        for _ in 0..<10_000 {
            let millis = Date.writableMillis.lowerBound + Int64(random.next() % UInt64(Date.writableMillis.count))
            let cursor = UserCursor(createdAt: Date(millis: millis), id: id)
            #expect(UserCursor(token: cursor.token) == cursor, "\(millis)")
        }
    }
}
