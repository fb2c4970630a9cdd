import Crypto
import Foundation

/// The HS256 keys access tokens are signed and verified with: the first signs, every one verifies, each
/// known by a key id (`kid`) derived from the key.
///
/// They are never kept in the database, so a dump of it (or a copy of `tally.sqlite`) does not let anyone
/// mint tokens. They come from `TALLY_SIGNING_KEY` — base64 keys of at least 32 random bytes, separated
/// by commas, the signing key first — or, when that is unset, from `<data-dir>/signing-keys` (mode 0600),
/// generated on first start. To rotate: append the new key to every instance's list and restart them;
/// then move it to the front (it signs from then on, while tokens signed with the old one stay valid);
/// remove the old key once its last token expired (the access-token lifetime, 15 minutes).
public struct SigningKeys: Sendable, Equatable {
    /// One key.
    public struct Key: Sendable, Equatable {
        /// The key id in the tokens' `kid` header.
        public let id: String
        /// The secret bytes.
        public let secret: [UInt8]
    }

    /// The keys, the signing key first.
    public let keys: [Key]

    /// The key that signs new tokens.
    public var current: Key { keys[0] }

    /// Parses a comma- or newline-separated list of base64 (or base64url) keys of at least 32 bytes each.
    public init(parsing text: String) throws {
        let fields = text.split(whereSeparator: { $0 == "," || $0.isNewline }).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !fields.isEmpty else { throw ConfigurationError("no signing key given") }
        keys = try fields.map { field in
            guard let bytes = Secrets.base64URLDecoded(field) ?? Data(base64Encoded: field).map(Array.init), bytes.count >= 32 else {
                throw ConfigurationError(
                    "a signing key must be base64 of at least 32 random bytes (e.g. the output of `openssl rand -base64 32`)")
            }
            return Key(id: Self.keyId(bytes), secret: bytes)
        }
        guard Set(keys.map(\.id)).count == keys.count else { throw ConfigurationError("a signing key is listed twice") }
    }

    /// The keys of `TALLY_SIGNING_KEY` (`configured`) when set, else of `<dataDirectory>/signing-keys`,
    /// created with one new key (mode 0600) if missing; `generated` tells the caller to log where it is.
    public static func resolve(configured: String?, dataDirectory: String) throws -> (keys: SigningKeys, generated: Bool) {
        if let configured, !configured.isEmpty { return (try SigningKeys(parsing: configured), false) }
        let path = (dataDirectory as NSString).appendingPathComponent("signing-keys")
        if let existing = try? String(contentsOfFile: path, encoding: .utf8), !existing.isEmpty {
            return (try SigningKeys(parsing: existing), false)
        }
        try DataDirectory.prepare(dataDirectory)
        let line = Secrets.random(bytes: 32) + "\n"
        // Several processes may start at once on one data directory: link() publishes the file whole, and
        // only once; whoever loses reads the winner's.
        let temporary = path + ".\(UUID().uuidString)"
        try DataDirectory.writePrivate(Data(line.utf8), to: temporary)
        defer { unlink(temporary) }
        if link(temporary, path) == 0 { return (try SigningKeys(parsing: line), true) }
        guard errno == EEXIST, let existing = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("cannot write \(path)")
        }
        return (try SigningKeys(parsing: existing), false)
    }

    /// The key with id `id`, if it is one of these.
    public func key(id: String) -> Key? { keys.first { $0.id == id } }

    /// A key id: 12 base64url characters of the key's SHA-256 (it identifies, it does not reveal).
    static func keyId(_ secret: [UInt8]) -> String {
        String(Secrets.base64URL(Data(SHA256.hash(data: Data("tally-kid:".utf8) + secret))).prefix(12))
    }
}
