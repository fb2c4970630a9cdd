import Foundation
import HTTPTypes
import TallyAPI
import TallyServer
import Testing

/// The device secret names an installation: one guest at a time, never a linked account, and the free
/// quota counted per installation for guests, whatever signs out, links or deletes in between.
@Suite("Guests and installations", .timeLimit(.minutes(5)))
struct GuestInstallationTests {
    /// 2027-01-16T00:00:00Z: the first UTC midnight after the servers' start.
    static let utcMidnight = Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600)

    func reading(_ api: APIConnection, _ user: TestUser) async throws -> APIResponse {
        try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
    }

    func signIn(_ api: APIConnection, device: String) async throws -> (user: TestUser, tokens: SessionTokens, status: HTTPResponse.Status) {
        let response = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: device))
        let tokens = try response.decode(SessionTokens.self)
        return (TestUser(userId: tokens.userId, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken), tokens, response.status)
    }

    func signOut(_ api: APIConnection, _ user: TestUser) async throws {
        #expect(try await api.send(.post, "/v1/auth/sign-out", token: user.accessToken).status == .noContent)
    }

    @Test("Sign-out, link and deletion never give an installation a fresh day of free readings", arguments: StoreKind.allCases)
    func installationKeepsItsDay(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let device = "device-" + UUID().uuidString
            let first = try await signIn(api, device: device)
            #expect(first.status == .created && first.tokens.isGuest)
            try await api.grant(50, to: first.user)
            for _ in 0..<3 { #expect(try await reading(api, first.user).decode(ActionResult.self).paidWith == .quota) }

            // Sign out and in again as a guest: the same account, and today's readings stay spent.
            try await signOut(api, first.user)
            let again = try await signIn(api, device: device)
            #expect(again.status == .ok && again.user.userId == first.user.userId)
            let fourth = try await reading(api, again.user).decode(ActionResult.self)
            #expect(fourth.paidWith == .tokens && fourth.tokensCharged == 5)

            // Link, sign out, and sign in as a guest on the same installation: a new guest, not the linked account...
            let email = "g\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let linked = try await api.send(.post, "/v1/auth/link", token: again.user.accessToken, json: CredentialsRequest(email: email, password: "correct horse"))
            #expect(linked.status == .ok)
            try await signOut(api, again.user)
            let second = try await signIn(api, device: device)
            #expect(second.status == .created && second.tokens.isGuest)
            #expect(second.user.userId != first.user.userId, "the device secret opened the linked account")
            #expect(try await api.wallet(second.user).balance == 0)
            // ...whose day is the installation's: no free reading left.
            let quotas = try await api.send(.get, "/v1/quotas", token: second.user.accessToken).decode(QuotaList.self)
            #expect(quotas.items.first?.used == 3 && quotas.items.first?.remaining == 0 && quotas.items.first?.resetsAt == Self.utcMidnight)
            try await api.grant(10, to: second.user)
            let charged = try await reading(api, second.user).decode(ActionResult.self)
            #expect(charged.paidWith == .tokens && charged.wallet.balance == 5 && charged.quotas.first?.remaining == 0)

            // The linked account signs in by password and goes on with its own count.
            let account = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: "correct horse"))
                .decode(SessionTokens.self)
            #expect(account.userId == first.user.userId && !account.isGuest)
            let owner = TestUser(userId: account.userId, accessToken: account.accessToken, refreshToken: account.refreshToken)
            #expect(try await reading(api, owner).decode(ActionResult.self).paidWith == .tokens)

            // A new day: the linked account's free readings are its own, the installation's are the guest's.
            server.clock.set(Self.utcMidnight)
            #expect(try await reading(api, owner).decode(ActionResult.self).paidWith == .quota)
            for _ in 0..<3 { #expect(try await reading(api, second.user).decode(ActionResult.self).paidWith == .quota) }

            // Deleting the guest does not give the installation its day back.
            #expect(try await api.send(.delete, "/v1/me", token: second.user.accessToken).status == .ok)
            let third = try await signIn(api, device: device)
            #expect(third.status == .created && third.user.userId != second.user.userId)
            let refused = try await reading(api, third.user)
            #expect(refused.status == .paymentRequired && refused.errorCode == "insufficient_tokens")
            #expect(try refused.decode(ErrorResponse.self).quotas?.first?.used == 3)
            try await api.expectBooksBalance(owner)
            await api.close()
        }
    }
}
