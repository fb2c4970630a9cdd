import Crypto
import Foundation

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
        try make(teamId: teamId, keyId: keyId, clientId: clientId, key: try privateKey(pem: privateKeyPEM), now: now, lifetime: lifetime)
    }

    /// The `.p8` key in `pem`.
    static func privateKey(pem: String) throws(AppleIDConfigurationError) -> P256.Signing.PrivateKey {
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw AppleIDConfigurationError("the Sign in with Apple private key is not a P-256 private key in PEM")
        }
    }

    private struct Header: Encodable {
        var alg = "ES256"
        var kid: String
    }

    private struct Claims: Encodable {
        var iss: String
        var iat: Int64
        var exp: Int64
        var aud: String
        var sub: String
    }

    /// The secret signed with `key` (parsed once by ``AppleTokenClient``).
    static func make(
        teamId: String, keyId: String, clientId: String, key: P256.Signing.PrivateKey, now: Date, lifetime: TimeInterval
    ) throws(AppleIDConfigurationError) -> String {
        guard !teamId.isEmpty, !keyId.isEmpty, !clientId.isEmpty else {
            throw AppleIDConfigurationError("the team id, key id and client id must all be set")
        }
        guard lifetime > 0, lifetime <= maximumLifetime, let seconds = Int64(exactly: lifetime.rounded(.down)) else {
            throw AppleIDConfigurationError("a client secret lives more than 0 s and at most six months")
        }
        guard let issuedAt = Int64(exactly: now.timeIntervalSince1970.rounded(.down)) else {
            throw AppleIDConfigurationError("the clock reads no time a client secret can carry")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let header = try encoder.encode(Header(kid: keyId))
            let claims = try encoder.encode(
                Claims(iss: teamId, iat: issuedAt, exp: issuedAt + seconds, aud: audience, sub: clientId))
            let signingInput = AppleBase64URL.encode(header) + "." + AppleBase64URL.encode(claims)
            let signature = try key.signature(for: Data(signingInput.utf8))
            return signingInput + "." + AppleBase64URL.encode(signature.rawRepresentation)
        } catch {
            throw AppleIDConfigurationError("the client secret could not be signed")
        }
    }
}
