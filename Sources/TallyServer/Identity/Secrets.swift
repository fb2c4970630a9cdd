import Crypto
import Foundation

/// Random secrets and one-way hashes.
enum Secrets {
    /// `bytes` cryptographically random bytes, base64url without padding.
    static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return base64URL(Data(bytes))
    }

    /// Hex SHA-256: for high-entropy secrets (device secrets, refresh tokens) that are stored only hashed.
    static func sha256(_ value: String) -> String {
        hex(SHA256.hash(data: Data(value.utf8)))
    }

    /// Hex HMAC-SHA-256 under `key`: for low-entropy values such as IP addresses.
    static func hmac(_ value: String, key: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data(value.utf8), using: SymmetricKey(data: Data(key.utf8)))
        return hex(mac)
    }

    /// Lower-case hexadecimal of a digest.
    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Compares two secrets in time independent of where they differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = SHA256.hash(data: Data(a.utf8))
        let y = SHA256.hash(data: Data(b.utf8))
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The bytes of base64url text (padding optional), or `nil`.
    static func base64URLDecoded(_ text: String) -> [UInt8]? {
        guard text.utf8.allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "=") }) else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }

    /// Base64url without padding.
    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
