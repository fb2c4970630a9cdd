import Crypto
import Foundation
import SwiftASN1
import TallyAppStore
import TallyAppleJWS
import X509

/// What to get wrong when signing, for tests of every refusal a verifier must make. Nil (the default everywhere) signs
/// as Apple does.
public enum DevSigningDefect: Sendable, Hashable {
    /// The leaf lacks the receipt-signing extension (1.2.840.113635.100.6.11.1).
    case leafWithoutAppleOID
    /// The intermediate (a new one, issued by the same root) lacks Apple's intermediate extension (1.2.840.113635.100.6.2.1).
    case intermediateWithoutAppleOID
    /// The leaf is valid only from `notBefore` to `notAfter` (expired or not yet valid at the signed date, or vice versa).
    case leafValidity(notBefore: Date, notAfter: Date)
    /// The chain is another CA's: a root the server does not trust, carried as the header's third certificate.
    case otherRoot
    /// `x5c` holds the leaf and the intermediate only.
    case twoCertificates
    /// The header's `alg` is this instead of ES256: `HS256` is an HMAC-SHA-256 keyed with the leaf's public key (the
    /// key-confusion attack), `none` has an empty signature, any other keeps an ES256 signature under the wrong name.
    case algorithm(String)
    /// The payload is changed after signing (its `quantity` ×100 when it has one, else its `signedDate` + 1 ms).
    case tamperedPayload
}

/// Compact JWS as the App Store writes them: header `{"alg":"ES256","x5c":[leaf, intermediate, root]}` (standard
/// base64 DER), base64url parts, the ES256 signature as raw r‖s.
public enum DevJWS {
    /// Signs `payload` (encoded as App Store JSON) with `chain`, getting `defect` wrong if asked.
    public static func sign(
        _ payload: some Encodable, chain: DevCertificateAuthority.SigningChain, defect: DevSigningDefect? = nil
    ) throws -> String {
        let json = try AppStoreJSON.encoder().encode(payload)
        return try sign(payloadJSON: Array(json), chain: chain, defect: defect)
    }

    /// Signs the JSON bytes `payloadJSON` with `chain`, getting `defect` wrong if asked.
    public static func sign(payloadJSON: [UInt8], chain: DevCertificateAuthority.SigningChain, defect: DevSigningDefect? = nil) throws -> String {
        var algorithm = "ES256"
        if case .algorithm(let name)? = defect { algorithm = name }
        let x5c = try chain.certificates.map { Data(try DevCertificateAuthority.der($0)).base64EncodedString() }
        let header = try JSONSerialization.data(withJSONObject: ["alg": algorithm, "x5c": x5c], options: [.sortedKeys, .withoutEscapingSlashes])
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payloadJSON)
        let signature: Data
        switch algorithm {
        case "none":
            signature = Data()
        case "HS256":
            let secret = SymmetricKey(data: try DevCertificateAuthority.der(chain.certificates[0]))
            signature = Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: secret))
        default:
            signature = try chain.key.signature(for: Data(signingInput.utf8)).rawRepresentation
        }
        var payloadPart = Base64URL.encode(payloadJSON)
        if defect == .tamperedPayload { payloadPart = Base64URL.encode(try tampered(payloadJSON)) }
        return Base64URL.encode(header) + "." + payloadPart + "." + Base64URL.encode(signature)
    }

    /// The payload part of `jws`, decoded (unverified): for tests and logs of the stand-in's own output.
    public static func payloadJSON(of jws: String) -> Data? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return Base64URL.decode(parts[1])
    }

    /// base64url without padding (TallyAppleJWS's ``Base64URL``), for callers that do not import TallyAppleJWS.
    public static func base64URL(_ data: Data) -> String { Base64URL.encode(data) }

    private static func tampered(_ payloadJSON: [UInt8]) throws -> Data {
        guard var object = try JSONSerialization.jsonObject(with: Data(payloadJSON)) as? [String: Any] else { return Data(payloadJSON) }
        if let quantity = object["quantity"] as? Int {
            object["quantity"] = quantity * 100
        } else if let signedDate = object["signedDate"] as? Int64 {
            object["signedDate"] = signedDate + 1
        }
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    }
}
