import Crypto
import Foundation
import TallyAppleJWS

/// An ES256 compact JWS a stand-in received, taken apart as Apple's services take the ones they check (the App Store
/// Server API's and DeviceCheck's bearer tokens, offer signatures, Sign in with Apple's client secret): three base64url
/// parts, the header and claims JSON decoded on demand, the signature (raw r‖s) checked against a P-256 key over
/// `header.claims`. What the header and claims must say, and how a refusal is answered, is each caller's. The stand-in's
/// own code, apart from the signers it checks (TallyAppleJWS), so that a fault of theirs is not repeated here: only the
/// plain base64url decoding (``Base64URL``) is shared.
struct DevReceivedJWS {
    /// The header fields the checks read.
    struct Header: Decodable {
        var alg: String?
        var kid: String?
        var typ: String?
    }

    private let headerJSON: Data
    private let claimsJSON: Data
    private let signature: Data
    /// `header.claims` as received: what the signature signs.
    private let signingInput: Data

    /// `compact` taken apart; nil when it is not three base64url parts.
    init?(_ compact: String) {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerJSON = Base64URL.decode(parts[0]), let claimsJSON = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { return nil }
        (self.headerJSON, self.claimsJSON, self.signature) = (headerJSON, claimsJSON, signature)
        signingInput = Data("\(parts[0]).\(parts[1])".utf8)
    }

    /// The token of an `Authorization: Bearer <token>` header (surrounding spaces trimmed); nil for any other header.
    static func bearerToken(_ authorization: String) -> String? {
        guard authorization.hasPrefix("Bearer ") else { return nil }
        return authorization.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
    }

    /// The header; nil when it is not a JSON object, or its `alg`, `kid` or `typ` is not a string.
    var header: Header? { try? JSONDecoder().decode(Header.self, from: headerJSON) }

    /// The claims as `Claims`; nil when they do not decode.
    func claims<Claims: Decodable>(as _: Claims.Type) -> Claims? { try? JSONDecoder().decode(Claims.self, from: claimsJSON) }

    /// Whether the signature is an ES256 signature of `header.claims` by `key`.
    func isSigned(by key: P256.Signing.PublicKey) -> Bool {
        guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
        return key.isValidSignature(ecdsa, for: signingInput)
    }
}
