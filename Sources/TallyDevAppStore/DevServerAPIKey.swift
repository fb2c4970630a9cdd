import Crypto
import Foundation
import JWTKit

/// An In-App Purchase key as App Store Connect issues one for the App Store Server API: an ES256 (P-256) private key,
/// its 10-character key id and the team's issuer id (a UUID). A server signs each request's bearer token with it
/// (``DevServerAPIKey/refusal(of:bundleId:now:)`` checks one as Apple does).
///
/// The stand-in hands the private key out (`GET /server-api-key`): it is a development stand-in, and whoever
/// configures the server under test needs it. Never use a key it generated, or gave to it, anywhere else.
public struct DevServerAPIKey: Sendable {
    /// `aud` of every token Apple accepts.
    public static let audience = "appstoreconnect-v1"
    /// The longest a token may live (`exp - iat`): 60 minutes.
    public static let maximumLifetime: TimeInterval = 3600

    /// The key id: the token header's `kid`.
    public let keyId: String
    /// The issuer id: the token's `iss`.
    public let issuerId: String
    /// The private key.
    public let privateKey: P256.Signing.PrivateKey

    /// The private key as App Store Connect's `.p8` download holds it (PEM, PKCS#8).
    public var privateKeyPEM: String { privateKey.pemRepresentation }

    /// A key with the given ids.
    public init(keyId: String, issuerId: String, privateKey: P256.Signing.PrivateKey) {
        self.keyId = keyId
        self.issuerId = issuerId
        self.privateKey = privateKey
    }

    /// A new key with a random key id and issuer id.
    public static func generate() -> DevServerAPIKey {
        DevServerAPIKey(keyId: randomId(), issuerId: UUID().uuidString.lowercased(), privateKey: P256.Signing.PrivateKey())
    }

    /// The characters of the ids Apple's developer account writes in 10 (key ids, team ids).
    static let idAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

    /// A new random 10-character id, as Apple writes key ids and team ids.
    static func randomId() -> String { String((0..<10).map { _ in idAlphabet.randomElement() ?? "A" }) }

    /// The key in the PEM (PKCS#8 `.p8`, or SEC1) file at `path`. The key id is taken from an App Store Connect file
    /// name (`AuthKey_<KEYID>.p8`), else derived from the public key; the issuer id is derived from the public key:
    /// the same file gives the same ids at every start.
    public static func load(file path: String) throws -> DevServerAPIKey {
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        guard let privateKey = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
            throw DevAppStore.Failure(code: "bad_server_api_key", message: "\(path) is not a P-256 private key in PEM", status: 400)
        }
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        let named = name.hasPrefix("AuthKey_") ? String(name.dropFirst("AuthKey_".count)) : nil
        let digest = Array(SHA256.hash(data: privateKey.publicKey.derRepresentation))
        let derived = String(digest.prefix(10).map { idAlphabet[Int($0) % idAlphabet.count] })
        let keyId = named.flatMap { $0.count == 10 && $0.allSatisfy(idAlphabet.contains) ? $0 : nil } ?? derived
        var uuid = Array(digest.suffix(16))
        uuid[6] = (uuid[6] & 0x0F) | 0x40
        uuid[8] = (uuid[8] & 0x3F) | 0x80
        let issuerId = UUID(
            uuid: (
                uuid[0], uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10], uuid[11], uuid[12],
                uuid[13], uuid[14], uuid[15]
            ))
        return DevServerAPIKey(keyId: keyId, issuerId: issuerId.uuidString.lowercased(), privateKey: privateKey)
    }

    /// The token's claims Apple checks (`aud` a string or an array, as jwt-kit reads it).
    private struct Claims: Decodable {
        var iss: String?
        var iat: Double?
        var exp: Double?
        var aud: AudienceClaim?
        var bid: String?
    }

    /// Why the `Authorization` header `authorization` does not authenticate a request for `bundleId` at `now`, or nil
    /// when it does: `Bearer <JWT>` with header `alg: ES256`, `kid` this key's id, `typ: JWT`; claims `iss` the issuer
    /// id, `aud` `appstoreconnect-v1`, `bid` the bundle id, `iat` not in the future (a minute's skew allowed), `exp`
    /// after now and at most 60 minutes after `iat`; an ES256 signature by this key.
    public func refusal(of authorization: String?, bundleId: String, now: Date) -> String? {
        guard let authorization else { return "no Authorization header" }
        guard let bearer = DevReceivedJWS.bearerToken(authorization) else { return "the Authorization header is not a Bearer token" }
        guard let token = DevReceivedJWS(bearer) else { return "the token is not a compact JWS" }
        guard let header = token.header else { return "the token's header is not JSON" }
        guard header.alg == "ES256" else { return "the token's alg is not ES256" }
        guard header.typ == "JWT" else { return "the token's typ is not JWT" }
        guard header.kid == keyId else { return "the token's kid is not the key id \(keyId)" }
        guard let claims = token.claims(as: Claims.self) else { return "the token's claims are not the JSON Apple takes" }
        guard claims.iss == issuerId else { return "the token's iss is not the issuer id \(issuerId)" }
        guard claims.aud?.value == [Self.audience] else { return "the token's aud is not \(Self.audience)" }
        guard claims.bid == bundleId else { return "the token's bid is not the bundle id \(bundleId)" }
        guard let iat = claims.iat, let exp = claims.exp else { return "the token lacks iat or exp" }
        let seconds = now.timeIntervalSince1970
        guard iat <= seconds + 60 else { return "the token's iat is in the future" }
        guard exp > seconds else { return "the token has expired" }
        guard exp - iat <= Self.maximumLifetime else { return "the token lives longer than 60 minutes (exp - iat > 3600)" }
        guard token.isSigned(by: privateKey.publicKey) else { return "the token's signature does not verify with the key \(keyId)" }
        return nil
    }
}

