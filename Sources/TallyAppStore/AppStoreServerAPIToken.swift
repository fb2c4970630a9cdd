import Foundation
import TallyAppleJWS

/// The bearer token of the App Store Server API: a JWT the app's team signs with an In-App Purchase key (the `.p8`
/// file from App Store Connect, P-256) — header `{"alg":"ES256","kid":keyId,"typ":"JWT"}`, claims `iss` the issuer
/// id, `iat`, `exp` (Apple accepts at most 60 minutes after `iat`), `aud` `appstoreconnect-v1`, `bid` the bundle id
/// ("Generating JSON Web Tokens for API requests"). The key is never logged or kept in a message.
public struct AppStoreServerAPIToken: Sendable {
    /// The audience Apple expects.
    public static let audience = "appstoreconnect-v1"
    /// The longest lifetime Apple accepts: 60 minutes.
    public static let maximumLifetime: TimeInterval = 3_600

    /// Who signs: the key's id, the issuer (the team's id in App Store Connect's Keys page) and the app.
    public struct Credentials: Sendable, Hashable, CustomStringConvertible {
        /// The In-App Purchase key's id (the token's `kid`).
        public var keyId: String
        /// The issuer id (the token's `iss`).
        public var issuerId: String
        /// The app's bundle id (the token's `bid`).
        public var bundleId: String

        /// Credentials of key `keyId` issued by `issuerId`, for `bundleId`.
        public init(keyId: String, issuerId: String, bundleId: String) {
            self.keyId = keyId
            self.issuerId = issuerId
            self.bundleId = bundleId
        }

        /// The ids, which are not secret.
        public var description: String { "keyId \(keyId), issuerId \(issuerId), bundleId \(bundleId)" }
    }

    /// The credentials.
    public let credentials: Credentials
    private let signer: ES256BearerSigner

    /// A signer with the `.p8` key in `privateKeyPEM` (PKCS#8 or SEC1 PEM). Throws ``AppStoreConfigurationError`` for a
    /// key that is not P-256 PEM or an empty id.
    public init(credentials: Credentials, privateKeyPEM: String) throws(AppStoreConfigurationError) {
        guard !credentials.keyId.isEmpty, !credentials.issuerId.isEmpty, !credentials.bundleId.isEmpty else {
            throw AppStoreConfigurationError("the In-App Purchase key's id, the issuer id and the bundle id must all be set")
        }
        guard let signer = ES256BearerSigner(keyId: credentials.keyId, pem: privateKeyPEM, type: "JWT") else {
            throw AppStoreConfigurationError("the In-App Purchase key is not a P-256 private key in PEM (the .p8 file)")
        }
        self.signer = signer
        self.credentials = credentials
    }

    /// A token valid from `now` for `lifetime` (at most 60 minutes).
    public func token(now: Date, lifetime: TimeInterval) throws(AppStoreConfigurationError) -> String {
        guard
            let claims = BearerClaims(
                iss: credentials.issuerId, issuedAt: now, lifetime: lifetime, maximumLifetime: Self.maximumLifetime, aud: Self.audience,
                bid: credentials.bundleId)
        else { throw AppStoreConfigurationError("a token lives more than 0 s and at most 60 minutes, from a time it can carry") }
        return try compactJWS(claims)
    }

    /// A compact JWS of `claims` signed with the In-App Purchase key, as Apple's "Generating JWS to sign App Store
    /// requests" specifies: header `{"alg":"ES256","kid":keyId,"typ":"JWT"}`, and the claims as given (which carry
    /// `iss`, `iat`, `aud`, `bid` and `nonce` themselves: see ``AppStoreOfferClaims``).
    public func compactJWS(_ claims: some Encodable) throws(AppStoreConfigurationError) -> String {
        guard let jws = signer.sign(claims) else { throw AppStoreConfigurationError("the In-App Purchase key could not sign") }
        return jws
    }
}

/// The claims of an offer signature (StoreKit's `Product.PurchaseOption.promotionalOffer(_:compactJWS:)` and
/// `.introductoryOfferEligibility(compactJWS:)`): no `exp`; a one-time `nonce` (a lowercase UUID); `aud`
/// `promotional-offer` with `offerIdentifier`, or `introductory-offer-eligibility` with `allowIntroductoryOffer`.
public struct AppStoreOfferClaims: Codable, Sendable, Hashable {
    /// `promotional-offer`.
    public static let promotionalAudience = "promotional-offer"
    /// `introductory-offer-eligibility`.
    public static let introductoryAudience = "introductory-offer-eligibility"

    /// The issuer id.
    public var iss: String
    /// When signed, in seconds since 1970.
    public var iat: Int64
    /// Which request this signs.
    public var aud: String
    /// The app's bundle id.
    public var bid: String
    /// A one-time UUID, lowercase.
    public var nonce: String
    /// The product.
    public var productId: String
    /// The promotional offer's id (promotional offers).
    public var offerIdentifier: String?
    /// Whether the customer may have the introductory offer (introductory offer eligibility).
    public var allowIntroductoryOffer: Bool?
    /// A transaction of the customer (required for eligibility, optional for a promotional offer).
    public var transactionId: String?

    /// Claims of a promotional offer for `productId`.
    public static func promotional(
        productId: String, offerIdentifier: String, transactionId: String?, credentials: AppStoreServerAPIToken.Credentials, now: Date,
        nonce: UUID = UUID()
    ) -> AppStoreOfferClaims {
        var claims = AppStoreOfferClaims(aud: promotionalAudience, productId: productId, credentials: credentials, now: now, nonce: nonce)
        claims.offerIdentifier = offerIdentifier
        claims.transactionId = transactionId
        return claims
    }

    /// Claims saying whether the customer of `transactionId` may have `productId`'s introductory offer.
    public static func introductoryEligibility(
        productId: String, allow: Bool, transactionId: String, credentials: AppStoreServerAPIToken.Credentials, now: Date,
        nonce: UUID = UUID()
    ) -> AppStoreOfferClaims {
        var claims = AppStoreOfferClaims(aud: introductoryAudience, productId: productId, credentials: credentials, now: now, nonce: nonce)
        claims.allowIntroductoryOffer = allow
        claims.transactionId = transactionId
        return claims
    }

    /// The claims every offer signature has: `credentials`' issuer and app, signed at `now` with `nonce`, for `aud`.
    private init(aud: String, productId: String, credentials: AppStoreServerAPIToken.Credentials, now: Date, nonce: UUID) {
        iss = credentials.issuerId
        iat = ES256BearerSigner.numericDate(now) ?? 0
        self.aud = aud
        bid = credentials.bundleId
        self.nonce = nonce.uuidString.lowercased()
        self.productId = productId
    }
}
