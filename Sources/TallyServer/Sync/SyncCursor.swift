import Crypto
import Foundation
import Synchronization
import TallyAPI

/// Seals the cursors the sync API hands out (pull cursors, range-query cursors), so that a client can only give
/// back one this server issued to it: a cursor is base64url of its payload followed by the first 16 bytes of an
/// HMAC-SHA-256 of (what it is for, the user, the payload) under the first of the token signing keys
/// (``SigningKeys``). It opens under any of them, so a key rotation keeps the cursors issued before it, until
/// the old key is removed. Installed before the server serves (``TallyServices/loadSecrets(signing:)``).
final class CursorKeys: Sendable {
    private let keys = Mutex<SigningKeys?>(nil)

    /// Bytes of the tag at the end of a cursor.
    static let tagBytes = 16

    /// An instance without keys: sealing answers 503 until ``install(_:)``.
    init() {}

    /// Seals with `keys.current` and opens with every one of `keys`.
    func install(_ keys: SigningKeys) {
        self.keys.withLock { $0 = keys }
    }

    /// The cursor of `payload`, for `purpose` (a kind of cursor, and what it pages) and `userId`.
    func seal(_ payload: [UInt8], purpose: String, userId: String) throws -> String {
        guard let key = keys.withLock({ $0?.current }) else { throw APIError(.unavailable, "The server is starting.") }
        return Secrets.base64URL(payload + Self.tag(payload, purpose: purpose, userId: userId, secret: key.secret))
    }

    /// The payload of a cursor sealed for `purpose` and `userId` under one of the keys, or nil (anything else:
    /// malformed, longer than `maxLength` characters, edited, another user's or another purpose's).
    func open(_ cursor: String, purpose: String, userId: String, maxLength: Int) -> [UInt8]? {
        guard cursor.utf8.count <= maxLength, let bytes = Secrets.base64URLDecoded(cursor), bytes.count > Self.tagBytes,
            let keys = keys.withLock({ $0 })
        else { return nil }
        let payload = Array(bytes.dropLast(Self.tagBytes))
        let tag = bytes.suffix(Self.tagBytes)
        let matches = keys.keys.reduce(false) { found, key in
            let expected = Self.tag(payload, purpose: purpose, userId: userId, secret: key.secret)
            return found || zip(expected, tag).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
        }
        return matches ? payload : nil
    }

    private static func tag(_ payload: [UInt8], purpose: String, userId: String, secret: [UInt8]) -> [UInt8] {
        var message = Array("tally-cursor\u{0}\(purpose)\u{0}\(userId)\u{0}".utf8)
        message += payload
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret)).prefix(tagBytes))
    }
}

/// The pull cursor a client passes back: the user's change version it has everything up to, sealed for the user
/// it was issued to (``CursorKeys``). Opaque on the wire; another user's cursor, an edited one or anything this
/// server did not issue does not open.
enum SyncCursor {
    private static let purpose = "pull"

    /// The cursor of `version` for `userId`.
    static func encode(version: Int64, userId: String, keys: CursorKeys) throws -> String {
        try keys.seal(Array(String(version).utf8), purpose: purpose, userId: userId)
    }

    /// The version of a cursor issued to `userId`, or `nil` (malformed, edited, or another user's).
    static func decode(_ cursor: String, userId: String, keys: CursorKeys) -> Int64? {
        guard let payload = keys.open(cursor, purpose: purpose, userId: userId, maxLength: 64) else { return nil }
        let digits = String(decoding: payload, as: UTF8.self)
        // Only the digits it was issued with: the tag covers them, and no other spelling of the number.
        guard let version = Int64(digits), version >= 0, String(version) == digits else { return nil }
        return version
    }
}
