import Synchronization

/// The range-query pages this process read last, per user: a month view opened again, by the same device or the
/// user's others, is answered from memory instead of a database read (on SQLite the largest items of a range
/// query's profile were GRDB's reader pool, the statement and the rows).
///
/// Two ways to stay exact, one per store:
/// - **Forgotten on commit** (SQLite, one process owns the file): every transaction that writes a user's documents
///   forgets their pages as it commits (``forget(_:)``), and a read stores its page only if no commit forgot
///   anything since the read began (`readAt:` ``epoch``). Pages are stored and looked up with stamp 0.
/// - **Stamped with the user's version** (PostgreSQL, other processes write too): every document change takes the
///   next value of the user's change counter, so a page read after the counter was `v` is the current page for as
///   long as the counter is still `v`; a request reads the counter (one batched statement) and asks for that stamp.
public final class DocumentPageCache: Sendable {
    private struct UserPages {
        var stamp: Int64
        var pages: [DocumentRangeQuery: RangePage] = [:]
    }

    private struct State {
        var epoch: UInt64 = 0
        var users: [String: UserPages] = [:]
        var bytes = 0
    }

    private let state = Mutex(State())
    /// Bytes of document data (plus a fixed overhead per record) kept at most; the cache starts over when full.
    public let byteLimit: Int
    /// Pages kept per user at most; the user's pages start over when full.
    public static let pagesPerUser = 16

    /// A cache of at most `byteLimit` bytes.
    public init(byteLimit: Int = 64 << 20) {
        self.byteLimit = byteLimit
    }

    /// The page cached for the query at `stamp`, if any.
    public func page(userId: String, query: DocumentRangeQuery, stamp: Int64 = 0) -> RangePage? {
        state.withLock { state in
            guard let user = state.users[userId], user.stamp == stamp else { return nil }
            return user.pages[query]
        }
    }

    /// Taken before a read whose page is stored with `readAt:`.
    public var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps the page a read found at `stamp` (replacing the user's pages of another stamp), unless `readAt` is
    /// given and a commit forgot something since then.
    public func store(_ page: RangePage, userId: String, query: DocumentRangeQuery, stamp: Int64 = 0, readAt epoch: UInt64?) {
        let size = Self.size(page)
        guard size <= byteLimit / 16 else { return }
        state.withLock { state in
            if let epoch, state.epoch != epoch { return }
            if state.bytes + size > byteLimit {
                state.users.removeAll(keepingCapacity: true)
                state.bytes = 0
            }
            var user = state.users[userId] ?? UserPages(stamp: stamp)
            if user.stamp != stamp || user.pages.count >= Self.pagesPerUser {
                state.bytes -= Self.size(user)
                user = UserPages(stamp: stamp)
            }
            if let replaced = user.pages.updateValue(page, forKey: query) { state.bytes -= Self.size(replaced) }
            state.bytes += size
            state.users[userId] = user
        }
    }

    /// Forgets the pages of users whose documents a committed transaction wrote.
    public func forget(_ userIds: Set<String>) {
        state.withLock { state in
            state.epoch &+= 1
            for userId in userIds {
                if let user = state.users.removeValue(forKey: userId) { state.bytes -= Self.size(user) }
            }
        }
    }

    /// Forgets every page (a committed transaction changed documents of users it did not name).
    public func forgetAll() {
        state.withLock { state in
            state.epoch &+= 1
            state.users.removeAll(keepingCapacity: true)
            state.bytes = 0
        }
    }

    private static func size(_ user: UserPages) -> Int { user.pages.values.reduce(0) { $0 + size($1) } }

    private static func size(_ page: RangePage) -> Int {
        page.documents.reduce(64) { $0 + $1.data.count + ($1.rangeValue?.utf8.count ?? 0) + $1.id.utf8.count + 96 }
    }
}
