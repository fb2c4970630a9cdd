import Crypto
import Foundation

/// The signer of the bearer tokens Apple's server APIs take (Sign in with Apple's client secret, DeviceCheck's token,
/// the App Store Server API's token and offer signatures): a team's `.p8` key (P-256), named by its key id. A token is
/// a compact JWS with header `{"alg":"ES256","kid":keyId}` (and `"typ"` when set), the claims as given, and the ES256
/// signature (raw r‖s) of the two. JSON is written with sorted keys. The key is never printed.
public struct ES256BearerSigner: Sendable, CustomStringConvertible {
    /// The key's id (the header's `kid`).
    public let keyId: String
    /// The header's `typ`, if any (`JWT` for the App Store Server API).
    public let type: String?
    private let key: P256.Signing.PrivateKey

    /// A signer with `key`.
    public init(keyId: String, key: P256.Signing.PrivateKey, type: String? = nil) {
        self.keyId = keyId
        self.key = key
        self.type = type
    }

    /// A signer with the key in `pem` (the `.p8` file: PKCS#8, or SEC1, PEM); nil when it is not a P-256 private key.
    public init?(keyId: String, pem: String, type: String? = nil) {
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else { return nil }
        self.init(keyId: keyId, key: key, type: type)
    }

    private struct Header: Encodable {
        var alg = "ES256"
        var kid: String
        var typ: String?
    }

    /// The compact JWS of `claims`; nil when they cannot be encoded or the key cannot sign.
    public func sign(_ claims: some Encodable) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let header = try? encoder.encode(Header(kid: keyId, typ: type)), let payload = try? encoder.encode(claims) else { return nil }
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        guard let signature = try? key.signature(for: Data(input.utf8)) else { return nil }
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// `date` as a JWT NumericDate (whole seconds since 1970, rounded down); nil for a time 64 bits cannot hold.
    public static func numericDate(_ date: Date) -> Int64? { Int64(exactly: date.timeIntervalSince1970.rounded(.down)) }

    /// The key id; never the key.
    public var description: String { "ES256BearerSigner(keyId: \(keyId))" }
}

/// The claims of a bearer token: JWT's registered ones (RFC 7519 §4.1) that Apple's APIs use, and the App Store's
/// `bid`. Those left nil are not written.
public struct BearerClaims: Encodable, Sendable, Hashable {
    /// The issuer: the team id, or the App Store Connect issuer id.
    public var iss: String
    /// When issued, in seconds since 1970.
    public var iat: Int64
    /// When it expires, in seconds since 1970.
    public var exp: Int64?
    /// The audience.
    public var aud: String?
    /// The subject (Sign in with Apple: the client id).
    public var sub: String?
    /// The app's bundle id (the App Store Server API).
    public var bid: String?

    /// Claims issued by `iss` at `iat`.
    public init(iss: String, iat: Int64, exp: Int64? = nil, aud: String? = nil, sub: String? = nil, bid: String? = nil) {
        self.iss = iss
        self.iat = iat
        self.exp = exp
        self.aud = aud
        self.sub = sub
        self.bid = bid
    }

    /// Claims issued by `iss` at `now` and expiring `lifetime` later; nil when `lifetime` is not within
    /// (0, `maximumLifetime`] or `now` is a time the claims cannot carry.
    public init?(
        iss: String, issuedAt now: Date, lifetime: TimeInterval, maximumLifetime: TimeInterval, aud: String, sub: String? = nil,
        bid: String? = nil
    ) {
        guard lifetime > 0, lifetime <= maximumLifetime, let seconds = Int64(exactly: lifetime.rounded(.down)),
            let iat = ES256BearerSigner.numericDate(now)
        else { return nil }
        self.init(iss: iss, iat: iat, exp: iat + seconds, aud: aud, sub: sub, bid: bid)
    }
}
