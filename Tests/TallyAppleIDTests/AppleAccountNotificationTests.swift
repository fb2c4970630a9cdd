import Foundation
import TallyAppleID
import TallyDevAppStore
import Testing

/// Account notifications the stand-in signs and posts to a webhook on loopback, verified by `verifyNotification`.
@Suite("Sign in with Apple account notifications", .timeLimit(.minutes(2)))
struct AppleAccountNotificationTests {
    @Test("Each event type, sent over HTTP to the webhook, verifies with its events decoded")
    func eventsDelivered() async throws {
        try await WebhookRecorder.with { recorder, webhook in
            try await AppleIDFixture.with(configure: { $0.webhook = webhook }) { fixture in
                let sub = "001234.0123456789abcdef0123456789abcdef.0987"
                let events: [(String, AppleAccountEvent.EventType, String?)] = [
                    (#"{"type":"email-disabled","sub":"\#(sub)","email":"x7k2p9@privaterelay.appleid.com","isPrivateEmail":true}"#, .emailDisabled, "x7k2p9@privaterelay.appleid.com"),
                    (#"{"type":"email-enabled","sub":"\#(sub)","email":"x7k2p9@privaterelay.appleid.com","isPrivateEmail":true}"#, .emailEnabled, "x7k2p9@privaterelay.appleid.com"),
                    (#"{"type":"consent-revoked","sub":"\#(sub)"}"#, .consentRevoked, nil),
                    (#"{"type":"account-delete","sub":"\#(sub)"}"#, .accountDelete, nil),
                ]
                var ids: [String] = []
                for (index, (body, type, email)) in events.enumerated() {
                    let (status, answer) = try await call(.POST, fixture.base + "/auth/notifications", json: body)
                    #expect(status == 200, "\(type)")
                    let delivery = try #require(try object(answer)["delivery"] as? [String: Any])
                    #expect(delivery["status"] as? Int == 200)
                    let notification = try #require(try object(answer)["notification"] as? [String: Any])
                    let payload = try #require(notification["payload"] as? String)
                    #expect(recorder.payloads.count == index + 1 && recorder.payloads.last == payload, "the webhook got {\"payload\": …}")

                    let event = try await fixture.verifier.verifyNotification(payload, now: fixture.now)
                    #expect(event.type == type && event.sub == sub && event.email == email)
                    #expect(event.isPrivateEmail == (email == nil ? nil : true))
                    #expect(event.eventTime == fixture.now && event.issuedAt == fixture.now && event.audience == AppleIDFixture.clientId)
                    #expect(event.id == notification["jti"] as? String)
                    ids.append(event.id)
                    fixture.clock.advance(by: 60)
                }
                #expect(Set(ids).count == events.count, "each notification has its own jti")
                #expect(fixture.appleID.deliveries.map(\.status) == [200, 200, 200, 200])
                let (_, listed) = try await call(.GET, fixture.base + "/auth/deliveries")
                #expect(try (object(listed)["deliveries"] as? [Any])?.count == 4)
            }
        }
    }

    @Test("A tampered, foreign, misissued, stale or unsigned notification is refused by name", arguments: [
        (DevAppleIDDefect.tampered, AppleIDVerificationError.Code.invalidSignature), (.foreignKey, .invalidSignature),
        (.unknownKid, .unknownKey), (.wrongIssuer, .wrongIssuer), (.expired, .expired), (.issuedInFuture, .expired),
        (.algNone, .unsupportedAlgorithm), (.algHS256, .unsupportedAlgorithm),
    ])
    func refusals(defect: DevAppleIDDefect, expected: AppleIDVerificationError.Code) async throws {
        try await AppleIDFixture.with { fixture in
            let bad = try await fixture.appleID.notification(type: "account-delete", sub: "000001.abc.0001", defect: defect)
            #expect(await Outcome.of { _ = try await fixture.verifier.verifyNotification(bad.payload, now: fixture.now) } == .refused(expected))
            let good = try await fixture.appleID.notification(type: "account-delete", sub: "000001.abc.0001")
            let event = try await fixture.verifier.verifyNotification(good.payload, now: fixture.now)
            #expect(event.type == .accountDelete && event.sub == "000001.abc.0001")
        }
    }

    @Test("A notification for another client, or an identity token passed as one, is refused")
    func otherShapes() async throws {
        try await AppleIDFixture.with(configure: { $0.clientId = "com.example.other" }) { fixture in
            let notification = try await fixture.appleID.notification(type: "consent-revoked", sub: "000001.abc.0001")
            let verifier = try AppleIdentityVerifier(audiences: ["com.example.oracle"], keys: fixture.keys)
            #expect(await Outcome.of { _ = try await verifier.verifyNotification(notification.payload, now: fixture.now) } == .refused(.wrongAudience))
            let token = try await fixture.appleID.identityToken(audience: "com.example.oracle")
            #expect(await Outcome.of { _ = try await verifier.verifyNotification(token.identityToken, now: fixture.now) } == .refused(.malformed))
        }
    }

    @Test("Without a webhook the HTTP API signs but cannot send: 409, and send: false answers the notification alone")
    func noWebhook() async throws {
        try await AppleIDFixture.with { fixture in
            let (status, _) = try await call(.POST, fixture.base + "/auth/notifications", json: #"{"type":"account-delete","sub":"s"}"#)
            #expect(status == 409)
            let (held, answer) = try await call(.POST, fixture.base + "/auth/notifications", json: #"{"type":"account-delete","sub":"s","send":false}"#)
            #expect(try held == 200 && (object(answer)["delivery"]) == nil)
            let payload = try #require((try object(answer)["notification"] as? [String: Any])?["payload"] as? String)
            #expect(try await fixture.verifier.verifyNotification(payload, now: fixture.now).type == .accountDelete)
        }
    }
}