extension DevServerAPIKey {
    /// An offer signature's claims, as Apple's "Generating JWS to sign App Store requests" lists them.
    private struct OfferClaims: Decodable {
        var iss: String?
        var iat: Double?
        var exp: Double?
        var aud: String?
        var bid: String?
        var nonce: String?
        var productId: String?
        var offerIdentifier: String?
        var allowIntroductoryOffer: Bool?
        var transactionId: String?
    }

    /// What an offer signature presented with a purchase says, once verified.
    public struct VerifiedOffer: Sendable, Hashable {
        /// The nonce (single use).
        public var nonce: String
        /// Whether the introductory offer is allowed (eligibility signatures).
        public var allowIntroductoryOffer: Bool?
    }

    /// Why `compactJWS` is not a signature of `audience` (`promotional-offer` with `offerIdentifier`, or
    /// `introductory-offer-eligibility`) for `productId` of `bundleId` by this key, or the offer when it is: header
    /// `alg` ES256, `typ` JWT, `kid` this key; claims `iss`, `bid`, `aud`, `productId` (and `offerIdentifier`) as
    /// expected, a UUID `nonce`, `iat` within the last 24 hours (and not ahead by more than a minute), no `exp`; an
    /// ES256 signature by this key. Nonces are not checked here (the store keeps those it saw).
    public func verifyOffer(
        _ compactJWS: String, audience: String, productId: String, offerIdentifier: String?, bundleId: String, now: Date
    ) -> Result<VerifiedOffer, DevAppStore.Failure> {
        func refused(_ why: String) -> Result<VerifiedOffer, DevAppStore.Failure> {
            .failure(DevAppStore.Failure(code: "invalid_offer", message: "the offer signature is refused: \(why)", status: 400))
        }
        guard let token = DevReceivedJWS(compactJWS) else { return refused("not a compact JWS") }
        guard let header = token.header, header.alg == "ES256", header.typ == "JWT", header.kid == keyId else {
            return refused("the header is not {alg: ES256, typ: JWT, kid: \(keyId)}")
        }
        guard let claims = token.claims(as: OfferClaims.self) else { return refused("the claims are not JSON") }
        guard claims.iss == issuerId else { return refused("iss is not the issuer id") }
        guard claims.bid == bundleId else { return refused("bid is not the bundle id") }
        guard claims.aud == audience else { return refused("aud is not \(audience)") }
        guard claims.productId == productId else { return refused("productId is not \(productId)") }
        if audience == "promotional-offer", claims.offerIdentifier != offerIdentifier { return refused("offerIdentifier does not match") }
        if audience == "introductory-offer-eligibility", claims.allowIntroductoryOffer == nil || claims.transactionId == nil {
            return refused("allowIntroductoryOffer and transactionId are required")
        }
        guard claims.exp == nil else { return refused("an offer signature has no exp") }
        guard let nonce = claims.nonce, UUID(uuidString: nonce) != nil, nonce == nonce.lowercased() else {
            return refused("nonce is not a lowercase UUID")
        }
        guard let iat = claims.iat, iat <= now.timeIntervalSince1970 + 60, iat > now.timeIntervalSince1970 - 86_400 else {
            return refused("iat is not within the last 24 hours")
        }
        guard token.isSigned(by: privateKey.publicKey) else { return refused("the signature does not verify with the key \(keyId)") }
        return .success(VerifiedOffer(nonce: nonce, allowIntroductoryOffer: claims.allowIntroductoryOffer))
    }
}
