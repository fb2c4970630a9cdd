import TallyStore

/// Tells a user's event streams, on every server process, that something of theirs changed. Route handlers
/// call it after a write commits; the notifier fans out to the `GET /v1/sync/events` streams (in process on
/// SQLite, through PostgreSQL LISTEN/NOTIFY across processes). Notifications are hints: a client that misses
/// one catches up with its next pull.
protocol ChangeNotifier: Sendable {
    /// The user's documents changed; `version` is their change counter after the write.
    func documentsChanged(userId: String, version: Int64)
    /// The user's wallet or quotas changed (an action, a grant, a hold, a capture, an expiry, a premium change).
    func walletChanged(userId: String)
    /// The sessions signed out or were revoked together (a password reset ends them all): their streams end. One
    /// announcement, so that a process that hears of one has heard of them all.
    func sessionsEnded(userId: String, sessionIds: [String])
    /// The account was deleted: its streams end.
    func accountDeleted(userId: String)
}

/// The server's notifier: each event goes to this process's streams at once (``EventHub``), and, when
/// several processes share a database, to `relay`, which carries it to the others
/// (`PostgresNotifications`: an append to a batch, no round trip here).
struct EventNotifier: ChangeNotifier {
    let hub: EventHub
    /// Carries events to the other processes; nil when there are none (SQLite: one process owns the file).
    let relay: (@Sendable ([ChangeEvent]) -> Void)?

    func documentsChanged(userId: String, version: Int64) { publish([.documents(userId: userId, version: version)]) }
    func walletChanged(userId: String) { publish([.wallet(userId: userId)]) }
    func sessionsEnded(userId: String, sessionIds: [String]) {
        guard !sessionIds.isEmpty else { return }
        publish(sessionIds.map { .sessionEnded(userId: userId, sessionId: $0) })
    }
    func accountDeleted(userId: String) { publish([.accountDeleted(userId: userId)]) }

    private func publish(_ events: [ChangeEvent]) {
        for event in events { hub.deliver(event) }
        relay?(events)
    }
}
