import Foundation

/// base64url (RFC 4648 §5) without padding, as JWS parts and JSON Web Key numbers are written. On the bytes: Foundation's
/// `replacingOccurrences` on Linux took a third of an App Store verification.
public enum Base64URL {
    /// `bytes` as base64url without padding.
    public static func encode(_ bytes: some DataProtocol) -> String {
        var text = Array(Data(bytes).base64EncodedData())
        while text.last == UInt8(ascii: "=") { text.removeLast() }
        for index in text.indices {
            switch text[index] {
            case UInt8(ascii: "+"): text[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): text[index] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of base64url `text` (padding refused, as JWS has none); nil when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> Data? {
        var bytes = Array(text.utf8)
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            case UInt8(ascii: "="): return nil
            default: break
            }
        }
        switch bytes.count % 4 {
        case 1: return nil
        case 2: bytes += [UInt8(ascii: "="), UInt8(ascii: "=")]
        case 3: bytes.append(UInt8(ascii: "="))
        default: break
        }
        return Data(base64Encoded: Data(bytes))
    }
}
