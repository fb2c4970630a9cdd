import Foundation

/// Verifies Sign in with Apple identity tokens and Apple's server-to-server account notifications before anything in
/// them is believed.
///
/// An identity token is accepted only when every rule holds, each refusal an ``AppleIDVerificationError``:
/// 1. a compact JWS (`malformed`) whose `alg` is `RS256` (`unsupported_algorithm`) and whose header names a `kid`;
/// 2. the `kid` is one of Apple's keys (``AppleKeyCache``: fetched again once on an unknown `kid`, then
///    `unknown_key`; `keys_unavailable` when Apple's keys cannot be had — answer 503, not 401);
/// 3. the signature verifies with that key (`invalid_signature`), and the payload has `iss`, `aud`, `exp`, `iat` and
///    `sub` of the right types (`malformed`);
/// 4. `iss` is `https://appleid.apple.com` (`wrong_issuer`); every `aud` is a configured audience (`wrong_audience`);
/// 5. `exp` is not past, `iat` not in the future, and `iat` not older than ``maximumTokenAge``, each within
///    ``leeway`` (`expired`);
/// 6. when a raw nonce is given, the token's `nonce` is its SHA-256 hex (``AppleNonce/hash(_:)``) — a token without
///    one is refused too (`wrong_nonce`).
///
/// The signature is checked before any claim, so a changed payload is always `invalid_signature`. Times are the
/// caller's `now` (the server's injected clock). A value: copies share the key cache.
public struct AppleIdentityVerifier: Sendable {
    /// The issuer of every token and notification.
    public static let issuer = "https://appleid.apple.com"

    /// The audiences accepted: the app's bundle id, and any Services ID it signs in with on the web.
    public let audiences: Set<String>
    /// Apple's keys.
    public let keys: AppleKeyCache
    /// The clock skew tolerated on `exp` and `iat`.
    public let leeway: TimeInterval
    /// The oldest `iat` an identity token may have (Apple's last 10 minutes; this bounds a token with a far `exp`).
    public let maximumTokenAge: TimeInterval
    /// The oldest `iat` an account notification may have (the server dedupes by ``AppleAccountEvent/id`` within it).
    public let maximumNotificationAge: TimeInterval

    /// A verifier of tokens for `audiences` with the keys of `keys`. Throws when `audiences` is empty or holds "".
    public init(
        audiences: Set<String>, keys: AppleKeyCache, leeway: TimeInterval = 60, maximumTokenAge: TimeInterval = 24 * 3600,
        maximumNotificationAge: TimeInterval = 24 * 3600
    ) throws(AppleIDConfigurationError) {
        guard !audiences.isEmpty, !audiences.contains("") else { throw AppleIDConfigurationError("no audience (client id) is configured") }
        guard leeway >= 0, maximumTokenAge > 0, maximumNotificationAge > 0 else {
            throw AppleIDConfigurationError("the leeway and the maximum ages must be positive")
        }
        self.audiences = audiences
        self.keys = keys
        self.leeway = leeway
        self.maximumTokenAge = maximumTokenAge
        self.maximumNotificationAge = maximumNotificationAge
    }

    /// What an identity token says beyond ``Envelope``.
    private struct IdentityClaims: Decodable {
        var exp: Double
        var sub: String
        var nonce: String?
        var email: String?
        var email_verified: AppleBooleanClaim?
        var is_private_email: AppleBooleanClaim?
    }

    /// Verifies `identityToken` (what `ASAuthorizationAppleIDCredential.identityToken` holds) at `now`; with
    /// `rawNonce`, its `nonce` claim must be that nonce's SHA-256 hex. Pass the raw nonce the app sent whenever it sent
    /// one: nil skips the nonce rule (and with it the protection against a token taken from another request). A token
    /// that verifies verifies again until it expires: taking each once is the caller's (``AppleIdentity/tokenDigest``).
    public func verify(identityToken: String, rawNonce: String?, now: Date) async throws(AppleIDVerificationError) -> AppleIdentity {
        let (jws, audience, issuedAt) = try await verified(identityToken, "identity token", now: now)
        let claims = try jws.claims(IdentityClaims.self, "identity token")
        let expiresAt = try AppleInstant.date(seconds: claims.exp, claim: "exp")
        guard expiresAt > issuedAt else { throw AppleIDVerificationError.malformed("the token expires before it was issued") }
        guard now <= expiresAt.addingTimeInterval(leeway) else { throw AppleIDVerificationError(.expired, "the token has expired") }
        try check(issuedAt: issuedAt, now: now, maximumAge: maximumTokenAge)
        if let rawNonce {
            guard let nonce = claims.nonce else {
                throw AppleIDVerificationError(.wrongNonce, "a nonce was sent but the token carries none")
            }
            guard nonce == AppleNonce.hash(rawNonce) else {
                throw AppleIDVerificationError(.wrongNonce, "the token's nonce is not the SHA-256 of the nonce sent")
            }
        }
        guard !claims.sub.isEmpty else { throw AppleIDVerificationError.malformed("the token's sub is empty") }
        return AppleIdentity(
            sub: claims.sub, email: claims.email, emailVerified: claims.email_verified?.value ?? false,
            isPrivateEmail: claims.is_private_email?.value ?? false, audience: audience, issuedAt: issuedAt, expiresAt: expiresAt,
            tokenDigest: jws.digest)
    }

