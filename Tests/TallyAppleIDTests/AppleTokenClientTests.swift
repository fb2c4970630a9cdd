import Crypto
import Foundation
import TallyAppleID
import TallyAppleJWS
import TallyDevAppStore
import Testing

/// The client secret and `AppleTokenClient` against the stand-in's token and revoke endpoints over loopback HTTP.
@Suite("Sign in with Apple token endpoints", .timeLimit(.minutes(2)))
struct AppleTokenClientTests {
    static let teamId = "TEAM123456"
    static let keyId = "KEY7654321"

    /// A client of the stand-in at `base`, signing with `key`.
    static func client(_ base: String, key: P256.Signing.PrivateKey) throws -> AppleTokenClient {
        var configuration = AppleTokenClient.Configuration(teamId: teamId, keyId: keyId, clientId: AppleIDFixture.clientId)
        configuration.tokenURL = base + "/auth/token"
        configuration.revokeURL = base + "/auth/revoke"
        configuration.timeout = .seconds(10)
        return try AppleTokenClient(configuration: configuration, privateKeyPEM: key.pemRepresentation, logger: quietLogger)
    }

    @Test("The client secret is an ES256 JWT as Apple requires: kid, iss, iat, exp, aud, sub, a signature of the .p8 key")
    func clientSecret() throws {
        let key = P256.Signing.PrivateKey()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let secret = try AppleClientSecret.make(
            teamId: Self.teamId, keyId: Self.keyId, clientId: AppleIDFixture.clientId, privateKeyPEM: key.pemRepresentation, now: now,
            lifetime: 86_400)
        let header = try jwtPart(secret, 0)
        let claims = try jwtPart(secret, 1)
        #expect(header["alg"] as? String == "ES256" && header["kid"] as? String == Self.keyId)
        #expect(claims["iss"] as? String == Self.teamId && claims["sub"] as? String == AppleIDFixture.clientId)
        #expect(claims["aud"] as? String == "https://appleid.apple.com")
        #expect(claims["iat"] as? Int == 1_800_000_000 && claims["exp"] as? Int == 1_800_086_400)
        let parts = secret.split(separator: ".")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(Base64URL.decode(parts[2])))
        #expect(key.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))

