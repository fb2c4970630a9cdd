import Foundation
import JWTKit
import Synchronization
import TallyAPI
import TallyStore

/// Signs and verifies access tokens (HS256 JWTs) and mints refresh tokens.
///
/// The keys (``SigningKeys``) come from the environment or a file in the data directory, never from the
/// database; every instance given the same keys accepts the tokens of every other. A token's header must
/// say exactly what Tally signs (`alg` HS256, a `kid` of one of the keys, no `crit`), whatever JWTKit would
/// tolerate. Expiry is checked against the injected clock.
final class TokenService: Sendable {
    private let keys = JWTKeyCollection()
    private let ring = Mutex<SigningKeys?>(nil)
    let clock: any TallyClock
    let accessTokenTTL: TimeInterval
    let refreshTokenTTL: TimeInterval

    init(clock: any TallyClock, accessTokenTTL: TimeInterval, refreshTokenTTL: TimeInterval) {
        self.clock = clock
        self.accessTokenTTL = accessTokenTTL
        self.refreshTokenTTL = refreshTokenTTL
    }

    /// Installs the signing keys; called once before the server starts.
    func install(_ signing: SigningKeys) async {
        for key in signing.keys {
            await keys.add(hmac: HMACKey(from: key.secret), digestAlgorithm: .sha256, kid: JWKIdentifier(string: key.id))
        }
        ring.withLock { $0 = signing }
    }

    /// A signed access token for a session, its lifetime in seconds, and its expiry as ``verify(_:)``
    /// will read it (JWT times are whole seconds).
    func accessToken(userId: String, sessionId: String) async throws -> (token: String, expiresIn: Int, expiresAt: Date) {
        guard let kid = ring.withLock({ $0?.current.id }) else { throw APIError(.unavailable, "The server is starting.") }
        let now = clock.now
        let expiresAt = Date(timeIntervalSince1970: now.addingTimeInterval(accessTokenTTL).timeIntervalSince1970.rounded(.down))
        let claims = AccessClaims(
            sub: SubjectClaim(value: userId), sid: sessionId, iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: expiresAt))
        var header = JWTHeader()
        header.typ = "JWT"
        return (try await keys.sign(claims, kid: JWKIdentifier(string: kid), header: header), Int(saturating: accessTokenTTL), expiresAt)
    }

    /// The identity in a valid, unexpired access token and its expiry; `nil` for anything else.
    func verify(_ token: String) async -> (identity: Identity, expiresAt: Date)? {
        guard let signing = ring.withLock({ $0 }), token.utf8.count < 2048, Self.acceptsHeader(of: token, keys: signing),
            let claims = try? await keys.verify(token, as: AccessClaims.self),
            claims.exp.value > clock.now
        else { return nil }
        return (Identity(userId: claims.sub.value, sessionId: claims.sid), claims.exp.value)
    }

    /// Whether the token's header is one Tally writes: a JSON object with `alg` `HS256`, the `kid` of one of
    /// `keys`, `typ` absent or `JWT`, and nothing a verifier would have to understand (`crit`) or fetch
    /// (`jku`, `jwk`, `x5u`, `x5c`). Anything else is refused before a signature is checked.
    static func acceptsHeader(of token: String, keys: SigningKeys) -> Bool {
        guard let end = token.utf8.firstIndex(of: UInt8(ascii: ".")),
            let bytes = Secrets.base64URLDecoded(String(token[..<end])),
            let header = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
            header["alg"] as? String == "HS256",
            let kid = header["kid"] as? String, keys.key(id: kid) != nil
        else { return false }
        if let typ = header["typ"] { guard typ as? String == "JWT" else { return false } }
        return !header.keys.contains { ["crit", "jku", "jwk", "x5u", "x5c"].contains($0) }
    }

    /// A new refresh token to hand out, and what to store (its hash and expiry).
    func refreshToken() -> (token: String, record: NewRefreshToken) {
        let token = Secrets.random(bytes: 32)
        return (token, NewRefreshToken(hash: Secrets.sha256(token), expiresAt: clock.now.addingTimeInterval(refreshTokenTTL)))
    }
}

/// The claims of an access token: who (`sub`), which session (`sid`), and until when.
struct AccessClaims: JWTPayload {
    var sub: SubjectClaim
    var sid: String
    var iat: IssuedAtClaim
    var exp: ExpirationClaim

    /// Expiry is checked by ``TokenService`` against the injected clock.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
