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

    /// Hex HMAC-SHA-256 keyed by `key` over a fixed label: what the database keeps of the signing and admin keys so
    /// that the instances sharing it can tell whether their keys agree (``KeyAgreement``). It shows nothing of the
    /// key, and unlike a plain hash of it (such as a token's key id), it matches no hash computed elsewhere.
    static func fingerprint(ofKey key: some Sequence<UInt8>) -> String {
        hex(HMAC<SHA256>.authenticationCode(for: Data("tally.key-fingerprint.v1".utf8), using: SymmetricKey(data: Data(key))))
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

    /// The bytes of base64url text without padding, or `nil` (any character outside the base64url alphabet, or a
    /// length no encoding has).
    static func base64URLDecoded(_ text: String) -> [UInt8]? {
        let count = text.utf8.count
        guard count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return bytes
    }

    private static let base64URLAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Base64url without padding. (Foundation's encoder and three `replacingOccurrences` cost a range query's
    /// cursor a twentieth of its request.)
    static func base64URL<Bytes: Collection<UInt8>>(_ data: Bytes) -> String {
        let alphabet = base64URLAlphabet
        var text: [UInt8] = []
        text.reserveCapacity((data.count * 4 + 2) / 3)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in data {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                text.append(alphabet[Int(buffer >> UInt32(bits) & 63)])
            }
        }
        if bits > 0 { text.append(alphabet[Int(buffer << UInt32(6 - bits) & 63)]) }
        return String(decoding: text, as: UTF8.self)
    }
}
