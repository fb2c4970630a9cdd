import Foundation
import TallyAPI
import Testing

@Suite("Identity and sessions")
struct IdentityTests {
    @Test("Guest upgrade in place, sign-in, refresh rotation and reuse detection", arguments: StoreKind.allCases)
    func sessionLifecycle(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let deviceId = "device-" + UUID().uuidString
            let guest = try await api.newGuest(deviceId: deviceId)
            let again = try await api.newGuest(deviceId: deviceId)
            #expect(again.userId == guest.userId)
            try await api.grant(42, to: guest)

            let email = "u\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let linked = try await api.send(.post, "/v1/auth/link", token: guest.accessToken, json: CredentialsRequest(email: email, password: "correct horse"))
            #expect(linked.status == .ok)
            let me = try linked.decode(Me.self)
            #expect(me.userId == guest.userId && !me.isGuest && me.email == email)
            #expect(try await api.wallet(guest).balance == 42)

            let other = try await api.newGuest()
            let taken = try await api.send(.post, "/v1/auth/link", token: other.accessToken, json: CredentialsRequest(email: email.uppercased(), password: "another one"))
            #expect(taken.status == .conflict && taken.errorCode == "credential_in_use")

            let wrong = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: "wrong password"))
            #expect(wrong.status == .unauthorized && wrong.errorCode == "invalid_credentials")
            let signedIn = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: "correct horse"))
            let session = try signedIn.decode(SessionTokens.self)
            #expect(session.userId == guest.userId && !session.isGuest)

            let rotated = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: session.refreshToken))
            #expect(rotated.status == .ok)
            let next = try rotated.decode(SessionTokens.self)
            // The old token again: the whole family is revoked, including the token just issued.
            let reuse = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: session.refreshToken))
            #expect(reuse.status == .unauthorized && reuse.errorCode == "refresh_token_reused")
            let afterReuse = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: next.refreshToken))
            #expect(afterReuse.status == .unauthorized)
            #expect(try await api.send(.get, "/v1/me", token: next.accessToken).status == .unauthorized)
            // The guest's own first session is unaffected.
            #expect(try await api.send(.get, "/v1/me", token: guest.accessToken).status == .ok)
            await api.close()
        }
    }

    @Test("Access tokens expire by the injected clock; sign-out and account deletion end them", arguments: StoreKind.allCases)
    func tokenEnd(kind: StoreKind) async throws {
        try await LiveServer.with(kind, accessTokenTTL: 900) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).status == .ok)
            server.clock.advance(by: 16 * 60)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).status == .unauthorized)
            let refreshed = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: user.refreshToken)).decode(SessionTokens.self)
            #expect(try await api.send(.get, "/v1/me", token: refreshed.accessToken).status == .ok)

            #expect(try await api.send(.post, "/v1/auth/sign-out", token: refreshed.accessToken).status == .noContent)
            #expect(try await api.send(.get, "/v1/me", token: refreshed.accessToken).status == .unauthorized)

            let doomed = try await api.newGuest()
            #expect(try await api.send(.delete, "/v1/me", token: doomed.accessToken).status == .noContent)
            #expect(try await api.send(.get, "/v1/wallet", token: doomed.accessToken).status == .unauthorized)
            #expect(try await api.send(.get, "/admin/v1/users/\(doomed.userId)", admin: true).status == .notFound)
            await api.close()
        }
    }

    @Test("Guest creation is rate limited per IP, with Retry-After", arguments: StoreKind.allCases)
    func guestRateLimit(kind: StoreKind) async throws {
        // Years after every other test's sign-ups, which share the PostgreSQL database and the loopback address.
        try await LiveServer.with(kind, signupsPerHour: 3, start: Date(timeIntervalSince1970: 2_100_000_000)) { server in
            let api = server.connection()
            let first = "device-" + UUID().uuidString
            _ = try await api.newGuest(deviceId: first)
            _ = try await api.newGuest()
            _ = try await api.newGuest()
            let limited = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString))
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 > 0)
            // An existing device is not a new sign-up.
            #expect(try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: first)).status == .ok)
            server.clock.advance(by: 3601)
            _ = try await api.newGuest()
            await api.close()
        }
    }

    @Test("No endpoint reaches another user's data", arguments: StoreKind.allCases)
    func crossUser(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let alice = try await api.newGuest()
            let bob = try await api.newGuest()
            try await api.grant(50, to: alice)
            let hold = try await api.send(.post, "/v1/wallet/holds", token: alice.accessToken, json: CreateHoldRequest(amount: 10, ttlSeconds: 60))
            let holdId = try hold.decode(Hold.self).holdId
            #expect(try await api.send(.get, "/v1/wallet/holds/\(holdId)", token: bob.accessToken).status == .notFound)
            #expect(try await api.send(.post, "/v1/wallet/holds/\(holdId)/capture", token: bob.accessToken, json: CaptureHoldRequest(amount: 10)).status == .notFound)
            #expect(try await api.send(.delete, "/v1/wallet/holds/\(holdId)", token: bob.accessToken).status == .notFound)
            // A user id sent by the client is ignored: the token decides.
            let spoofed = try await api.send(.get, "/v1/wallet", token: bob.accessToken, headers: [.init("X-User-Id")!: alice.userId])
            #expect(try spoofed.decode(Wallet.self).balance == 0)
            #expect(try await api.send(.post, "/admin/v1/users/\(alice.userId)/grants", token: alice.accessToken, json: GrantRequest(amount: 5, reason: "x"), on: .admin).status == .unauthorized)
            let forged = alice.accessToken.dropLast(2) + "xx"
            #expect(try await api.send(.get, "/v1/wallet", token: String(forged)).status == .unauthorized)
            #expect(try await api.wallet(alice).held == 10)
            await api.close()
        }
    }
}
