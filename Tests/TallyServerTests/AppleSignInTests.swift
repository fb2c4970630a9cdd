import Foundation
import Hummingbird
import Logging
import Crypto
import TallyAPI
import TallyAppleID
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// `POST /v1/auth/apple` through the real HTTP stack, on both stores, with identity tokens minted by the local Sign in
/// with Apple stand-in (its keys fetched by the server over loopback HTTP, on the server's clock): each refusal signs
/// nobody in; a new Apple identity makes an account or becomes the calling guest in place; a known one signs in, and a
/// guest reaching it is asked first (409 `account_exists`), then merged with `merge: true`.
@Suite("Sign in with Apple", .timeLimit(.minutes(2)))
struct AppleSignInTests {
    static let clientId = "com.example.oracle"
    /// A server on `kind` accepting tokens for ``clientId`` whose keys come from a stand-in on the server's clock.
    static func with(_ kind: StoreKind, _ body: @Sendable (LiveServer, DevAppleID, APIConnection) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        try await AppleIDStandIn.serving(clientId: clientId, clock: clock) { appleID, keysURL in
            let apple = try SignInWithAppleConfiguration(audiences: [clientId], keysURL: keysURL)
            try await LiveServer.with(kind, clock: clock, configure: { $0.signInWithApple = apple }) { server in
                let api = server.connection()
                try await body(server, appleID, api)
                await api.close()
            }
        }
    }

    /// A server whose configuration also exchanges codes and revokes tokens at the stand-in, with a key it knows.
    static func withTokens(_ kind: StoreKind, _ body: @Sendable (LiveServer, DevAppleID, APIConnection) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let key = P256.Signing.PrivateKey()
        try await AppleIDStandIn.serving(clientId: clientId, clock: clock, configure: { $0.clientPublicKey = key.publicKey }) { appleID, keysURL in
            let base = String(keysURL.dropLast("/auth/keys".count))
            var settings = AppleTokenClient.Configuration(teamId: "TEAM123456", keyId: "KEY1234567", clientId: clientId)
            (settings.tokenURL, settings.revokeURL) = (base + "/auth/token", base + "/auth/revoke")
            let apple = try SignInWithAppleConfiguration(
                audiences: [clientId], keysURL: keysURL, tokenSettings: settings, privateKeyPEM: key.pemRepresentation, privateKeyEnv: "TALLY_APPLE_KEY")
            try await LiveServer.with(kind, clock: clock, configure: { $0.signInWithApple = apple }) { server in
                let api = server.connection()
                try await body(server, appleID, api)
                await api.close()
            }
        }
    }

