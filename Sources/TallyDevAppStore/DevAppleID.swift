import AsyncHTTPClient
import Crypto
import CryptoExtras
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyAppleID
import TallyAppleJWS

/// What to get wrong in an identity token or an account notification, for tests of every refusal a verifier must make.
/// Nil (the default everywhere) signs as Apple does. The raw values are the HTTP API's `defect` strings.
public enum DevAppleIDDefect: String, Sendable, Hashable, Codable, CaseIterable {
    /// `iss` is not `https://appleid.apple.com`.
    case wrongIssuer
    /// Already expired: an identity token issued 20 minutes ago and expired 10 minutes ago; a notification issued two
    /// days ago.
    case expired
    /// Issued an hour from now.
    case issuedInFuture
    /// The payload is changed after signing (another `sub`).
    case tampered
    /// Signed with a key the key set does not hold, under a `kid` it does not hold.
    case unknownKid
    /// Signed with a key the key set does not hold, under the signing key's `kid`.
    case foreignKey
    /// `alg: none` and an empty signature.
    case algNone
    /// `alg: HS256`: an HMAC-SHA-256 keyed with the signing key's public PEM (the key-confusion attack).
    case algHS256
    /// An identity token without a `nonce` claim.
    case missingNonce
}

/// Sign in with Apple as Apple's servers play it, for development and tests: identity tokens signed (RS256, jwt-kit)
/// with rotating keys served as a key set, authorization codes exchanged at a token endpoint that checks the client
/// secret, refresh tokens revoked (and recorded), and server-to-server account notifications signed and posted to a
/// webhook. Nothing of Tally is faked: a server verifies all of it as it verifies Apple's.
///
/// The in-process API is what tests call; `tally-dev dev-appstore` serves the same over HTTP beside the App Store
/// (``buildDevAppStoreApplication(store:appleID:host:port:logger:onServerRunning:)``). Every date comes from the clock.
public final class DevAppleID: Sendable {
    /// What the stand-in expects of its client and where it sends notifications.
    public struct Configuration: Sendable {
        /// The client id: identity tokens' `aud` by default, and the `client_id` the token endpoint accepts.
        public var clientId = "com.example.oracle"
        /// The team id a client secret must name as `iss`; nil: any.
        public var teamId: String?
        /// The key id a client secret's header must name as `kid`; nil: any.
        public var keyId: String?
        /// The app's Sign in with Apple public key: with it, a client secret's signature is verified; without it, a
        /// well-formed secret is accepted and recorded as unverified.
        public var clientPublicKey: P256.Signing.PublicKey?
        /// Where account notifications are posted (`POST {"payload": "<JWT>"}`); nil: none are sent.
        public var webhook: String?
        /// An identity token's lifetime (Apple's: 10 minutes).
        public var identityTokenLifetime: TimeInterval = 600
        /// An authorization code's lifetime (Apple's: 5 minutes).
        public var authorizationCodeLifetime: TimeInterval = 300
        /// The most one notification delivery may take.
        public var deliveryTimeout: TimeAmount = .seconds(10)
        /// Where the keys are kept (written again at each rotation); nil: in memory only.
        public var keysDirectory: URL?

        /// The defaults: client `com.example.oracle`, any team and key id, secrets unverified, no webhook.
        public init() {}
    }

    /// An identity token minted for a user, with the authorization code that goes with it.
    public struct Minted: Sendable, Hashable, Codable {
        /// The signed identity token.
        public var identityToken: String
        /// The single-use code `POST /auth/token` exchanges.
        public var authorizationCode: String
        /// The user's id.
        public var sub: String
    }

    /// How a client secret was checked.
    public enum ClientSecretCheck: String, Sendable, Hashable, Codable {
        /// Its signature verified with the configured public key.
        case verified
        /// Well formed, but no public key was configured to verify it with.
        case unverified
    }

    /// Apple's tokens for an exchanged code (`POST /auth/token`), in Apple's field names.
    public struct Tokens: Sendable, Hashable, Codable {
        /// An access token.
        public var access_token: String
        /// `Bearer`.
        public var token_type: String
        /// Seconds.
        public var expires_in: Int
        /// The refresh token (what a server revokes at account deletion).
        public var refresh_token: String
        /// An identity token for the user, no nonce.
        public var id_token: String
    }

