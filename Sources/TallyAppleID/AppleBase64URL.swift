import Foundation
import TallyAppleJWS

/// base64url (RFC 4648 §5) without padding, as JWS parts and JSON Web Key numbers are written: TallyAppleJWS's
/// ``Base64URL``, for the modules that use Sign in with Apple's types without importing TallyAppleJWS.
public enum AppleBase64URL {
    /// `bytes` as base64url without padding.
    public static func encode(_ bytes: some DataProtocol) -> String { Base64URL.encode(bytes) }

    /// The bytes of base64url `text` (padding refused, as JWS has none); nil when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> Data? { Base64URL.decode(text) }
}
