import Foundation
import SwiftASN1
import TallyAppleJWS
import X509

/// What the verifier reads of a JWS before trusting it: the header's `alg` and `x5c` (steps 1 and 2's count), and the
/// payload's `signedDate` (the validation time). Nothing read here is believed until the chain and the signature
/// verify; it only chooses which refusal to give first.
struct SignedDataHeader {
    /// The header's leaf certificate, DER.
    let leafDER: [UInt8]
    /// The header's intermediate, parsed: the only intermediate a chain may use.
    let intermediate: Certificate
    /// The payload part, base64url.
    private let payloadPart: Substring

    private struct Fields: Decodable {
        var alg: String?
        var x5c: [String]?
    }

    private struct SignedDateProbe: Decodable {
        var signedDate: Date
    }

    init(_ jws: String) throws(AppStoreVerificationError) {
        guard let parts = CompactJWS(jws), let headerBytes = Base64URL.decode(parts.header) else {
            throw AppStoreVerificationError.malformed("not a JWS (three base64url parts)")
        }
        guard let fields = try? JSONDecoder().decode(Fields.self, from: headerBytes) else {
            throw AppStoreVerificationError.malformed("the JWS header is not a JSON object with a string alg and x5c")
        }
        guard fields.alg == "ES256" else {
            throw AppStoreVerificationError(.unsupportedAlgorithm, "only ES256 is accepted")
        }
        guard let x5c = fields.x5c, x5c.count == AppStoreChainRules.chainLength else {
            throw AppStoreVerificationError.untrusted(.certificateCount, "x5c must hold exactly three certificates")
        }
        guard let leaf = Data(base64Encoded: x5c[0]), let intermediateDER = Data(base64Encoded: x5c[1]),
            let intermediate = try? Certificate(derEncoded: Array(intermediateDER)), Data(base64Encoded: x5c[2]) != nil
        else {
            throw AppStoreVerificationError.untrusted(.unreadableCertificate, "a certificate of x5c is not base64 DER")
        }
        self.leafDER = Array(leaf)
        self.intermediate = intermediate
        self.payloadPart = parts.payload
    }

    /// The payload's `signedDate` (unverified: only the instant the chain is checked at), within
    /// ``AppStoreChainRules/validationTimes``.
    func signedDate(decoder: JSONDecoder) throws(AppStoreVerificationError) -> Date {
        guard let bytes = Base64URL.decode(payloadPart), let probe = try? decoder.decode(SignedDateProbe.self, from: bytes) else {
            throw AppStoreVerificationError.malformed("the payload has no signedDate in milliseconds")
        }
        guard AppStoreChainRules.validationTimes.contains(probe.signedDate) else {
            throw AppStoreVerificationError.untrusted(.notValidAtSignedDate, "the payload's signedDate is outside the years 1 to 9999")
        }
        return probe.signedDate
    }

    /// The refusal for a chain the verifier did not accept: the first rule the header's certificates break, else no
    /// path to a configured root.
    func chainRefusal(at signedDate: Date) -> AppStoreVerificationError {
        guard let leaf = try? Certificate(derEncoded: leafDER) else {
            return .untrusted(.unreadableCertificate, "the leaf certificate is not DER")
        }
        switch AppStoreChainRules.firstBrokenRule(leaf: leaf, intermediate: intermediate, at: signedDate) {
        case .leafMissingAppleOID?:
            return .untrusted(.leafMissingAppleOID, "the leaf certificate is not an App Store receipt signer")
        case .intermediateMissingAppleOID?:
            return .untrusted(.intermediateMissingAppleOID, "the intermediate certificate is not Apple's")
        case .notValidAtSignedDate?:
            return .untrusted(.notValidAtSignedDate, "a certificate was not valid at the payload's signedDate")
        case let other?:
            return .untrusted(other, "the certificate chain is not trusted")
        case nil:
            return .untrusted(.noPathToConfiguredRoot, "the chain does not lead to a configured root")
        }
    }
}
