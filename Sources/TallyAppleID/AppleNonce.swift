import Crypto
import Foundation
import TallyAppleJWS

/// The nonce of a Sign in with Apple request: the app makes a random raw nonce, gives Apple its SHA-256 hex (Apple
/// signs that into the identity token's `nonce` claim) and sends the raw one to the server, which hashes it again and
/// compares (``AppleIdentityVerifier/verify(identityToken:rawNonce:now:)``). A token replayed without its raw nonce is
/// worthless. The SDK has its own copy of these rules; this one serves tests and the stand-in.
public enum AppleNonce {
    /// A new nonce: `raw`, 32 random bytes as base64url (what the app sends the server), and `hashed`, its SHA-256 hex
    /// (what the app gives Apple and the token carries).
    public static func make() -> (raw: String, hashed: String) {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let raw = Base64URL.encode(bytes)
        return (raw, hash(raw))
    }

    /// The lowercase hex SHA-256 of the raw nonce's UTF-8 bytes.
    public static func hash(_ raw: String) -> String { sha256Hex(Data(raw.utf8)) }

    /// The lowercase hex SHA-256 of `data` (a nonce's hash, a token's digest).
    static func sha256Hex(_ data: Data) -> String {
        SHA256.hash(data: data).map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
    }
}
