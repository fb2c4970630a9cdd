import Foundation

/// base64url (RFC 4648 §5) without padding, as JWS parts and JSON Web Key numbers are written.
public enum AppleBase64URL {
    /// `bytes` as base64url without padding.
    public static func encode(_ bytes: some DataProtocol) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// The bytes of base64url `text` (padding refused, as JWS has none); nil when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> Data? {
        guard !text.utf8.contains(UInt8(ascii: "=")), text.utf8.count % 4 != 1 else { return nil }
        let standard = text.utf8.map { byte -> UInt8 in
            byte == UInt8(ascii: "-") ? UInt8(ascii: "+") : byte == UInt8(ascii: "_") ? UInt8(ascii: "/") : byte
        }
        let padding = [UInt8](repeating: UInt8(ascii: "="), count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: Data(standard + padding))
    }
}
