import Foundation
import TallyAPI
@testable import TallyClient
import TallyServer
import TallyTestSupport
import Testing

/// The SDK's account calls (`Client+Account.swift`) against a real server whose mail hook is a local stand-in.
@Suite("Client account recovery", .timeLimit(.minutes(1)))
struct ClientAccountRecoveryTests {
    @Test("Verify the email, change the password, reset it by a mailed code: this device signed in again, the other signed out")
    func accountCalls() async throws {
        try await MailStandIn.with { mail in
            try await TallyTestServer.with(configure: { $0.mail = MailConfiguration(webhookURL: mail.url, secret: mail.secret) }) { server in
                let (phone, _) = server.client()
                let email = "sdk\(UUID().uuidString.prefix(10).lowercased())@example.com"
                let user = try await phone.signInAsGuest()
                _ = try await phone.link(email: email, password: "first password")
                #expect(try await phone.fetch(phone.meQuery, forceRefresh: true).emailVerified == false)

                try await phone.requestEmailVerification()
                let verification = try await mail.nextMessage(to: email)
                #expect(verification.template == "email_verification")
                await #expect {
                    try await phone.verifyEmail(code: verification.code == "00000000" ? "00000001" : "00000000")
                } throws: { ($0 as? ClientError)?.serverCode == .invalidCode }
                let me = try await phone.verifyEmail(code: verification.code)
                #expect(me.emailVerified && me.userId == user.userId)
                #expect(phone.value(phone.meQuery)?.emailVerified == true, "the cached profile shows it at once")
                await #expect {
                    try await phone.requestEmailVerification()
                } throws: { ($0 as? ClientError)?.serverCode == .alreadyVerified }

                await #expect {
                    try await phone.changePassword(current: "not the password", new: "second password")
                } throws: { ($0 as? ClientError)?.code == .invalidCredentials }
                try await phone.changePassword(current: "first password", new: "second password")
                #expect(try await phone.fetch(phone.walletQuery, forceRefresh: true).balance == 0, "this device stays signed in")

                let (tablet, _) = server.client()
                _ = try await tablet.signIn(email: email, password: "second password")
                // No account: the same answer, and nothing is mailed.
                try await phone.requestPasswordReset(email: "nobody-\(UUID().uuidString.prefix(8).lowercased())@example.com")
                try await phone.requestPasswordReset(email: email)
                let reset = try await mail.nextMessage(to: email, after: 1)
                #expect(reset.template == "password_reset" && mail.messages.count == 2)
                let signedIn = try await phone.resetPassword(email: email, code: reset.code, newPassword: "third password")
                #expect(signedIn.userId == user.userId && !signedIn.isGuest)
                #expect(try await phone.fetch(phone.walletQuery, forceRefresh: true).balance == 0, "signed in with the new password")
                await #expect {
                    try await tablet.fetch(tablet.walletQuery, forceRefresh: true)
                } throws: { ($0 as? ClientError)?.code == .unauthorized }
                await #expect {
                    try await phone.resetPassword(email: email, code: reset.code, newPassword: "fourth password")
                } throws: { ($0 as? ClientError)?.serverCode == .invalidCode }
                #expect(mail.refused == 0)
            }
        }
    }
}
