import Foundation
import Testing

@testable import TallyServer

/// The date parser of request bodies, on a table of RFC 3339 forms and of what RFC 3339 refuses.
@Suite("RFC 3339 dates", .timeLimit(.minutes(1)))
struct RFC3339Tests {
    /// 2027-01-15T08:00:00Z.
    static let base: TimeInterval = 1_800_000_000

    static let accepted: [(String, TimeInterval)] = [
        ("2027-01-15T08:00:00Z", base),
        ("2027-01-15T08:00:00z", base),
        ("2027-01-15t08:00:00Z", base),
        ("2027-01-15T08:00:00+00:00", base),
        ("2027-01-15T08:00:00-00:00", base),
        ("2027-01-15T09:00:00+01:00", base),
        ("2027-01-15T03:00:00-05:00", base),
        ("2027-01-16T05:12:00+21:12", base),
        ("2027-01-16T07:59:00+23:59", base),
        ("2027-01-14T08:01:00-23:59", base),
        ("2027-01-15T08:00:00.5Z", base + 0.5),
        ("2027-01-15T08:00:00.123Z", base + 0.123),
        ("2027-01-15T08:00:00.000000001Z", base + 0.000_000_001),
        ("2027-01-15T08:00:00.1234567891234Z", base + 0.123_456_789),
        ("2027-01-15T10:30:00.250+02:30", base + 0.25),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", -1),
        ("2000-02-29T00:00:00Z", 951_782_400),
        ("2024-02-29T12:00:00Z", 1_709_208_000),
        ("0000-01-01T00:00:00Z", -62_167_219_200),
        ("9999-12-31T23:59:59Z", 253_402_300_799),
        // A leap second is read as the next second, and can only fall at 23:59 UTC.
        ("2016-12-31T23:59:60Z", 1_483_228_800),
        ("2016-12-31T15:59:60-08:00", 1_483_228_800),
    ]

    @Test("Every RFC 3339 form is read as the instant it names", arguments: accepted)
    func accepts(_ text: String, seconds: TimeInterval) throws {
        let date = try #require(RFC3339.date(from: text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 1e-6, "\(date.timeIntervalSince1970)")
    }

    static let refused = [
        "", "2027-01-15", "2027-01-15T08:00:00", "2027-01-15T08:00Z", "2027-01-15 08:00:00Z", "2027-01-15T08:00:00+0100",
        "2027-01-15T08:00:00+01", "2027-01-15T08:00:00+24:00", "2027-01-15T08:00:00+01:60", "2027-01-15T08:00:00.Z",
        "2027-01-15T08:00:00,5Z", "2027-01-15T24:00:00Z", "2027-01-15T23:60:00Z", "2027-01-15T12:00:60Z",
        "2016-12-31T23:59:60+01:00", "2027-13-01T00:00:00Z", "2027-00-10T00:00:00Z", "2027-01-00T00:00:00Z",
        "2027-01-32T00:00:00Z", "2027-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2027-04-31T00:00:00Z",
        "27-01-15T08:00:00Z", "+2027-01-15T08:00:00Z", "20270115T080000Z", "2027-01-15T08:00:00ZZ", "2027-01-15T08:00:00Z ",
        " 2027-01-15T08:00:00Z", "2027-01-15T08:00:00UTC", "2027-1-15T08:00:00Z", "２０２７-01-15T08:00:00Z",
        "2027-01-15T08:00:00\u{0}Z", "1800000000", "2027-01-15T08:00:00+01:00:00",
    ]

    @Test("What RFC 3339 refuses is refused", arguments: refused)
    func refuses(_ text: String) {
        #expect(RFC3339.date(from: text) == nil)
    }

    @Test("Agrees with Foundation's ISO 8601 parser where that one is right (Gregorian years, offsets up to 18 h)")
    func agreesWithFoundation() throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        for _ in 0..<2000 {
            let (year, month) = (Int.random(in: 1583...9999), Int.random(in: 1...12))
            let day = Int.random(in: 1...(month == 2 ? 28 : 30))
            let offset = Int.random(in: -18 * 60...18 * 60)
            let zone = offset == 0 ? "Z" : (offset < 0 ? "-" : "+") + two(abs(offset) / 60) + ":" + two(abs(offset) % 60)
            let text = "\(year)-\(two(month))-\(two(day))T\(two(Int.random(in: 0...23))):\(two(Int.random(in: 0...59))):"
                + "\(two(Int.random(in: 0...59)))\(zone)"
            let foundation = try decoder.decode([Date].self, from: Data("[\"\(text)\"]".utf8))[0]
            #expect(RFC3339.date(from: text) == foundation, "\(text)")
        }
    }
}
