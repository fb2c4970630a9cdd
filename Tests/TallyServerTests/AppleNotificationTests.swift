import Foundation
import HTTPTypes
import TallyAPI
import TallyAppleID
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

/// Apple's account notifications (`POST /v1/webhooks/apple-id`) through the real HTTP stack, signed by the Sign in
/// with Apple stand-in: `consent-revoked` is a sign-out (the account stays, the next Sign in with Apple returns to
/// it), each notification acts once and never on an identity linked after its event, on each store and across two
/// PostgreSQL processes, and the webhook is rate limited per client address.
@Suite("Apple's account notifications", .timeLimit(.minutes(3)))
struct AppleNotificationTests {
    /// Posts `notification` as Apple does (from `address` through the trusted loopback proxy, when given).
    static func post(_ api: APIConnection, _ notification: DevAppleID.Notification, from address: String? = nil) async throws -> APIResponse {
        try await api.send(
            .post, "/v1/webhooks/apple-id", json: AppleIDNotificationRequest(payload: notification.payload),
            headers: address.map { [.forwardedFor: $0] } ?? [:])
    }

    /// How the webhook took a notification (`applied`, `ignored`), or nil for an answer that is not 200.
    static func disposition(_ answer: APIResponse) -> String? {
        guard answer.status == .ok else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: String])?["disposition"]
    }

    /// Posts `notification` and expects it taken as `expected`.
    static func expect(
        _ api: APIConnection, _ notification: DevAppleID.Notification, _ expected: String, _ why: Comment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let answer = try await post(api, notification)
        #expect(disposition(answer) == expected, "\(why): \(answer.status) \(answer.text)", sourceLocation: sourceLocation)
    }

    static func newSub() -> String { "001234." + UUID().uuidString.prefix(12).lowercased() }

    static func status(_ api: APIConnection, _ user: TestUser) async throws -> HTTPResponse.Status {
        try await api.send(.get, "/v1/me", token: user.accessToken).status
    }

    @Test("consent-revoked signs every device out and keeps the account: the next Sign in with Apple returns to it, tokens and all; account-delete still deletes",
        arguments: StoreKind.allCases)
    func consentRevokedIsASignOut(kind: StoreKind) async throws {
        try await AppleSignInTests.with(kind) { server, appleID, api in
            let sub = Self.newSub()
            let signedUp = try await AppleSignInTests.signIn(api, appleID, sub: sub)
            #expect(signedUp.status == .created, "\(signedUp.text)")
            let phone = try signedUp.testUser()
            try await api.grant(25, to: phone)
            let tablet = try await AppleSignInTests.signIn(api, appleID, sub: sub).testUser()
            let balance = try await api.wallet(phone).balance

            try await Self.expect(api, try await appleID.notification(type: "consent-revoked", sub: sub), "applied", "the revocation")
            for device in [phone, tablet] {
                #expect(try await Self.status(api, device) == .unauthorized, "signed out")
                let refresh = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: device.refreshToken))
                #expect(refresh.status == .unauthorized, "\(refresh.text)")
            }

            server.clock.advance(by: 3600)
            let back = try await AppleSignInTests.signIn(api, appleID, sub: sub)
            #expect(back.status == .ok, "the same account, not a new one: \(back.status) \(back.text)")
            let returned = try back.testUser()
            #expect(returned.userId == phone.userId)
            #expect(try await api.wallet(returned).balance == balance, "its tokens are there")
            try await api.expectBooksBalance(returned)

            // Revoked again, then deleted by Apple: account-delete keeps its meaning, revoked or not.
            try await Self.expect(api, try await appleID.notification(type: "consent-revoked", sub: sub), "applied", "revoked again")
            try await Self.expect(api, try await appleID.notification(type: "account-delete", sub: sub), "applied", "the deletion")
            #expect(try await api.send(.get, "/admin/v1/users/\(phone.userId)", admin: true).status == .notFound)
            let fresh = try await AppleSignInTests.signIn(api, appleID, sub: sub)
            #expect(fresh.status == .created && (try? fresh.testUser())?.userId != phone.userId, "\(fresh.text)")
        }
    }

    @Test("A notification delivered again, or one about an event before the identity was linked, changes nothing: the account that holds the sub now is kept",
        arguments: StoreKind.allCases)
    func onceAndInOrder(kind: StoreKind) async throws {
        try await AppleSignInTests.with(kind) { server, appleID, api in
            let sub = Self.newSub()
            let first = try await AppleSignInTests.signIn(api, appleID, sub: sub).testUser()
            let delete = try await appleID.notification(type: "account-delete", sub: sub)
            try await Self.expect(api, delete, "applied", "the deletion")
            #expect(try await Self.status(api, first) == .unauthorized)

            server.clock.advance(by: 3600)
            let signedUp = try await AppleSignInTests.signIn(api, appleID, sub: sub)
            #expect(signedUp.status == .created, "\(signedUp.text)")
            let second = try signedUp.testUser()
            // Apple's retry of the same notification, and a late one (another jti) about an event before the link.
            try await Self.expect(api, delete, "ignored", "the same jti again")
            let late = try await appleID.notification(type: "account-delete", sub: sub, eventTime: delete.eventTime)
            try await Self.expect(api, late, "ignored", "an event before the link")
            let lateRevoke = try await appleID.notification(type: "consent-revoked", sub: sub, eventTime: delete.eventTime)
            try await Self.expect(api, lateRevoke, "ignored", "a revocation before the link")
            #expect(try await Self.status(api, second) == .ok, "the new account is kept, signed in")

            // A new revocation acts once; after the user comes back, neither it again nor an older one signs them out.
            server.clock.advance(by: 60)
            let revoke = try await appleID.notification(type: "consent-revoked", sub: sub)
            try await Self.expect(api, revoke, "applied", "a new revocation")
            try await Self.expect(api, revoke, "ignored", "the revocation again")
            server.clock.advance(by: 60)
            let back = try await AppleSignInTests.signIn(api, appleID, sub: sub).testUser()
            #expect(back.userId == second.userId)
            try await Self.expect(api, revoke, "ignored", "the revocation again, after the return")
            let older = try await appleID.notification(type: "consent-revoked", sub: sub, eventTime: revoke.eventTime)
            try await Self.expect(api, older, "ignored", "another revocation from before the return")
            #expect(try await Self.status(api, back) == .ok, "still signed in")
        }
    }

    @Test("Across two PostgreSQL processes: a notification posted to both at once acts once, and posted again after a new sign-in changes nothing")
    func acrossProcesses() async throws {
        try await AppleSignInTests.withPair { pair, appleID in
            let apis = [pair.connection(0), pair.connection(1)]
            let sub = Self.newSub()
            let first = try await AppleSignInTests.signIn(apis[0], appleID, sub: sub).testUser()
            // The processes link on the wall clock: the event happens after it (the stand-in's clock is the test's).
            let delete = try await appleID.notification(type: "account-delete", sub: sub, eventTime: Date())
            let answers = try await concurrently(8, connect: { pair.connection($0 % 2) }) { _, api in try await Self.post(api, delete) }
            #expect(answers.map(Self.disposition).filter { $0 == "applied" }.count == 1, "\(answers.map(\.text))")
            #expect(answers.allSatisfy { $0.status == .ok })
            #expect(try await Self.status(apis[0], first) == .unauthorized)

            let signedUp = try await AppleSignInTests.signIn(apis[1], appleID, sub: sub)
            #expect(signedUp.status == .created, "\(signedUp.text)")
            let second = try signedUp.testUser()
            for api in apis { try await Self.expect(api, delete, "ignored", "the same jti on either process") }
            let late = try await appleID.notification(type: "account-delete", sub: sub, eventTime: Date().addingTimeInterval(-600))
            try await Self.expect(apis[0], late, "ignored", "an event before the link")
            for api in apis { #expect(try await Self.status(api, second) == .ok) }
            for api in apis { await api.close() }
            #expect(pair.stop() == [.exited(0), .exited(0)])
        }
    }

    @Test("The webhook is rate limited per client address: 429 with Retry-After beyond the limit, other addresses unaffected, recovery after the window")
    func rateLimited() async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        try await AppleIDStandIn.serving(clientId: AppleSignInTests.clientId, clock: clock) { appleID, keysURL in
            let apple = try SignInWithAppleConfiguration(audiences: [AppleSignInTests.clientId], keysURL: keysURL)
            try await LiveServer.with(.sqlite, limits: RateLimitTests.behindProxy(), clock: clock, configure: { $0.signInWithApple = apple }) { server in
                let api = server.connection()
                let forged = AppleIDNotificationRequest(payload: "not.a.notification")
                let flood: HTTPFields = [.forwardedFor: "203.0.113.9"]
                // The default limit: 1,200 a minute from one address, each refused for its signature.
                for _ in 0..<1_200 {
                    let refused = try await api.send(.post, "/v1/webhooks/apple-id", json: forged, headers: flood)
                    #expect(refused.status == .badRequest, "\(refused.text)")
                }
                let limited = try await api.send(.post, "/v1/webhooks/apple-id", json: forged, headers: flood)
                RateLimitTests.expectLimited(limited)
                let sub = Self.newSub()
                _ = try await AppleSignInTests.signIn(api, appleID, sub: sub)
                let real = try await appleID.notification(type: "consent-revoked", sub: sub)
                #expect(Self.disposition(try await Self.post(api, real, from: "203.0.113.9")) == nil, "the flooding address is refused even Apple's")
                #expect(Self.disposition(try await Self.post(api, real, from: "17.58.0.1")) == "applied", "another address is not")
                server.clock.advance(by: 60)
                let recovered = try await api.send(.post, "/v1/webhooks/apple-id", json: forged, headers: flood)
                #expect(recovered.status == .badRequest, "\(recovered.text)")
                await api.close()
            }
        }
    }
}