    /// What a notification says beyond ``Envelope``.
    private struct NotificationClaims: Decodable {
        var jti: String
        var events: String
    }

    private struct Events: Decodable {
        var type: String
        var sub: String
        var email: String?
        var is_private_email: AppleBooleanClaim?
        var event_time: Double
    }

    /// Verifies an account notification's `payload` (the JWT of the body `{"payload": "…"}`) at `now`: the same
    /// signature, issuer and audience rules as identity tokens, `iat` neither in the future nor older than
    /// ``maximumNotificationAge``, then its `events` claim — a JSON string — decoded. `event_time` is read as
    /// milliseconds when it is beyond the year 5138 in seconds (Apple has sent both).
    public func verifyNotification(_ payload: String, now: Date) async throws(AppleIDVerificationError) -> AppleAccountEvent {
        let (jws, audience, issuedAt) = try await verified(payload, "notification", now: now)
        try check(issuedAt: issuedAt, now: now, maximumAge: maximumNotificationAge)
        let claims = try jws.claims(NotificationClaims.self, "notification")
        guard let events = try? JSONDecoder().decode(Events.self, from: Data(claims.events.utf8)) else {
            throw AppleIDVerificationError.malformed("the notification's events claim is not the JSON Apple sends")
        }
        guard !events.sub.isEmpty, !events.type.isEmpty, !claims.jti.isEmpty else {
            throw AppleIDVerificationError.malformed("the notification's type, sub or jti is empty")
        }
        let seconds = events.event_time > 100_000_000_000 ? events.event_time / 1000 : events.event_time
        let eventTime = try AppleInstant.date(seconds: seconds, claim: "event_time")
        return AppleAccountEvent(
            type: AppleAccountEvent.EventType(rawValue: events.type), sub: events.sub, eventTime: eventTime,
            email: events.email, isPrivateEmail: events.is_private_email?.value, id: claims.jti, issuedAt: issuedAt, audience: audience)
    }

    // MARK: Rules

    /// The claims every token and notification of Apple's carries.
    private struct Envelope: Decodable {
        var iss: String
        var aud: AppleAudienceClaim
        var iat: Double
    }

    /// Steps 1 to 4, the same for a token and a notification (`what`, for messages): the JWS verified, its issuer and
    /// audience; the audience the token names and its `iat` (whose age each caller checks, after its own rules).
    private func verified(
        _ token: String, _ what: String, now: Date
    ) async throws(AppleIDVerificationError) -> (jws: AppleJWS, audience: String, issuedAt: Date) {
        let jws = try await verifiedJWS(token, now: now)
        let envelope = try jws.claims(Envelope.self, what)
        let audience = try check(issuer: envelope.iss, audience: envelope.aud)
        return (jws, audience, try AppleInstant.date(seconds: envelope.iat, claim: "iat"))
    }

    /// Steps 1 to 3: the JWS split, its key found, its signature verified.
    private func verifiedJWS(_ token: String, now: Date) async throws(AppleIDVerificationError) -> AppleJWS {
        let jws = try AppleJWS(token)
        let key = try await keys.key(for: jws.kid, now: now)
        try jws.verify(with: key)
        return jws
    }

    /// Step 4; the audience the token names.
    private func check(issuer: String, audience: AppleAudienceClaim) throws(AppleIDVerificationError) -> String {
        guard issuer == Self.issuer else { throw AppleIDVerificationError(.wrongIssuer, "the issuer is not \(Self.issuer)") }
        guard let first = audience.values.first, audience.values.allSatisfy(audiences.contains) else {
            throw AppleIDVerificationError(.wrongAudience, "the audience is not a configured client id")
        }
        return first
    }

    /// `iat` is neither after `now` nor older than `maximumAge`, beyond the leeway.
    private func check(issuedAt: Date, now: Date, maximumAge: TimeInterval) throws(AppleIDVerificationError) {
        guard issuedAt <= now.addingTimeInterval(leeway) else { throw AppleIDVerificationError(.expired, "issued in the future") }
        guard now.timeIntervalSince(issuedAt) <= maximumAge + leeway else { throw AppleIDVerificationError(.expired, "issued too long ago") }
    }
}

/// A configuration that cannot work: no audience, a private key that is not a P-256 PEM, a client secret lifetime
/// beyond Apple's six months. Its message never quotes the key.
public struct AppleIDConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let message: String
    /// A configuration error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}
