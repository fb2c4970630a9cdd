/// Tells a user's event streams, on every server process, that something of theirs changed. Route handlers
/// call it after a write commits; the notifier fans out to the `GET /v1/sync/events` streams (in process on
/// SQLite, through PostgreSQL LISTEN/NOTIFY across processes). Notifications are hints: a client that misses
/// one catches up with its next pull.
protocol ChangeNotifier: Sendable {
    /// The user's documents changed; `version` is their change counter after the write.
    func documentsChanged(userId: String, version: Int64)
    /// The user's wallet or quotas changed (an action, a grant, a hold, a capture, an expiry, a premium change).
    func walletChanged(userId: String)
}

/// A notifier that tells no one (until the event streams land).
struct SilentNotifier: ChangeNotifier {
    func documentsChanged(userId: String, version: Int64) {}
    func walletChanged(userId: String) {}
}