    /// Two `tally serve` processes on a scratch PostgreSQL accepting tokens for ``clientId`` from a stand-in whose clock
    /// starts at the wall clock's now (the processes run on the wall clock).
    static func withPair(_ body: @Sendable (ServerPair, DevAppleID) async throws -> Void) async throws {
        let clock = ManualClock(Date())
        try await AppleIDStandIn.serving(clientId: clientId, clock: clock) { appleID, keysURL in
            let config = """
                guestSignupsPerIPPerHour: 100000
                signInWithApple:
                  audiences: [\(clientId)]
                  keysURL: \(keysURL)
                """
            try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
                try await ServerPair.with(url: url, config: config) { pair in try await body(pair, appleID) }
            }
        }
    }

    /// Signs in with a token minted for `sub` (and the nonce it carries), as `caller` if given.
    static func signIn(
        _ api: APIConnection, _ appleID: DevAppleID, sub: String, caller: TestUser? = nil, merge: Bool? = nil, defect: DevAppleIDDefect? = nil,
        audience: String? = nil, sentNonce: String? = nil
    ) async throws -> APIResponse {
        let nonce = AppleNonce.make().raw
        let minted = try await appleID.identityToken(sub: sub, email: "\(sub)@privaterelay.appleid.com", nonce: nonce, audience: audience, defect: defect)
        return try await api.send(
            .post, "/v1/auth/apple", token: caller?.accessToken,
            json: AppleSignInRequest(identityToken: minted.identityToken, nonce: sentNonce ?? nonce, merge: merge))
    }

    @Test("A new Apple identity makes an account; the same identity signs in to it again", arguments: StoreKind.allCases)
    func newAccountThenSignIn(kind: StoreKind) async throws {
        try await Self.with(kind) { _, appleID, api in
            let first = try await Self.signIn(api, appleID, sub: "001234.apple.a")
            #expect(first.status == .created, "\(first.text)")
            let created = try first.decode(SessionTokens.self)
            #expect(!created.isGuest && created.merged == nil)
            let again = try await Self.signIn(api, appleID, sub: "001234.apple.a")
            let signedIn = try again.decode(SessionTokens.self)
            #expect(again.status == .ok && signedIn.userId == created.userId)
            let me: Me = try await api.send(.get, "/v1/me", token: created.accessToken).decode()
            #expect(me.userId == created.userId && !me.isGuest)
        }
    }

    @Test("Each refusal of an identity token names its cause and signs nobody in", arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        try await Self.with(kind) { _, appleID, api in
            let cases: [(String, DevAppleIDDefect?, String?, String?)] = [
                ("wrong_audience", nil, "com.example.other", nil), ("wrong_nonce", nil, nil, "another-raw-nonce-0123456789"),
                ("wrong_issuer", .wrongIssuer, nil, nil), ("expired", .expired, nil, nil), ("invalid_signature", .tampered, nil, nil),
                ("unknown_key", .unknownKid, nil, nil), ("wrong_nonce", .missingNonce, nil, nil),
            ]
            for (code, defect, audience, nonce) in cases {
                let answer = try await Self.signIn(api, appleID, sub: "001234.refused", defect: defect, audience: audience, sentNonce: nonce)
                #expect(answer.status == .unauthorized && answer.errorCode == code, "\(code): \(answer.status) \(answer.text)")
            }
            // Nobody was made: the identity's first good sign-in creates the account.
            #expect(try await Self.signIn(api, appleID, sub: "001234.refused").status == .created)
            let bad = try await api.send(.post, "/v1/auth/apple", raw: #"{"identityToken":"x","nonce":"short"}"#)
            #expect(bad.status == .badRequest && bad.errorCode == "invalid_field")
        }
    }

    @Test("Apple's key rotation is followed without a restart: a token signed with the new key signs in, the dropped key's are refused",
        arguments: StoreKind.allCases)
    func keyRotation(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appleID, api in
            let nonce = AppleNonce.make().raw
            let old = try await appleID.identityToken(sub: "001234.rotation", nonce: nonce)
            #expect(try await api.send(.post, "/v1/auth/apple", json: AppleSignInRequest(identityToken: old.identityToken, nonce: nonce)).status == .created)
            _ = try appleID.rotateKeys(dropOld: true)
            server.clock.advance(by: 11)  // past the 10 s the server waits between fetches for an unknown kid
            let answer = try await Self.signIn(api, appleID, sub: "001234.rotation")
            #expect(answer.status == .ok, "the new kid fetched: \(answer.text)")
            let dropped = try await api.send(.post, "/v1/auth/apple", json: AppleSignInRequest(identityToken: old.identityToken, nonce: nonce))
            #expect(dropped.status == .unauthorized && dropped.errorCode == "unknown_key", "\(dropped.text)")
        }
    }

    @Test("A new Apple identity from a guest makes the guest that account in place", arguments: StoreKind.allCases)
    func guestInPlace(kind: StoreKind) async throws {
        try await Self.with(kind) { _, appleID, api in
            let guest = try await api.newGuest(granted: 30)
            let answer = try await Self.signIn(api, appleID, sub: "001234.apple.b", caller: guest)
            let tokens = try answer.decode(SessionTokens.self)
            #expect(answer.status == .ok && tokens.userId == guest.userId && !tokens.isGuest, "\(answer.text)")
            #expect(try await api.send(.get, "/v1/wallet", token: tokens.accessToken).decode(Wallet.self).balance == 30)
        }
    }

    @Test("A guest reaching an existing account is asked first, then merged: tokens moved once, the guest's token refused",
        arguments: StoreKind.allCases)
    func mergeIntoExisting(kind: StoreKind) async throws {
        try await Self.with(kind) { _, appleID, api in
            let account = try await Self.signIn(api, appleID, sub: "001234.apple.c").decode(SessionTokens.self)
            try await api.grant(10, to: TestUser(userId: account.userId, accessToken: account.accessToken, refreshToken: account.refreshToken))
            let guest = try await api.newGuest(granted: 30)

            let asked = try await Self.signIn(api, appleID, sub: "001234.apple.c", caller: guest)
            #expect(asked.status == .conflict && asked.errorCode == "account_exists", "\(asked.text)")
            #expect(try asked.decode(ErrorResponse.self).guest == GuestProgress(balance: 30, documents: 0, purchases: 0))
            #expect(try await api.wallet(guest).balance == 30, "asking moved nothing")

            let merged = try await Self.signIn(api, appleID, sub: "001234.apple.c", caller: guest, merge: true)
            let tokens = try merged.decode(SessionTokens.self)
            #expect(merged.status == .ok && tokens.userId == account.userId, "\(merged.text)")
            #expect(tokens.merged?.guestUserId == guest.userId && tokens.merged?.tokensMoved == 30)
            #expect(try await api.send(.get, "/v1/wallet", token: tokens.accessToken).decode(Wallet.self).balance == 40)
            #expect(try await api.send(.get, "/v1/wallet", token: guest.accessToken).status == .unauthorized, "the guest's token is refused")
            let user = TestUser(userId: tokens.userId, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("A guest that declines the merge signs in to the account with the same identity token; the guest stays as it was",
        arguments: StoreKind.allCases)
    func declineMerge(kind: StoreKind) async throws {
        try await Self.with(kind) { _, appleID, api in
            let account = try await Self.signIn(api, appleID, sub: "001234.apple.d").decode(SessionTokens.self)
            let owner = TestUser(userId: account.userId, accessToken: account.accessToken, refreshToken: account.refreshToken)
            try await api.grant(10, to: owner)
            let device = "device-" + UUID().uuidString
            let guest = try await api.newGuest(deviceId: device)
            try await api.grant(30, to: guest)
            // One sheet, one identity token: asked, then the answer sent with the same token.
            let nonce = AppleNonce.make().raw
            let minted = try await appleID.identityToken(sub: "001234.apple.d", email: "d@privaterelay.appleid.com", nonce: nonce)
            func send(merge: Bool?) async throws -> APIResponse {
                try await api.send(
                    .post, "/v1/auth/apple", token: guest.accessToken,
                    json: AppleSignInRequest(identityToken: minted.identityToken, nonce: nonce, merge: merge))
            }
            let asked = try await send(merge: nil)
            #expect(asked.status == .conflict && asked.errorCode == "account_exists", "\(asked.text)")
            let declined = try await send(merge: false)
            let tokens = try declined.decode(SessionTokens.self)
            #expect(declined.status == .ok && tokens.userId == account.userId && tokens.merged == nil, "\(declined.text)")
            #expect(try await api.send(.get, "/v1/wallet", token: tokens.accessToken).decode(Wallet.self).balance == 10, "nothing moved")
            #expect(try await api.wallet(guest).balance == 30, "the guest keeps its tokens and its session")
            #expect(try await api.newGuest(deviceId: device).userId == guest.userId, "and its installation")
            // The token signed in once: neither answer takes it again.
            #expect(try await send(merge: false).errorCode == "token_used")
            #expect(try await send(merge: true).errorCode == "token_used")
            try await api.expectBooksBalance(guest)
        }
    }

    @Test("Email sign-in with merge: true from a guest carries the guest's tokens into the account", arguments: [StoreKind.sqlite])
    func emailSignInMerge(kind: StoreKind) async throws {
        try await Self.with(kind) { _, _, api in
            let owner = try await api.newGuest(granted: 5)
            #expect(try await api.send(.post, "/v1/auth/link", token: owner.accessToken, json: CredentialsRequest(email: "merge@example.com", password: "correct horse 1")).status == .ok)
            let guest = try await api.newGuest(granted: 7)
            let plain = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: "merge@example.com", password: "correct horse 1", merge: true))
            #expect(plain.status == .badRequest, "merge needs the guest's token: \(plain.text)")
            let answer = try await api.send(
                .post, "/v1/auth/sign-in", token: guest.accessToken, json: CredentialsRequest(email: "merge@example.com", password: "correct horse 1", merge: true))
            let tokens = try answer.decode(SessionTokens.self)
            #expect(answer.status == .ok && tokens.userId == owner.userId && tokens.merged?.tokensMoved == 7, "\(answer.text)")
            #expect(try await api.wallet(owner).balance == 12)
        }
    }

    @Test("Apple's consent-revoked ends the Apple account's sessions (once); account-delete deletes an Apple-only account; a forged one changes nothing",
        arguments: StoreKind.allCases)
    func accountNotifications(kind: StoreKind) async throws {
        try await Self.with(kind) { _, appleID, api in
            let revoked = try await Self.signIn(api, appleID, sub: "001234.consent").decode(SessionTokens.self)
            let forged = try await appleID.notification(type: "consent-revoked", sub: "001234.consent", defect: .tampered)
            let refused = try await api.send(.post, "/v1/webhooks/apple-id", json: AppleIDNotificationRequest(payload: forged.payload))
            #expect(refused.status == .badRequest && refused.errorCode == "invalid_signature", "\(refused.text)")
            #expect(try await api.send(.get, "/v1/me", token: revoked.accessToken).status == .ok, "a forged notification changes nothing")

            let consent = try await appleID.notification(type: "consent-revoked", sub: "001234.consent")
            let applied = try await api.send(.post, "/v1/webhooks/apple-id", json: AppleIDNotificationRequest(payload: consent.payload))
            #expect(applied.status == .ok && applied.text.contains("applied"), "\(applied.text)")
            #expect(try await api.send(.get, "/v1/me", token: revoked.accessToken).status == .unauthorized)
            let twice = try await api.send(.post, "/v1/webhooks/apple-id", json: AppleIDNotificationRequest(payload: consent.payload))
            #expect(twice.status == .ok && twice.text.contains("ignored"), "\(twice.text)")

            let deleted = try await Self.signIn(api, appleID, sub: "001234.delete").decode(SessionTokens.self)
            let delete = try await appleID.notification(type: "account-delete", sub: "001234.delete")
            #expect(try await api.send(.post, "/v1/webhooks/apple-id", json: AppleIDNotificationRequest(payload: delete.payload)).status == .ok)
            #expect(try await api.send(.get, "/v1/me", token: deleted.accessToken).status == .unauthorized)
            let other = try await appleID.notification(type: "email-disabled", sub: "001234.nobody", email: "x@privaterelay.appleid.com")
            let ignored = try await api.send(.post, "/v1/webhooks/apple-id", json: AppleIDNotificationRequest(payload: other.payload))
            #expect(ignored.status == .ok && ignored.text.contains("ignored"))
        }
    }

    @Test("The authorization code is exchanged at sign-in, and deleting the account (the user, or an operator in the console) revokes Apple's refresh token",
        arguments: [StoreKind.sqlite])
    func deletionRevokesAppleToken(kind: StoreKind) async throws {
        try await Self.withTokens(kind) { server, appleID, api in
            let nonce = AppleNonce.make().raw
            let minted = try await appleID.identityToken(sub: "001234.revoke", nonce: nonce)
            let answer = try await api.send(
                .post, "/v1/auth/apple",
                json: AppleSignInRequest(identityToken: minted.identityToken, nonce: nonce, authorizationCode: minted.authorizationCode))
            let tokens = try answer.decode(SessionTokens.self)
            #expect(answer.status == .created, "\(answer.text)")
            #expect(appleID.exchanges.count == 1, "the code was exchanged")
            // Kept encrypted: the database does not hold the token Apple issued.
            let issued = try #require(appleID.exchanges.first?.refreshToken)
            let stored = try #require(try await server.services.store.appleIdentity(userId: tokens.userId)?.refreshToken)
            #expect(stored.hasPrefix(StoredSecrets.prefix) && !stored.contains(issued), "\(stored)")
            #expect(try await api.send(.delete, "/v1/me", token: tokens.accessToken).status == .ok)
            #expect(appleID.revocations.map(\.sub) == ["001234.revoke"], "the refresh token was revoked at Apple")
            #expect(appleID.revocations.map(\.token) == [issued], "as Apple issued it")

            // An operator's deletion in the console revokes it too.
            let second = AppleNonce.make().raw
            let other = try await appleID.identityToken(sub: "001234.console", nonce: second)
            let signedIn = try await api.send(
                .post, "/v1/auth/apple",
                json: AppleSignInRequest(identityToken: other.identityToken, nonce: second, authorizationCode: other.authorizationCode))
            let userId = try signedIn.decode(SessionTokens.self).userId
            let op = try #require(try await ConsoleTests.signIn(api, key: server.adminKey).1)
            let deleted = try await ConsoleTests.post(api, "/console/users/\(userId)/delete", cookie: op.cookie, ["csrf": op.csrf, "typed": userId])
            #expect(deleted.status == .seeOther, "\(deleted.text)")
            #expect(appleID.revocations.map(\.sub) == ["001234.revoke", "001234.console"], "revoked at the console's deletion")
        }
    }
}
