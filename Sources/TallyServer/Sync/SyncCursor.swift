import Foundation

/// The pull cursor a client passes back: the user's change version it has everything up to, bound to the
/// user it was issued to. Opaque on the wire (base64url of `<version>.<user tag>`); another user's cursor,
/// or anything this server did not issue, does not decode.
enum SyncCursor {
    /// The cursor of `version` for `userId`.
    static func encode(version: Int64, userId: String) -> String {
        Secrets.base64URL(Data("\(version).\(tag(userId))".utf8))
    }

    /// The version of a cursor issued to `userId`, or `nil` (malformed, or another user's).
    static func decode(_ cursor: String, userId: String) -> Int64? {
        guard cursor.utf8.count <= 64, let bytes = Secrets.base64URLDecoded(cursor) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1] == tag(userId), let version = Int64(parts[0]), version >= 0 else { return nil }
        return version
    }

    /// A short digest of the user id: enough that a cursor of one user is refused for another.
    private static func tag(_ userId: String) -> Substring { Secrets.sha256(userId).prefix(12) }
}
