import Foundation
import SwiftASN1
import X509

/// Apple's rules for the certificate chain of App Store signed data, as pure functions of certificates and a date.
///
/// A chain is the header's leaf, the header's intermediate and a configured root — exactly three; the `x5c` header's
/// own third certificate is only ever a candidate the chain builder may ignore, never an anchor. The leaf carries the
/// receipt-signing extension (``leafOID``), the intermediate Apple's WWDR intermediate extension (``intermediateOID``);
/// both are looked for by OID (Apple writes the value DER NULL, `05 00`, which is not required). ``ChainPolicy`` applies
/// them inside swift-certificates' verifier; ``firstBrokenRule(leaf:intermediate:at:)`` names the rule a refused
/// chain broke.
public enum AppStoreChainRules {
    /// Certificates in a chain: leaf, intermediate, root.
    public static let chainLength = 3
    /// The App Store receipt-signing extension a leaf must carry: 1.2.840.113635.100.6.11.1.
    public static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    /// Apple's intermediate-certificate extension an intermediate must carry: 1.2.840.113635.100.6.2.1.
    public static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    /// The instants a chain can be checked at: the years 1 to 9999. A payload's `signedDate` outside them is refused
    /// before any certificate is looked at — swift-certificates 1.21.1 traps (`try!`) on a validation time it cannot
    /// write as a GeneralizedTime (years 0 to 9999), so an unsigned token with `"signedDate": -1e15` would otherwise
    /// stop the process.
    public static let validationTimes = Date(timeIntervalSince1970: -62_135_596_800)...Date(timeIntervalSince1970: 253_402_300_799)

    /// Whether `certificate` carries the receipt-signing extension (a leaf's rule).
    public static func isReceiptSigner(_ certificate: Certificate) -> Bool {
        certificate.extensions[oid: leafOID] != nil
    }

    /// Whether `certificate` carries Apple's intermediate extension (an intermediate's rule).
    public static func isAppleIntermediate(_ certificate: Certificate) -> Bool {
        certificate.extensions[oid: intermediateOID] != nil
    }

    /// Whether `date` lies within `certificate`'s validity, both ends included (RFC 5280 4.1.2.5).
    public static func isValid(_ certificate: Certificate, at date: Date) -> Bool {
        certificate.notValidBefore <= date && date <= certificate.notValidAfter
    }

    /// The first rule a header's leaf and intermediate break that the two certificates show by themselves, checked in
    /// this order: the leaf's extension, the intermediate's extension, both valid at `date`. Nil when they break none
    /// (a refused chain then has no path to a configured root).
    public static func firstBrokenRule(
        leaf: Certificate, intermediate: Certificate, at date: Date
    ) -> AppStoreVerificationError.ChainReason? {
        if !isReceiptSigner(leaf) { return .leafMissingAppleOID }
        if !isAppleIntermediate(intermediate) { return .intermediateMissingAppleOID }
        if !isValid(leaf, at: date) || !isValid(intermediate, at: date) { return .notValidAtSignedDate }
        return nil
    }

    /// The rules as a swift-certificates policy, for a header whose second certificate is `intermediate`: a candidate
    /// chain meets it when it is exactly leaf → `intermediate` → root (the verifier ends every chain at a configured
    /// root) and both carry Apple's extensions. Validity at the signed date is RFC 5280's policy, which jwt-kit adds
    /// with the validation time.
    public struct ChainPolicy: VerifierPolicy {
        /// The header's second certificate: the only intermediate a chain may use.
        public let intermediate: Certificate

        /// The policy for a header whose intermediate is `intermediate`.
        public init(intermediate: Certificate) { self.intermediate = intermediate }

        /// Apple's two extensions: enforced here, so a certificate that marks one critical is not refused for it.
        public var verifyingCriticalExtensions: [ASN1ObjectIdentifier] { [AppStoreChainRules.leafOID, AppStoreChainRules.intermediateOID] }

        /// Three certificates, the header's intermediate second, Apple's extensions on the leaf and the intermediate.
        public func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
            guard chain.count == AppStoreChainRules.chainLength else {
                return .failsToMeetPolicy(reason: "an App Store chain has exactly three certificates")
            }
            guard chain[1] == intermediate else {
                return .failsToMeetPolicy(reason: "the chain's intermediate is not the header's second certificate")
            }
            guard AppStoreChainRules.isReceiptSigner(chain[0]) else {
                return .failsToMeetPolicy(reason: "the leaf lacks 1.2.840.113635.100.6.11.1")
            }
            guard AppStoreChainRules.isAppleIntermediate(chain[1]) else {
                return .failsToMeetPolicy(reason: "the intermediate lacks 1.2.840.113635.100.6.2.1")
            }
            return .meetsPolicy
        }
    }
}
