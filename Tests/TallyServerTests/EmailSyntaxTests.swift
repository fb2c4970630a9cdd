import Foundation
import TallyAPI
@testable import TallyServer
import TallyStore
import Testing

/// Addresses linked to an account are RFC 5321 mailboxes (issue 43, finding 13: `<script>…</script>@example.com` was
/// linked and reached the mail hook as `to`): a dot-atom local part without `<>"'();,` or spaces (a quoted one is
/// refused too), a domain of LDH labels (no address literal). An account linked before, whatever its address, still
/// signs in and gets its reset code.
@Suite("Email syntax", .timeLimit(.minutes(3)))
struct EmailSyntaxTests {
    static let refused = [
        "<script>alert(1)</script>@example.com", "\"quoted\"@example.com", "\"a b\"@example.com", "o'brien@example.com",
        "a(comment)@example.com", "a,b@example.com", "a;b@example.com", "a<b@example.com", "a>b@example.com", "a\\b@example.com",
        "a:b@example.com", "a[b]@example.com", ".a@example.com", "a.@example.com", "a..b@example.com", "a@@example.com",
        "a@[192.0.2.1]", "a@[IPv6:2001:db8::1]", "a@192.0.2.1", "a@example.123", "a@-example.com", "a@example-.com", "a@exa_mple.com",
        "a@example..com", "a@.example.com", "a@example.com.", "a@localhost", "a@" + String(repeating: "l", count: 64) + ".com",
        String(repeating: "l", count: 65) + "@example.com", "ü@example.com", "a@bücher.de", "a@exam ple.com", "@example.com", "a@",
        "a@b@example.com",
    ]
    static let accepted = [
        "first.last+tag@example.com", "a!#$%&*+-/=?^_`{|}~@example.co.uk", "x@xn--bcher-kva.de", "USER@Example.COM", "1@2.io",
        String(repeating: "l", count: 64) + "@example.com", "a@" + String(repeating: "l", count: 63) + ".com", "a-b@sub-domain.example.com",
    ]

    @Test("The mailbox rule, case by case")
    func rule() throws {
        for email in Self.refused {
            #expect(throws: APIError.self, "\(email)") { try Validate.email(email) }
        }
        for email in Self.accepted {
            #expect(try Validate.email(email) == email.lowercased(), "\(email)")
        }
        // What finds an account keeps the old, wider form: an address linked before still signs in.
        #expect(try Validate.accountEmail("<script>alert(1)</script>@example.com") == "<script>alert(1)</script>@example.com")
        #expect(try Validate.accountEmail("o'brien@example.com") == "o'brien@example.com")
    }

    @Test("Linking refuses every address outside RFC 5321's mailbox syntax, changes nothing and mails nothing; a mailbox links", arguments: StoreKind.allCases)
    func link(kind: StoreKind) async throws {
        try await AccountRecoveryTests.with(kind) { server, mail, api in
            let user = try await api.newGuest()
            for email in Self.refused {
                let answer = try await api.send(
                    .post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: "correct horse"))
                #expect(answer.status == .badRequest && answer.errorCode == "invalid_field", "\(email): \(answer.status) \(answer.text)")
            }
            let me = try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self)
            #expect(me.isGuest && me.email == nil)
            let email = "first.last+\(UUID().uuidString.prefix(6).lowercased())@Example.COM"
            let linked = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: "correct horse"))
            #expect(linked.status == .ok, "\(linked.text)")
            #expect(try linked.decode(Me.self).email == email.lowercased())
            #expect(try await api.send(.post, "/v1/auth/email/verify/send", token: user.accessToken).status == .accepted)
            _ = try await mail.nextMessage(to: email.lowercased())
            #expect(mail.messages.allSatisfy { Validate.isMailbox($0.to) }, "\(mail.messages.map(\.to))")
        }
    }

    @Test("An account linked before the rule, with an address it now refuses, still signs in and resets its password", arguments: StoreKind.allCases)
    func accountsLinkedBeforeStillSignIn(kind: StoreKind) async throws {
        try await AccountRecoveryTests.with(kind) { server, mail, api in
            // The password's hash from an account linked the ordinary way, given to one linked as an older server would.
            let (_, email) = try await AccountRecoveryTests.linkedUser(api, password: "correct horse")
            let hash = try #require(try await server.services.store.passwordHash(email: email)).passwordHash
            let old = try await api.newGuest()
            let odd = "<b>o'brien</b>\(UUID().uuidString.prefix(6).lowercased())@example.com"
            _ = try await server.services.store.linkCredentials(userId: old.userId, email: odd, passwordHash: hash)
            let signedIn = try await AccountRecoveryTests.signIn(api, odd.uppercased(), "correct horse")
            #expect(signedIn.status == .ok, "\(signedIn.text)")
            #expect(try signedIn.decode(SessionTokens.self).userId == old.userId)
            #expect(try await AccountRecoveryTests.forgot(api, odd).status == .accepted)
            let code = try await mail.nextMessage(to: odd).code
            let reset = try await AccountRecoveryTests.reset(api, odd, code, "battery staple")
            #expect(reset.status == .ok, "\(reset.text)")
            #expect(try await AccountRecoveryTests.signIn(api, odd, "battery staple").status == .ok)
            // It cannot be linked anew: another guest taking it is refused for its syntax.
            let other = try await api.newGuest()
            let again = try await api.send(.post, "/v1/auth/link", token: other.accessToken, json: CredentialsRequest(email: odd, password: "correct horse"))
            #expect(again.status == .badRequest && again.errorCode == "invalid_field", "\(again.text)")
        }
    }
}
