import Foundation
import TallyAppleJWS

/// The `client_secret` of Apple's token and revoke endpoints: a JWT the app's team signs with its Sign in with Apple
/// key (the `.p8` file, P-256): header `{"alg":"ES256","kid":keyId}`, claims `iss` team id, `iat`, `exp` (at most six
/// months later), `aud` `https://appleid.apple.com`, `sub` the client id. The key is never logged or kept in a message.
public enum AppleClientSecret {
    /// The audience Apple expects.
    public static let audience = "https://appleid.apple.com"
    /// The longest lifetime Apple accepts: six months (15,777,000 s).
    public static let maximumLifetime: TimeInterval = 15_777_000

    /// The secret for `clientId` of `teamId`, signed with the `.p8` key in `privateKeyPEM` (PKCS#8 or SEC1 PEM) named
    /// `keyId`, valid from `now` for `lifetime`. Throws ``AppleIDConfigurationError`` for a key that is not P-256 PEM,
    /// empty ids, or a lifetime not within (0, six months].
    public static func make(
        teamId: String, keyId: String, clientId: String, privateKeyPEM: String, now: Date, lifetime: TimeInterval = 3600
    ) throws(AppleIDConfigurationError) -> String {
        try make(teamId: teamId, clientId: clientId, signer: try signer(keyId: keyId, pem: privateKeyPEM), now: now, lifetime: lifetime)
    }

    /// The signer of the `.p8` key in `pem`, named `keyId`.
    static func signer(keyId: String, pem: String) throws(AppleIDConfigurationError) -> ES256BearerSigner {
        guard let signer = ES256BearerSigner(keyId: keyId, pem: pem) else {
            throw AppleIDConfigurationError("the Sign in with Apple private key is not a P-256 private key in PEM")
        }
        return signer
    }

    /// The secret signed by `signer` (made once by ``AppleTokenClient``).
    static func make(
        teamId: String, clientId: String, signer: ES256BearerSigner, now: Date, lifetime: TimeInterval
    ) throws(AppleIDConfigurationError) -> String {
        guard !teamId.isEmpty, !signer.keyId.isEmpty, !clientId.isEmpty else {
            throw AppleIDConfigurationError("the team id, key id and client id must all be set")
        }
        guard
            let claims = BearerClaims(
                iss: teamId, issuedAt: now, lifetime: lifetime, maximumLifetime: maximumLifetime, aud: audience, sub: clientId)
        else { throw AppleIDConfigurationError("a client secret lives more than 0 s and at most six months, from a time it can carry") }
        guard let secret = signer.sign(claims) else { throw AppleIDConfigurationError("the client secret could not be signed") }
        return secret
    }
}
