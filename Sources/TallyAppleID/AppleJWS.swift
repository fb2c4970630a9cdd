import Crypto
import CryptoExtras
import Foundation
import TallyAppleJWS

/// A compact JWS as Apple signs identity tokens and account notifications, split but not yet believed: the header's
/// `alg` and `kid` choose the key; nothing of the payload is read before the signature verifies.
struct AppleJWS {
    private struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    /// The header's `kid`.
    let kid: String
    /// The payload's JSON bytes (unverified until ``verify(with:)`` passed).
    let payload: Data
    private let signingInput: Data
    private let signature: Data

    /// Splits `token`; refuses what is not a compact JWS (`malformed`), an `alg` other than `RS256`
    /// (`unsupported_algorithm`: `none` and `HS256` among them) and a header without `kid` (`malformed`).
    init(_ token: String) throws(AppleIDVerificationError) {
        guard let parts = CompactJWS(token), let headerBytes = Base64URL.decode(parts.header),
            let payload = Base64URL.decode(parts.payload), let signature = Base64URL.decode(parts.signature)
        else { throw AppleIDVerificationError.malformed("not a JWS (three base64url parts)") }
        guard let header = try? JSONDecoder().decode(Header.self, from: headerBytes) else {
            throw AppleIDVerificationError.malformed("the JWS header is not a JSON object with string alg and kid")
        }
        guard header.alg == "RS256" else { throw AppleIDVerificationError(.unsupportedAlgorithm, "only RS256 is accepted") }
        guard let kid = header.kid, !kid.isEmpty else { throw AppleIDVerificationError.malformed("the JWS header names no kid") }
        self.kid = kid
        self.payload = payload
        self.signature = signature
        signingInput = parts.signingInput
    }

    /// The SHA-256 hex of what the signature covers (the header and payload exactly as sent): one token's name,
    /// however its signature part is spelt (base64url leaves a signature's last bits free, so the whole text is not).
    var digest: String { AppleNonce.sha256Hex(signingInput) }

    /// Checks the RS256 signature (RSASSA-PKCS1-v1_5 over SHA-256) with `key` (`invalid_signature`).
    func verify(with key: _RSA.Signing.PublicKey) throws(AppleIDVerificationError) {
        let valid = key.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5)
        guard valid else { throw AppleIDVerificationError(.invalidSignature, "the signature does not verify with Apple's key") }
    }

    /// The payload decoded as `Claims` (`malformed` when it is not).
    func claims<Claims: Decodable>(_: Claims.Type, _ what: String) throws(AppleIDVerificationError) -> Claims {
        do {
            return try JSONDecoder().decode(Claims.self, from: payload)
        } catch {
            throw AppleIDVerificationError.malformed("the \(what) lacks a claim or has one of the wrong type")
        }
    }
}

/// `aud`: one string, or an array of them.
struct AppleAudienceClaim: Decodable {
    let values: [String]

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let one = try? container.decode(String.self) {
            values = [one]
        } else {
            values = try container.decode([String].self)
        }
    }
}

/// A boolean claim Apple writes either as JSON `true`/`false` or as the string `"true"`/`"false"`.
struct AppleBooleanClaim: Decodable {
    let value: Bool

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let bool = try? container.decode(Bool.self) {
            value = bool
            return
        }
        switch try container.decode(String.self) {
        case "true": value = true
        case "false": value = false
        default: throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a boolean")
        }
    }
}
