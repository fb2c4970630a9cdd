import Foundation

/// The cap on an account's live sessions, written once for both stores: opening a session (sign-in, a guest's
/// device, Sign in with Apple, a merge's sign-in) revokes, in the same transaction, the account's oldest live
/// sessions beyond `sessionsPerUser`, the new one counted and never among them.
///
/// Both stores select the others to revoke in SQL — `ORDER BY` ``newestFirst`` `OFFSET` ``othersKept(limit:)``
/// over the account's live sessions other than the new one — so the one statement of PostgreSQL (whose snapshot
/// does not see the session it inserts) and SQLite's read after its insert revoke the same ones. ``revoked(_:limit:)``
/// is the same rule over sessions in memory, for tests.
public enum SessionCap {
    /// How many of the account's other live sessions stay live when it opens one: the newest `limit - 1`, so that
    /// with the new one it has `limit`; a limit below 1 leaves the new one alone.
    public static func othersKept(limit: Int) -> Int { max(limit, 1) - 1 }

    /// The order of the account's live sessions, newest first, as SQL over `sessions` (`created_at`, then `id`
    /// breaking ties the same way on both stores: no store-specific row order).
    public static let newestFirst = "created_at DESC, id DESC"

    /// A live session as the cap orders it.
    public struct LiveSession: Sendable, Hashable {
        /// Its id.
        public var id: String
        /// When it was opened.
        public var createdAt: Date

        /// A live session.
        public init(id: String, createdAt: Date) {
            self.id = id
            self.createdAt = createdAt
        }
    }

    /// The ids of `others` (the account's live sessions but the new one) that opening a session revokes: all but
    /// the newest ``othersKept(limit:)`` in the order of ``newestFirst`` (creation time to the millisecond stored).
    public static func revoked(_ others: [LiveSession], limit: Int) -> [String] {
        let ordered = others.sorted { ($0.createdAt.millis, $0.id) > ($1.createdAt.millis, $1.id) }
        return ordered.dropFirst(othersKept(limit: limit)).map(\.id)
    }
}
