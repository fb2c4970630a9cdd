import Foundation
import TallyAPI
import TallyAppleID
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

/// A password reset and Sign in with Apple, through the real HTTP stack on both stores with the mail and Sign in with
/// Apple stand-ins: a reset of an account whose email was not verified removes the Apple identity linked to it (an
/// attacker who linked someone else's email and their own Apple ID loses the account when its owner recovers it), a
/// verified one keeps it, and the owner links Apple again from a signed-in session.
@Suite("Sign in with Apple and account recovery", .timeLimit(.minutes(2)))
struct AppleAccountRecoveryTests {
    /// A server on `kind` with a mail hook stand-in and the Sign in with Apple stand-in on the server's clock.
    static func with(_ kind: StoreKind, _ body: @Sendable (LiveServer, DevAppleID, MailStandIn, APIConnection) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        try await MailStandIn.with { mail in
            try await AppleIDStandIn.serving(clientId: AppleSignInTests.clientId, clock: clock) { appleID, keysURL in
                let apple = try SignInWithAppleConfiguration(audiences: [AppleSignInTests.clientId], keysURL: keysURL)
                try await LiveServer.with(kind, clock: clock, configure: {
                    $0.signInWithApple = apple
                    $0.mail = MailConfiguration(webhookURL: mail.url, secret: mail.secret)
                }) { server in
                    let api = server.connection()
                    defer { Task { await api.close() } }
                    try await body(server, appleID, mail, api)
                }
            }
        }
    }

    static func newEmail() -> String { "v\(UUID().uuidString.prefix(12).lowercased())@example.com" }

    static func link(_ api: APIConnection, _ user: TestUser, _ email: String, _ password: String) async throws {
        let linked = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: password))
        #expect(linked.status == .ok, "link: \(linked.text)")
    }

    /// Resets the password of `email` with the code mailed (the `mails`th mail to it, from 0): the answer.
    static func recover(_ api: APIConnection, _ mail: MailStandIn, _ email: String, mails: Int = 0) async throws -> APIResponse {
        #expect(try await AccountRecoveryTests.forgot(api, email).status == .accepted)
        let message = try await mail.nextMessage(to: email, after: mails)
        return try await AccountRecoveryTests.reset(api, email, message.code, "the owner's password")
    }

    @Test("A pre-account hijack ends at the owner's reset: the attacker's Apple ID, linked before or after the email, no longer opens the account",
        arguments: StoreKind.allCases)
    func hijackEndsAtReset(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appleID, mail, api in
            for appleFirst in [false, true] {
                let (email, sub) = (Self.newEmail(), "001234." + UUID().uuidString.prefix(12).lowercased())
                let account: TestUser
                if appleFirst {
                    let created = try await AppleSignInTests.signIn(api, appleID, sub: sub)
                    #expect(created.status == .created, "\(created.text)")
                    account = try created.testUser()
                    try await Self.link(api, account, email, "the attacker's password")
                } else {
                    account = try await api.newGuest()
                    try await Self.link(api, account, email, "the attacker's password")
                    let linked = try await AppleSignInTests.signIn(api, appleID, sub: sub, caller: account)
                    #expect(linked.status == .ok && (try? linked.testUser())?.userId == account.userId, "\(linked.text)")
                }
                try await api.grant(40, to: account)  // what the owner will have put in

                let reset = try await Self.recover(api, mail, email)
                #expect(reset.status == .ok, "\(reset.status) \(reset.text)")
                #expect((try? reset.decode(PasswordResetResult.self)) == PasswordResetResult(appleSignInRemoved: true), "\(reset.text)")
                #expect(try await api.send(.get, "/v1/me", token: account.accessToken).status == .unauthorized, "every session ended")

                server.clock.advance(by: 60)
                let attacker = try await AppleSignInTests.signIn(api, appleID, sub: sub)
                #expect(attacker.status == .created, "the attacker's Apple ID makes a new account: \(attacker.status) \(attacker.text)")
                #expect((try? attacker.testUser())?.userId != account.userId, "apple first: \(appleFirst)")
                let owner = try await AccountRecoveryTests.signIn(api, email, "the owner's password").testUser()
                #expect(owner.userId == account.userId)
                #expect(try await api.wallet(owner).balance >= 40, "the owner's tokens are there")
            }
        }
    }

    @Test("A verified email keeps its Apple identity at a reset (verifying from a session does not remove it); the owner links Apple again from a session",
        arguments: StoreKind.allCases)
    func ownerKeepsOrRelinksApple(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appleID, mail, api in
            // Verified from its own session after Apple was linked: both stay, and a reset keeps Apple.
            let (email, sub) = (Self.newEmail(), "001234." + UUID().uuidString.prefix(12).lowercased())
            let user = try await api.newGuest()
            try await Self.link(api, user, email, "first password")
            #expect(try await AppleSignInTests.signIn(api, appleID, sub: sub, caller: user).status == .ok)
            #expect(try await api.send(.post, "/v1/auth/email/verify/send", token: user.accessToken).status == .accepted)
            let verification = try await mail.nextMessage(to: email)
            let verified = try await api.send(.post, "/v1/auth/email/verify", token: user.accessToken, json: VerifyEmailRequest(code: verification.code))
            #expect(verified.status == .ok, "\(verified.text)")
            let apple = try await AppleSignInTests.signIn(api, appleID, sub: sub)
            #expect(apple.status == .ok && (try? apple.testUser())?.userId == user.userId, "verification kept Apple: \(apple.text)")
            let kept = try await Self.recover(api, mail, email, mails: 1)
            #expect((try? kept.decode(PasswordResetResult.self)) == PasswordResetResult(appleSignInRemoved: false), "\(kept.status) \(kept.text)")
            let after = try await AppleSignInTests.signIn(api, appleID, sub: sub)
            #expect(after.status == .ok && (try? after.testUser())?.userId == user.userId, "\(after.text)")

            // Unverified: the reset removes Apple; signed in with the new password, the owner links it again.
            let (other, otherSub) = (Self.newEmail(), "001234." + UUID().uuidString.prefix(12).lowercased())
            let owner = try await AppleSignInTests.signIn(api, appleID, sub: otherSub).testUser()
            try await Self.link(api, owner, other, "first password")
            let removed = try await Self.recover(api, mail, other)
            #expect((try? removed.decode(PasswordResetResult.self)) == PasswordResetResult(appleSignInRemoved: true), "\(removed.status) \(removed.text)")
            server.clock.advance(by: 60)
            let session = try await AccountRecoveryTests.signIn(api, other, "the owner's password").testUser()
            let relinked = try await AppleSignInTests.signIn(api, appleID, sub: otherSub, caller: session)
            #expect(relinked.status == .ok && (try? relinked.testUser())?.userId == owner.userId, "\(relinked.text)")
            let again = try await AppleSignInTests.signIn(api, appleID, sub: otherSub)
            #expect(again.status == .ok && (try? again.testUser())?.userId == owner.userId, "\(again.text)")
        }
    }
}