        #expect(throws: AppleIDConfigurationError.self) {
            try AppleClientSecret.make(
                teamId: Self.teamId, keyId: Self.keyId, clientId: AppleIDFixture.clientId, privateKeyPEM: key.pemRepresentation, now: now,
                lifetime: AppleClientSecret.maximumLifetime + 1)
        }
        #expect(throws: AppleIDConfigurationError.self) {
            try AppleClientSecret.make(teamId: Self.teamId, keyId: Self.keyId, clientId: "c", privateKeyPEM: "not a key", now: now)
        }
        let error = #expect(throws: AppleIDConfigurationError.self) {
            try AppleTokenClient(configuration: .init(teamId: "", keyId: Self.keyId, clientId: "c"), privateKeyPEM: key.pemRepresentation)
        }
        #expect(error?.message.contains("BEGIN") == false)
        let client = try AppleTokenClient(configuration: .init(teamId: "T", keyId: "K", clientId: "c"), privateKeyPEM: key.pemRepresentation)
        #expect(!"\(client)".contains(key.pemRepresentation) && !String(reflecting: client).contains("BEGIN"))
    }

    @Test("A code is exchanged once for a refresh token and an id_token that verifies; the refresh token is revoked and recorded")
    func exchangeAndRevoke() async throws {
        let key = P256.Signing.PrivateKey()
        try await AppleIDFixture.with(configure: { configuration in
            configuration.teamId = Self.teamId
            configuration.keyId = Self.keyId
            configuration.clientPublicKey = key.publicKey
        }) { fixture in
            let client = try Self.client(fixture.base, key: key)
            let minted = try await fixture.appleID.identityToken(email: "someone@example.com", nonce: AppleNonce.make().raw)

            let tokens = try await client.exchange(authorizationCode: minted.authorizationCode, now: fixture.now)
            let refreshToken = try #require(tokens.refreshToken)
            #expect(tokens.tokenType == "Bearer" && tokens.expiresIn == 3600 && !tokens.accessToken.isEmpty)
            #expect(!"\(tokens)".contains(refreshToken) && !"\(tokens)".contains(tokens.accessToken), "printing the answer redacts the tokens")
            let identity = try await fixture.verifier.verify(identityToken: try #require(tokens.idToken), rawNonce: nil, now: fixture.now)
            #expect(identity.sub == minted.sub && identity.email == "someone@example.com")
            #expect(fixture.appleID.exchanges.map(\.clientSecret) == [.verified], "the client secret's signature was verified")

            let again = await #expect(throws: AppleTokenError.self) { try await client.exchange(authorizationCode: minted.authorizationCode, now: fixture.now) }
            #expect(again?.code == .invalidGrant && again?.status == 400, "a code is exchanged once")
            let unknown = await #expect(throws: AppleTokenError.self) { try await client.exchange(authorizationCode: "c-made-up", now: fixture.now) }
            #expect(unknown?.code == .invalidGrant)

            let late = try await fixture.appleID.identityToken()
            fixture.clock.advance(by: 301)
            let expired = await #expect(throws: AppleTokenError.self) { try await client.exchange(authorizationCode: late.authorizationCode, now: fixture.now) }
            #expect(expired?.code == .invalidGrant, "a code lives five minutes")

            try await client.revoke(refreshToken: refreshToken, now: fixture.now)
            let revocation = try #require(fixture.appleID.revocations.first)
            #expect(revocation.token == refreshToken && revocation.tokenTypeHint == "refresh_token" && revocation.known)
            #expect(revocation.sub == minted.sub && revocation.clientSecret == .verified)
            let (status, listed) = try await call(.GET, fixture.base + "/auth/revoked")
            let revoked = try #require(try object(listed)["revoked"] as? [[String: Any]])
            #expect(status == 200 && revoked.count == 1 && revoked.first?["token"] as? String == refreshToken)
        }
    }

    @Test("A client secret signed with another key, or for another team, is invalid_client; without the app's key it is accepted unverified")
    func clientSecretChecks() async throws {
        let key = P256.Signing.PrivateKey()
        try await AppleIDFixture.with(configure: { configuration in
            configuration.teamId = Self.teamId
            configuration.clientPublicKey = key.publicKey
        }) { fixture in
            let impostor = try Self.client(fixture.base, key: P256.Signing.PrivateKey())
            let minted = try await fixture.appleID.identityToken()
            let refused = await #expect(throws: AppleTokenError.self) { try await impostor.exchange(authorizationCode: minted.authorizationCode, now: fixture.now) }
            #expect(refused?.code == .invalidClient && refused?.status == 401)

            var configuration = AppleTokenClient.Configuration(teamId: "OTHERTEAM1", keyId: Self.keyId, clientId: AppleIDFixture.clientId)
            configuration.tokenURL = fixture.base + "/auth/token"
            let otherTeam = try AppleTokenClient(configuration: configuration, privateKeyPEM: key.pemRepresentation)
            let team = await #expect(throws: AppleTokenError.self) { try await otherTeam.exchange(authorizationCode: minted.authorizationCode, now: fixture.now) }
            #expect(team?.code == .invalidClient)

            let expired = try AppleClientSecret.make(
                teamId: Self.teamId, keyId: Self.keyId, clientId: AppleIDFixture.clientId, privateKeyPEM: key.pemRepresentation,
                now: fixture.now.addingTimeInterval(-7200), lifetime: 3600)
            let form = "client_id=\(AppleIDFixture.clientId)&client_secret=\(expired)&code=\(minted.authorizationCode)&grant_type=authorization_code"
            let (status, body) = try await call(.POST, fixture.base + "/auth/token", form: form)
            #expect(try status == 401 && (object(body)["error"] as? String) == "invalid_client", "an expired client secret")

            // The code survived the refusals: the right client still exchanges it.
            _ = try await Self.client(fixture.base, key: key).exchange(authorizationCode: minted.authorizationCode, now: fixture.now)
        }
        try await AppleIDFixture.with { fixture in
            let client = try Self.client(fixture.base, key: P256.Signing.PrivateKey())
            let minted = try await fixture.appleID.identityToken()
            _ = try await client.exchange(authorizationCode: minted.authorizationCode, now: fixture.now)
            #expect(fixture.appleID.exchanges.map(\.clientSecret) == [.unverified])
        }
    }

    @Test("Apple's other refusals and an unreachable endpoint are named errors")
    func otherFailures() async throws {
        try await AppleIDFixture.with { fixture in
            let (status, body) = try await call(.POST, fixture.base + "/auth/token", form: "client_id=\(AppleIDFixture.clientId)&grant_type=password")
            #expect(try status == 400 && (object(body)["error"] as? String) == "unsupported_grant_type")
            let (noSecret, answer) = try await call(.POST, fixture.base + "/auth/token", form: "client_id=\(AppleIDFixture.clientId)&code=c&grant_type=authorization_code")
            #expect(try noSecret == 401 && (object(answer)["error"] as? String) == "invalid_client")

            var configuration = AppleTokenClient.Configuration(teamId: Self.teamId, keyId: Self.keyId, clientId: AppleIDFixture.clientId)
            configuration.tokenURL = "http://127.0.0.1:1/auth/token"
            configuration.revokeURL = fixture.base + "/auth/nowhere"
            configuration.timeout = .milliseconds(300)  // AsyncHTTPClient retries a refused connection until the deadline
            let client = try AppleTokenClient(configuration: configuration, privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, logger: quietLogger)
            let unreachable = await #expect(throws: AppleTokenError.self) { try await client.exchange(authorizationCode: "c", now: fixture.now) }
            #expect(unreachable?.code == .unavailable && unreachable?.status == nil)
            let notFound = await #expect(throws: AppleTokenError.self) { try await client.revoke(refreshToken: "r", now: fixture.now) }
            #expect(notFound?.code == .unavailable && notFound?.status == 404)
        }
    }
}
