import Foundation
import TallyAPI

/// The real clock.
public struct SystemClock: TallyClock {
    /// Creates the real clock.
    public init() {}
    /// The current instant, truncated to whole milliseconds as stored.
    public var now: Date { Date(millis: Date().millis) }
    /// Sleeps for real.
    public func sleep(for seconds: TimeInterval) async throws {
        try await Task.sleep(for: .seconds(max(0, seconds)))
    }
}

extension Date {
    /// Milliseconds since 1970, the unit every timestamp is stored in: rounded down, except that an instant within a
    /// microsecond of a whole millisecond (or a few units of the last place, beyond the year 2242) is that millisecond —
    /// what ``init(millis:)`` makes, or arithmetic on it, lands a hair off it (a plain floor gave `Date(millis: m).millis
    /// == m - 1` for about one millisecond in 170). So `Date(millis: m).millis == m` for every `m` of
    /// ``writableMillis``. Total: an instant beyond what 64 bits of milliseconds hold (some 292 million years away) is
    /// clamped to `Int64.min`/`Int64.max`, never a trap — what comes from outside is bounded long before; NaN is 0.
    public var millis: Int64 {
        let scaled = timeIntervalSince1970 * 1000
        let nearest = scaled.rounded()
        let whole = abs(scaled - nearest) <= max(0.001, 8 * nearest.ulp) ? nearest : scaled.rounded(.down)
        guard let exact = Int64(exactly: whole) else { return whole.isNaN ? 0 : whole < 0 ? .min : .max }
        return exact
    }

    /// The instant `millis` milliseconds after 1970.
    public init(millis: Int64) {
        self.init(timeIntervalSince1970: TimeInterval(millis) / 1000)
    }

    /// The instants Tally writes, in milliseconds since 1970: RFC 3339's years 0000 to 9999. A timestamp read from
    /// outside (a cursor, a signed payload) beyond them is refused as something the server never issued.
    public static let writableMillis: ClosedRange<Int64> = -62_167_219_200_000...253_402_300_799_999
}
