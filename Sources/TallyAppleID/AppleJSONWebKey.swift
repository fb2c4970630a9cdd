/// One key of Apple's key set (`GET https://appleid.apple.com/auth/keys`), as a JSON Web Key (RFC 7517): Apple
/// publishes RSA keys for `RS256`, each named by `kid`. The stand-in serves the same shape.
public struct AppleJSONWebKey: Codable, Hashable, Sendable {
    /// The key type: `RSA`.
    public var kty: String
    /// The key's id, which a token's header names.
    public var kid: String
    /// What it is for: `sig`.
    public var use: String?
    /// The algorithm: `RS256`.
    public var alg: String?
    /// The modulus, base64url big-endian.
    public var n: String
    /// The public exponent, base64url big-endian (`AQAB`).
    public var e: String

    /// A key of the set.
    public init(kty: String = "RSA", kid: String, use: String? = "sig", alg: String? = "RS256", n: String, e: String) {
        self.kty = kty
        self.kid = kid
        self.use = use
        self.alg = alg
        self.n = n
        self.e = e
    }
}

/// Apple's key set: `{"keys": [...]}`.
public struct AppleJSONWebKeySet: Codable, Hashable, Sendable {
    /// The keys, in the order published.
    public var keys: [AppleJSONWebKey]

    /// A key set.
    public init(keys: [AppleJSONWebKey]) { self.keys = keys }
}