    /// A code exchanged.
    public struct Exchange: Sendable, Hashable, Codable {
        /// The user.
        public var sub: String
        /// The refresh token issued.
        public var refreshToken: String
        /// How the client secret was checked.
        public var clientSecret: ClientSecretCheck
        /// When.
        public var at: Date
    }

    /// A token revoked (`POST /auth/revoke`).
    public struct Revocation: Sendable, Hashable, Codable {
        /// The token, as sent.
        public var token: String
        /// `token_type_hint`, if sent.
        public var tokenTypeHint: String?
        /// The user, when it is a refresh token this stand-in issued.
        public var sub: String?
        /// Whether it is a refresh token this stand-in issued (Apple answers 200 either way).
        public var known: Bool
        /// How the client secret was checked.
        public var clientSecret: ClientSecretCheck
        /// When.
        public var at: Date
    }

    /// An account notification, signed.
    public struct Notification: Sendable, Hashable, Codable {
        /// The JWT, as the body's `payload`.
        public var payload: String
        /// Its `jti`.
        public var jti: String
        /// The event type.
        public var type: String
        /// The user.
        public var sub: String
        /// The event's time (`event_time`, written in milliseconds).
        public var eventTime: Date
        /// The body posted: `{"payload":"<JWT>"}`.
        public var body: [UInt8] { Array(#"{"payload":"\#(payload)"}"#.utf8) }
    }

    /// One post of a notification to the webhook.
    public struct Delivery: Sendable, Hashable, Codable {
        /// The notification's `jti`.
        public var jti: String
        /// Its event type.
        public var type: String
        /// The URL posted to.
        public var webhook: String
        /// The answer's status; nil when there was none.
        public var status: Int?
        /// Why there was no answer.
        public var error: String?
        /// When.
        public var at: Date
    }

    /// An OAuth refusal of the token or revoke endpoint, answered as Apple does: `{"error": "<error>"}`, 400 (or 401).
    public struct OAuthFailure: Error, Sendable, Hashable, CustomStringConvertible {
        /// `invalid_request`, `invalid_client`, `invalid_grant`, `unsupported_grant_type`.
        public var error: String
        /// Why, for the stand-in's own log and tests (Apple says less).
        public var reason: String
        /// The HTTP status.
        public var status: Int
        /// `error: reason`.
        public var description: String { "\(error): \(reason)" }

        static func invalidClient(_ reason: String) -> Self { Self(error: "invalid_client", reason: reason, status: 401) }
        static func invalidGrant(_ reason: String) -> Self { Self(error: "invalid_grant", reason: reason, status: 400) }
        static func invalidRequest(_ reason: String) -> Self { Self(error: "invalid_request", reason: reason, status: 400) }
    }

    private struct Grant {
        var sub: String
        var email: String?
        var isPrivateEmail: Bool?
        var audience: String
        var expiresAt: Date
        var used = false
    }

    private struct State {
        var keys: DevAppleIDKeys
        var stranger: DevAppleIDKeys.Key?
        var webhook: String?
        var grants: [String: Grant] = [:]
        var refreshTokens: [String: String] = [:]
        var exchanges: [Exchange] = []
        var revocations: [Revocation] = []
        var deliveries: [Delivery] = []
        var keyRequests = 0
    }

    /// The configuration.
    public let configuration: Configuration
    private let clock: any TallyClock
    private let logger: Logger
    private let state: Mutex<State>

    /// A stand-in signing with `keys`, on `clock`.
    public init(
        configuration: Configuration = Configuration(), keys: DevAppleIDKeys, clock: any TallyClock = DevSystemClock(),
        logger: Logger = Logger(label: "tally.dev-appleid")
    ) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        state = Mutex(State(keys: keys, webhook: configuration.webhook))
    }

