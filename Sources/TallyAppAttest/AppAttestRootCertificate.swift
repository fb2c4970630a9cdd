import Crypto
import Foundation
import SwiftASN1
import X509

/// Apple App Attestation Root CA, the root every App Attest credential certificate chains to: built in, so a server
/// verifies attestations with no certificate file. A public certificate (P-384, valid 2020-03-18 to 2045-03-15,
/// from www.apple.com/certificateauthority/Apple_App_Attestation_Root_CA.pem), checked by its SHA-256 fingerprint
/// whenever it is loaded (``load()``).
public enum AppAttestRootCertificate {
    /// The certificate's SHA-256 fingerprint (uppercase hex pairs joined by colons).
    public static let sha256Fingerprint = "1C:B9:82:3B:A2:8B:A6:AD:2D:33:A0:06:94:1D:E2:AE:4F:51:3E:F1:D4:E8:31:B9:F7:E0:FA:7B:62:42:C9:32"

    /// The certificate's DER bytes, base64.
    public static let base64DER =
        "MIICITCCAaegAwIBAgIQC/O+DvHN0uD7jG5yH2IXmDAKBggqhkjOPQQDAzBSMSYwJAYDVQQDDB1BcHBsZSBBcHAgQXR0ZXN0YXRpb24gUm9vdCBD"
        + "QTETMBEGA1UECgwKQXBwbGUgSW5jLjETMBEGA1UECAwKQ2FsaWZvcm5pYTAeFw0yMDAzMTgxODMyNTNaFw00NTAzMTUwMDAwMDBaMFIxJjAkBgNV"
        + "BAMMHUFwcGxlIEFwcCBBdHRlc3RhdGlvbiBSb290IENBMRMwEQYDVQQKDApBcHBsZSBJbmMuMRMwEQYDVQQIDApDYWxpZm9ybmlhMHYwEAYHKoZI"
        + "zj0CAQYFK4EEACIDYgAERTHhmLW07ATaFQIEVwTtT4dyctdhNbJhFs/Ii2FdCgAHGbpphY3+d8qjuDngIN3WVhQUBHAoMeQ/cLiP1sOUtgjqK9au"
        + "Yen1mMEvRq9Sk3Jm5X8U62H+xTD3FE9TgS41o0IwQDAPBgNVHRMBAf8EBTADAQH/MB0GA1UdDgQWBBSskRBTM72+aEH/pwyp5frq5eWKoTAOBgNV"
        + "HQ8BAf8EBAMCAQYwCgYIKoZIzj0EAwMDaAAwZQIwQgFGnByvsiVbpTKwSga0kP0e8EeDS4+sQmTvb7vn53O5+FRXgeLhpJ06ysC5PrOyAjEAp5U4"
        + "xDgEgllF7En3VcE3iexZZtKeYnpqtijVoyFraWVIyd/dganmrduC1bmTBGwD"

    /// The certificate, after checking that its bytes have ``sha256Fingerprint``.
    public static func load() throws(AppAttestConfigurationError) -> Certificate {
        guard let der = Data(base64Encoded: base64DER) else {
            throw AppAttestConfigurationError("the built-in Apple App Attestation Root CA is not base64")
        }
        guard fingerprint(Array(der)) == sha256Fingerprint else {
            throw AppAttestConfigurationError("the built-in Apple App Attestation Root CA does not have its SHA-256 fingerprint")
        }
        do {
            return try Certificate(derEncoded: Array(der))
        } catch {
            throw AppAttestConfigurationError("the built-in Apple App Attestation Root CA is not a certificate")
        }
    }

    /// The SHA-256 fingerprint of DER bytes, as uppercase hex pairs joined by colons.
    public static func fingerprint(_ der: [UInt8]) -> String {
        SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined(separator: ":")
    }
}

/// A configuration the App Attest verifier cannot use (a root that is not a certificate, an empty team or bundle id).
public struct AppAttestConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public var description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
