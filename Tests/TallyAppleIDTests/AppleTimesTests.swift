import Foundation
import TallyAppleID
import TallyDevAppStore
import Testing

/// The times of identity tokens and account notifications are read only within the years 2000 to 9999 (issue 43,
/// finding 1): a well-signed `iat`, `exp` or `event_time` of 1e300 or −2⁶³ is `malformed`, as a claim of the wrong type
/// is, so no such time reaches the server's conversions.
@Suite("Apple's times are bounded", .timeLimit(.minutes(1)))
struct AppleTimesTests {
    static let beyond = ["1e300", "-1e300", "9223372036854775807", "-9223372036854775808", "18446744073709551616", "253402300800", "946684799", "0", "-1"]

    /// A JSON object of values written as they are.
    static func object(_ members: [String: String]) -> String {
        "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }

    /// An identity token issued now for the fixture's client with `field` written as `value`, signed by the stand-in.
    static func token(_ fixture: AppleIDFixture, nonce: String, _ field: String, _ value: String) throws -> String {
        let now = Int64(fixture.now.timeIntervalSince1970)
        var claims = [
            "iss": "\"\(AppleIdentityVerifier.issuer)\"", "aud": "\"\(AppleIDFixture.clientId)\"", "iat": "\(now)", "exp": "\(now + 600)",
            "sub": "\"000001.times.0001\"", "nonce": "\"\(AppleNonce.hash(nonce))\"",
        ]
        claims[field] = value
        return try fixture.appleID.sign(claimsJSON: Array(object(claims).utf8))
    }

    /// An account notification issued now (`iat`, unless given) of an event at `eventTime`, signed by the stand-in.
    static func notification(_ fixture: AppleIDFixture, iat: String? = nil, eventTime: String) throws -> String {
        let now = Int64(fixture.now.timeIntervalSince1970)
        let events = object(["type": "\"email-enabled\"", "sub": "\"000001.times.0001\"", "event_time": eventTime])
        let claims = [
            "iss": "\"\(AppleIdentityVerifier.issuer)\"", "aud": "\"\(AppleIDFixture.clientId)\"", "iat": iat ?? "\(now)",
            "jti": "\"\(UUID().uuidString)\"", "events": "\"" + events.replacingOccurrences(of: "\"", with: "\\\"") + "\"",
        ]
        return try fixture.appleID.sign(claimsJSON: Array(object(claims).utf8))
    }

    @Test("An identity token whose iat or exp is beyond the years 2000 to 9999 is malformed; at their edges it is read")
    func identityTokens() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make().raw
            let now = Int64(fixture.now.timeIntervalSince1970)
            let good = try Self.token(fixture, nonce: nonce, "exp", "\(now + 600)")
            #expect(await Outcome.of { _ = try await fixture.verify(good, nonce: nonce) } == .accepted, "the raw signing verifies")
            for field in ["iat", "exp"] {
                for value in Self.beyond {
                    let token = try Self.token(fixture, nonce: nonce, field, value)
                    let outcome = await Outcome.of { _ = try await fixture.verify(token, nonce: nonce) }
                    #expect(outcome == .refused(.malformed), "\(field) = \(value): \(outcome)")
                }
            }
            // At the last second of 9999 a time is read, then judged for what it says.
            let far = try Self.token(fixture, nonce: nonce, "exp", "253402300799")
            #expect(await Outcome.of { _ = try await fixture.verify(far, nonce: nonce) } == .accepted)
            let late = try Self.token(fixture, nonce: nonce, "iat", "253402300799")
            #expect(await Outcome.of { _ = try await fixture.verify(late, nonce: nonce) } == .refused(.malformed), "expires before issued")
        }
    }

    @Test("An account notification whose iat or event_time is beyond the years 2000 to 9999 is malformed")
    func notifications() async throws {
        try await AppleIDFixture.with { fixture in
            let now = Int64(fixture.now.timeIntervalSince1970)
            let inMillis = try await fixture.verifier.verifyNotification(try Self.notification(fixture, eventTime: "\(now * 1000)"), now: fixture.now)
            #expect(inMillis.eventTime == fixture.now)
            let inSeconds = try await fixture.verifier.verifyNotification(try Self.notification(fixture, eventTime: "\(now)"), now: fixture.now)
            #expect(inSeconds.eventTime == fixture.now)
            for value in Self.beyond + ["253402300800000", "946684799999"] {
                let payload = try Self.notification(fixture, eventTime: value)
                let outcome = await Outcome.of { _ = try await fixture.verifier.verifyNotification(payload, now: fixture.now) }
                #expect(outcome == .refused(.malformed), "event_time = \(value): \(outcome)")
            }
            for value in Self.beyond {
                let payload = try Self.notification(fixture, iat: value, eventTime: "\(now * 1000)")
                let outcome = await Outcome.of { _ = try await fixture.verifier.verifyNotification(payload, now: fixture.now) }
                #expect(outcome == .refused(.malformed), "iat = \(value): \(outcome)")
            }
        }
    }
}