    /// The P-256 public key in `pem`: a public key, or the `.p8` private key itself (its public half is taken).
    public static func clientPublicKey(pem: String) throws -> P256.Signing.PublicKey {
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return key }
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
            throw DevAppStore.Failure(code: "bad_client_key", message: "the client key is not a P-256 key in PEM", status: 400)
        }
        return key.publicKey
    }

    // MARK: Keys

    /// The key set `GET /auth/keys` answers (counted in ``keyRequests`` when `counting`).
    public func jwks(counting: Bool = false) -> AppleJSONWebKeySet {
        state.withLock { state in
            if counting { state.keyRequests += 1 }
            return state.keys.jwks
        }
    }

    /// How many times the key set was served over HTTP.
    public var keyRequests: Int { state.withLock { $0.keyRequests } }

    /// The `kid` that signs now.
    public var signingKid: String { state.withLock { $0.keys.signing.kid } }

    /// Makes a new key the signing key, keeping the others unless `dropOld`; writes the set when it is kept in a
    /// directory. Returns the new `kid`.
    @discardableResult
    public func rotateKeys(dropOld: Bool = false) throws -> String {
        let key = try DevAppleIDKeys.Key.generate()
        let keys = state.withLock { state in
            state.keys.rotate(to: key, dropOld: dropOld)
            return state.keys
        }
        if let directory = configuration.keysDirectory { try keys.write(to: directory) }
        logger.info("dev-appleid: keys rotated", metadata: ["apple.kid": "\(key.kid)", "apple.dropOld": "\(dropOld)"])
        return key.kid
    }

    // MARK: Identity tokens

    /// Signs an identity token for `sub` (nil: a new id in Apple's shape), with `email` (a contact; `isPrivateEmail`
    /// marks a relay address) and, for a raw `nonce`, the claim `nonce` = its SHA-256 hex; for `audience` (nil: the
    /// client id), valid for `expiresIn` (nil: the configured lifetime); getting `defect` wrong if asked. Returns it with
    /// a fresh authorization code for the same user.
    public func identityToken(
        sub: String? = nil, email: String? = nil, isPrivateEmail: Bool? = nil, nonce: String? = nil, audience: String? = nil,
        expiresIn: TimeInterval? = nil, defect: DevAppleIDDefect? = nil
    ) async throws -> Minted {
        let sub = sub ?? Self.newSub()
        let audience = audience ?? configuration.clientId
        let now = clock.now
        let token = try await signIdentityToken(
            sub: sub, email: email, isPrivateEmail: isPrivateEmail, nonce: nonce, audience: audience, expiresIn: expiresIn, defect: defect,
            now: now)
        let code = "c" + Self.randomHex(16) + ".0.dev"
        state.withLock { state in
            state.grants[code] = Grant(
                sub: sub, email: email, isPrivateEmail: isPrivateEmail, audience: audience,
                expiresAt: now.addingTimeInterval(configuration.authorizationCodeLifetime))
        }
        return Minted(identityToken: token, authorizationCode: code, sub: sub)
    }

    /// An identity token signed at `now` (see ``identityToken(sub:email:isPrivateEmail:nonce:audience:expiresIn:defect:)``).
    private func signIdentityToken(
        sub: String, email: String?, isPrivateEmail: Bool?, nonce: String?, audience: String, expiresIn: TimeInterval?,
        defect: DevAppleIDDefect?, now: Date
    ) async throws -> String {
        var issuedAt = now
        var lifetime = expiresIn ?? configuration.identityTokenLifetime
        if defect == .expired {
            issuedAt = now.addingTimeInterval(-1200)
            lifetime = 600
        } else if defect == .issuedInFuture {
            issuedAt = now.addingTimeInterval(3600)
        }
        let claims = IdentityClaims(
            iss: defect == .wrongIssuer ? "https://appleid.example.com" : AppleIdentityVerifier.issuer, aud: audience,
            exp: Self.seconds(issuedAt) + Int64(lifetime.rounded()), iat: Self.seconds(issuedAt), sub: sub,
            nonce: defect == .missingNonce ? nil : nonce.map(AppleNonce.hash), email: email, email_verified: email == nil ? nil : true,
            is_private_email: isPrivateEmail.map { $0 ? "true" : "false" }, auth_time: Self.seconds(issuedAt), nonce_supported: true)
        return try await sign(claims, defect: defect) { claims in claims.sub = "tampered-\(claims.sub)" }
    }

    // MARK: The token and revoke endpoints

    /// `POST /auth/token` with `grant_type=authorization_code`: the client id and secret checked (``OAuthFailure``
    /// `invalid_client`), then the code — minted here, unused, unexpired, for this client (`invalid_grant`
    /// otherwise; a code is exchanged once).
    public func exchange(clientId: String?, clientSecret: String?, code: String?, grantType: String?) async throws(OAuthFailure) -> Tokens {
        guard grantType == "authorization_code" else {
            throw OAuthFailure(error: "unsupported_grant_type", reason: "only authorization_code is served", status: 400)
        }
        guard let code, !code.isEmpty else { throw OAuthFailure.invalidRequest("no code") }
        let check = try checkClient(clientId: clientId, clientSecret: clientSecret)
        let now = clock.now
        let grant = try state.withLock { state throws(OAuthFailure) -> Grant in
            guard var grant = state.grants[code] else { throw OAuthFailure.invalidGrant("the code was not issued here") }
            guard !grant.used else { throw OAuthFailure.invalidGrant("the code was already exchanged") }
            guard now <= grant.expiresAt else { throw OAuthFailure.invalidGrant("the code has expired") }
            guard grant.audience == clientId else { throw OAuthFailure.invalidGrant("the code was issued to another client") }
            grant.used = true
            state.grants[code] = grant
            return grant
        }
        let idToken: String
        do {
            idToken = try await signIdentityToken(
                sub: grant.sub, email: grant.email, isPrivateEmail: grant.isPrivateEmail, nonce: nil, audience: grant.audience, expiresIn: nil,
                defect: nil, now: now)
        } catch {
            throw OAuthFailure(error: "server_error", reason: "the id token could not be signed", status: 500)
        }
        let refreshToken = "r" + Self.randomHex(16) + ".0.dev"
        state.withLock { state in
            state.refreshTokens[refreshToken] = grant.sub
            state.exchanges.append(Exchange(sub: grant.sub, refreshToken: refreshToken, clientSecret: check, at: now))
        }
        return Tokens(access_token: "a" + Self.randomHex(16) + ".0.dev", token_type: "Bearer", expires_in: 3600, refresh_token: refreshToken, id_token: idToken)
    }

    /// `POST /auth/revoke`: the client checked like the token endpoint, then the token recorded as revoked (a refresh
    /// token issued here stops being one). Apple answers 200 for an unknown token too; so does this.
    @discardableResult
    public func revoke(clientId: String?, clientSecret: String?, token: String?, tokenTypeHint: String?) async throws(OAuthFailure) -> Revocation {
        guard let token, !token.isEmpty else { throw OAuthFailure.invalidRequest("no token") }
        let check = try checkClient(clientId: clientId, clientSecret: clientSecret)
        let now = clock.now
        return state.withLock { state in
            let sub = state.refreshTokens.removeValue(forKey: token)
            let revocation = Revocation(token: token, tokenTypeHint: tokenTypeHint, sub: sub, known: sub != nil, clientSecret: check, at: now)
            state.revocations.append(revocation)
            return revocation
        }
    }

    /// Every code exchanged, in order.
    public var exchanges: [Exchange] { state.withLock { $0.exchanges } }

    /// Every revocation, in order.
    public var revocations: [Revocation] { state.withLock { $0.revocations } }

    private struct ClientSecretClaims: Decodable {
        var iss: String
        var iat: Double
        var exp: Double
        var aud: AudienceClaim
        var sub: String
    }

    /// The client id is the configured one and the secret an ES256 JWT as Apple requires (its signature verified when
    /// the app's public key is configured).
    private func checkClient(clientId: String?, clientSecret: String?) throws(OAuthFailure) -> ClientSecretCheck {
        guard clientId == configuration.clientId else { throw OAuthFailure.invalidClient("client_id is not \(configuration.clientId)") }
        guard let clientSecret else { throw OAuthFailure.invalidClient("no client_secret") }
        guard let token = DevReceivedJWS(clientSecret), let header = token.header else {
            throw OAuthFailure.invalidClient("the client secret is not a JWT")
        }
        guard header.alg == "ES256" else { throw OAuthFailure.invalidClient("the client secret is not ES256") }
        if let keyId = configuration.keyId, header.kid != keyId { throw OAuthFailure.invalidClient("the client secret's kid is not \(keyId)") }
        guard let claims = token.claims(as: ClientSecretClaims.self) else {
            throw OAuthFailure.invalidClient("the client secret lacks iss, iat, exp, aud or sub")
        }
        if let teamId = configuration.teamId, claims.iss != teamId { throw OAuthFailure.invalidClient("the client secret's iss is not \(teamId)") }
        guard claims.sub == configuration.clientId else { throw OAuthFailure.invalidClient("the client secret's sub is not the client id") }
        guard claims.aud.value == [AppleClientSecret.audience] else {
            throw OAuthFailure.invalidClient("the client secret's aud is not \(AppleClientSecret.audience)")
        }
        let now = clock.now.timeIntervalSince1970
        guard claims.iat <= now + 60, claims.exp > now, claims.exp - claims.iat <= AppleClientSecret.maximumLifetime else {
            throw OAuthFailure.invalidClient("the client secret is not valid now, or lives longer than six months")
        }
        guard let publicKey = configuration.clientPublicKey else { return .unverified }
        guard token.isSigned(by: publicKey) else {
            throw OAuthFailure.invalidClient("the client secret's signature does not verify with the app's key")
        }
        return .verified
    }

    // MARK: Account notifications

    private struct NotificationClaims: JWTPayload {
        var iss: String
        var aud: String
        var iat: Int64
        var jti: String
        var events: String
        func verify(using _: some JWTAlgorithm) async throws {}
    }

    private struct Events: Encodable {
        var type: String
        var sub: String
        var email: String?
        var is_private_email: String?
        var event_time: Int64
    }

    /// Signs a server-to-server notification of `type` (`email-disabled`, `email-enabled`, `consent-revoked`,
    /// `account-delete`, or any other string) about `sub`, with `email` for the email events, for the client id. The
    /// event happened at `eventTime` (nil: when it is signed; earlier: a notification Apple sends late).
    public func notification(
        type: String, sub: String, email: String? = nil, isPrivateEmail: Bool? = nil, eventTime: Date? = nil, defect: DevAppleIDDefect? = nil
    ) async throws -> Notification {
        let now = clock.now
        let issuedAt = defect == .expired ? now.addingTimeInterval(-2 * 24 * 3600) : defect == .issuedInFuture ? now.addingTimeInterval(3600) : now
        let eventTime = Int64(((eventTime ?? issuedAt).timeIntervalSince1970 * 1000).rounded(.down))
        let events = Events(type: type, sub: sub, email: email, is_private_email: isPrivateEmail.map { $0 ? "true" : "false" }, event_time: eventTime)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let jti = Self.randomHex(16)
        let claims = NotificationClaims(
            iss: defect == .wrongIssuer ? "https://appleid.example.com" : AppleIdentityVerifier.issuer, aud: configuration.clientId,
            iat: Self.seconds(issuedAt), jti: jti, events: String(decoding: try encoder.encode(events), as: UTF8.self))
        let payload = try await sign(claims, defect: defect) { claims in claims.events = claims.events.replacingOccurrences(of: sub, with: "tampered-\(sub)") }
        return Notification(payload: payload, jti: jti, type: type, sub: sub, eventTime: Date(timeIntervalSince1970: Double(eventTime) / 1000))
    }

    /// The webhook notifications go to.
    public var webhook: String? { state.withLock { $0.webhook } }

    /// Sends later notifications to `webhook` (nil: to none).
    public func setWebhook(_ webhook: String?) { state.withLock { $0.webhook = webhook } }

    /// Every delivery so far, in order.
    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    /// Posts `notification` to the webhook once (no retries) and records the outcome; nil without a webhook.
    @discardableResult
    public func deliver(_ notification: Notification) async -> Delivery? {
        guard let webhook else { return nil }
        let at = clock.now
        var status: Int?
        var failure: String?
        do {
            status = try await DevWebhook.post(
                notification.body, to: webhook, userAgent: "tally-dev-appleid/1", timeout: configuration.deliveryTimeout)
        } catch {
            failure = String(describing: error).localizedCaseInsensitiveContains("refused") ? "connection refused" : "no answer (\(type(of: error)))"
        }
        let delivery = Delivery(jti: notification.jti, type: notification.type, webhook: webhook, status: status, error: failure, at: at)
        state.withLock { $0.deliveries.append(delivery) }
        logger.debug(
            "dev-appleid: notification delivered",
            metadata: ["apple.type": "\(notification.type)", "apple.status": .string(status.map { "\($0)" } ?? failure ?? "-")])
        return delivery
    }

    // MARK: Signing

    private struct IdentityClaims: JWTPayload {
        var iss: String
        var aud: String
        var exp: Int64
        var iat: Int64
        var sub: String
        var nonce: String?
        var email: String?
        /// Apple has written these booleans as JSON booleans and as strings: one of each here, so a verifier reads both.
        var email_verified: Bool?
        var is_private_email: String?
        var auth_time: Int64
        var nonce_supported: Bool
        func verify(using _: some JWTAlgorithm) async throws {}
    }

    /// Signs `claims` RS256 with the signing key through jwt-kit (an implementation apart from the verifier's), or
    /// with `defect`: `tamper` changes the claims after signing.
    private func sign<Claims: JWTPayload>(_ claims: Claims, defect: DevAppleIDDefect?, tamper: (inout Claims) -> Void) async throws -> String {
        var signer = state.withLock { $0.keys.signing }
        var kid = signer.kid
        if defect == .unknownKid || defect == .foreignKey {
            signer = try strangerKey()
            if defect == .unknownKid { kid = signer.kid }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        switch defect {
        case .algNone?, .algHS256?:
            let none = defect == .algNone
            let header = try encoder.encode(["alg": none ? "none" : "HS256", "kid": kid, "typ": "JWT"])
            let input = Base64URL.encode(header) + "." + Base64URL.encode(try encoder.encode(claims))
            let secret = SymmetricKey(data: Data(signer.privateKey.publicKey.pemRepresentation.utf8))
            let signature = none ? Data() : Data(HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: secret))
            return input + "." + Base64URL.encode(signature)
        default:
            let keys = JWTKeyCollection()
            await keys.add(rsa: try Insecure.RSA.PrivateKey(backing: signer.privateKey), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
            let token = try await keys.sign(claims, kid: JWKIdentifier(string: kid))
            guard defect == .tampered else { return token }
            var changed = claims
            tamper(&changed)
            let parts = token.split(separator: ".")
            return parts[0] + "." + Base64URL.encode(try encoder.encode(changed)) + "." + parts[2]
        }
    }

    /// Signs `claimsJSON` — claims as written, of any value (a test's times beyond what any clock reads, numbers no
    /// JSON integer holds) — RS256 with the signing key, as Apple signs identity tokens and notifications.
    public func sign(claimsJSON: [UInt8]) throws -> String {
        let signer = state.withLock { $0.keys.signing }
        let header = try JSONSerialization.data(withJSONObject: ["alg": "RS256", "kid": signer.kid, "typ": "JWT"], options: [.sortedKeys])
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claimsJSON)
        let signature = try signer.privateKey.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// A key the set never holds (made once).
    private func strangerKey() throws -> DevAppleIDKeys.Key {
        if let stranger = state.withLock({ $0.stranger }) { return stranger }
        let key = try DevAppleIDKeys.Key.generate()
        return state.withLock { state in
            if state.stranger == nil { state.stranger = key }
            return state.stranger ?? key
        }
    }

    private static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }

    private static func randomHex(_ bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    }

    /// A user id in Apple's shape: `000123.<32 hex>.0456`.
    private static func newSub() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(format: "%06d.", Int.random(in: 0..<1_000_000, using: &generator)) + randomHex(16)
            + String(format: ".%04d", Int.random(in: 0..<10_000, using: &generator))
    }
}
