import Crypto
import Foundation
import SwiftASN1
import X509

/// Apple Root CA - G3, the root App Store signed data chains to: built in, so a server verifies Apple's payloads with no
/// certificate file. A public certificate (CN=Apple Root CA - G3, valid 2014-04-30 to 2039-04-30), checked by its
/// SHA-256 fingerprint whenever it is loaded (``load()``).
public enum AppleRootCertificate {
    /// The certificate's SHA-256 fingerprint, as Apple publishes it.
    public static let sha256Fingerprint = "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79"

    /// The certificate's DER bytes, base64.
    public static let base64DER =
        "MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9u"
        + "IEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBS"
        + "b290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9yaXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49"
        + "AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtfTjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517"
        + "IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySrMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gA"
        + "MGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM"
        + "6BgD56KyKA=="

    /// The certificate, after checking that its bytes have ``sha256Fingerprint``.
    public static func load() throws(AppStoreConfigurationError) -> Certificate {
        guard let der = Data(base64Encoded: base64DER) else {
            throw AppStoreConfigurationError("the built-in Apple Root CA - G3 is not base64")
        }
        guard fingerprint(Array(der)) == sha256Fingerprint else {
            throw AppStoreConfigurationError("the built-in Apple Root CA - G3 does not have its published SHA-256 fingerprint")
        }
        do {
            return try Certificate(derEncoded: Array(der))
        } catch {
            throw AppStoreConfigurationError("the built-in Apple Root CA - G3 is not a certificate")
        }
    }

    /// The SHA-256 fingerprint of DER bytes, as uppercase hex pairs joined by colons.
    public static func fingerprint(_ der: [UInt8]) -> String {
        SHA256.hash(data: der).map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }.joined(separator: ":")
    }
}
