import CryptoExtras
import Foundation
import TallyAppleID
import TallyAppleJWS

/// The stand-in's Sign in with Apple signing keys: RSA-2048, each named by a `kid`, the last one signing. Served as a
/// key set like `https://appleid.apple.com/auth/keys` (``jwks``) and kept in the `--certs` directory
/// (``File/keys``, owner-only), so a restart signs with the same keys and a server's cached set stays right.
public struct DevAppleIDKeys: Sendable {
    /// One key.
    public struct Key: Sendable {
        /// Its id, which tokens' headers name.
        public let kid: String
        /// The private key.
        public let privateKey: _RSA.Signing.PrivateKey

        /// A key named `kid`.
        public init(kid: String, privateKey: _RSA.Signing.PrivateKey) {
            self.kid = kid
            self.privateKey = privateKey
        }

        /// A new RSA-2048 key with a random `kid` (10 base64url characters, like Apple's).
        public static func generate() throws -> Key {
            var generator = SystemRandomNumberGenerator()
            let kid = Base64URL.encode((0..<8).map { _ in UInt8.random(in: .min ... .max, using: &generator) }).prefix(10)
            return Key(kid: String(kid), privateKey: try _RSA.Signing.PrivateKey(keySize: .bits2048))
        }

        /// The public half as a JSON Web Key.
        public var jwk: AppleJSONWebKey {
            let primitives = try? privateKey.publicKey.getKeyPrimitives()
            return AppleJSONWebKey(
                kid: kid, n: Base64URL.encode(primitives?.modulus ?? Data()), e: Base64URL.encode(primitives?.publicExponent ?? Data()))
        }
    }

    /// The files of the directory.
    public enum File {
        /// The keys, JSON `{"keys":[{"kid","pem"}]}` (the last signs), mode 0600.
        public static let keys = "apple-id-keys.json"
    }

    /// The keys, oldest first; the last one signs.
    public private(set) var keys: [Key]

    /// A set of `keys` (at least one; the last signs).
    public init(keys: [Key]) {
        precondition(!keys.isEmpty, "a key set signs with its last key: it needs one")
        self.keys = keys
    }

    /// A set of one new key.
    public static func generate() throws -> DevAppleIDKeys { DevAppleIDKeys(keys: [try Key.generate()]) }

    /// The set kept in `directory`, or a new one written there.
    public static func loadOrGenerate(directory: URL) throws -> DevAppleIDKeys {
        let url = directory.appendingPathComponent(File.keys)
        guard FileManager.default.fileExists(atPath: url.path) else {
            let keys = try generate()
            try keys.write(to: directory)
            return keys
        }
        let stored = try JSONDecoder().decode(Stored.self, from: Data(contentsOf: url))
        guard !stored.keys.isEmpty else { throw DevAppStore.Failure(code: "bad_key_file", message: "\(url.path) holds no key", status: 500) }
        return DevAppleIDKeys(keys: try stored.keys.map { Key(kid: $0.kid, privateKey: try _RSA.Signing.PrivateKey(pemRepresentation: $0.pem)) })
    }

    private struct Stored: Codable {
        struct Entry: Codable {
            var kid: String
            var pem: String
        }

        var keys: [Entry]
    }

    /// Writes the keys to `directory` (created if needed), readable by the owner only.
    public func write(to directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(File.keys)
        let stored = Stored(keys: keys.map { Stored.Entry(kid: $0.kid, pem: $0.privateKey.pemRepresentation) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(stored).write(to: url, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }

    /// The key that signs: the newest.
    public var signing: Key { keys[keys.count - 1] }

    /// The key named `kid`, if held.
    public func key(_ kid: String) -> Key? { keys.first { $0.kid == kid } }

    /// Every key's public half, as `GET /auth/keys` answers (newest first, as a rotation puts it).
    public var jwks: AppleJSONWebKeySet { AppleJSONWebKeySet(keys: keys.reversed().map(\.jwk)) }

    /// Adds `key` as the signing key; with `dropOld`, the others are removed (tokens they signed stop verifying once a
    /// server fetches the set again).
    public mutating func rotate(to key: Key, dropOld: Bool) {
        if dropOld { keys.removeAll() }
        keys.append(key)
    }
}
