import Foundation

/// The signed-in user's one event stream (`GET /v1/sync/events`), whatever the app configured: ``SyncHost`` opens it
/// when a user is adopted while the app is active and at ``Client/appDidBecomeActive()`` (resuming from the pull
/// cursor, and the server's `wallet` event at every connection is the current state), and closes it at
/// ``Client/appDidEnterBackground()`` and when the user leaves. While it is open, the device's network path is
/// watched too (``NetworkPathWatcher``): a path that becomes usable is a sign that the server may be back.
///
/// Each event goes to the wiring's `onEvent` with the user it belongs to, so a late event of a user who left can be
/// told apart.
final class LiveEvents: Sendable {
    /// How a stream is made for the signed-in user (nil: the client is gone), and where its events go.
    struct Wiring: Sendable {
        var open: @Sendable (_ lastEventId: String?) -> ServerEventStream?
        var onEvent: @Sendable (_ userId: String, _ event: ServerEvent) -> Void
    }

    private struct Running {
        let id: UInt64
        let userId: String
        let task: Task<Void, Never>
        let path: NetworkPathWatcher
    }

    private struct State {
        var wiring: Wiring?
        var running: Running?
        var nextId: UInt64 = 0
    }

    private let state = Locked(State())
    private let reachability: Reachability

    /// Closed until ``wire(_:)`` and ``open(userId:lastEventId:)``; network changes are signed on `reachability`.
    init(reachability: Reachability) { self.reachability = reachability }

    deinit { state.withLock { $0.running?.task.cancel() } }

    /// Sets how streams are made (the client, once, at the end of its init).
    func wire(_ wiring: Wiring) { state.withLock { $0.wiring = wiring } }

    /// The user whose stream is open, if one is.
    var openUser: String? { state.withLock { $0.running?.userId } }

    /// Opens `userId`'s stream, resuming from `lastEventId`, unless it is open already; a stream of another user is
    /// closed first.
    func open(userId: String, lastEventId: String?) {
        let replaced = state.withLock { state -> Task<Void, Never>? in
            guard state.running?.userId != userId, let wiring = state.wiring else { return nil }
            let previous = state.running?.task
            state.nextId += 1
            let id = state.nextId
            let reachability = self.reachability
            // Made and kept under the lock: the task's removal of itself, which takes the lock, comes after.
            let task = Task { [weak self] in
                if let stream = wiring.open(lastEventId) {
                    // It ends when cancelled (closed) or refused for good (signed out): nothing to do either way.
                    try? await stream.run { event in wiring.onEvent(userId, event) }
                }
                self?.ended(id)
            }
            let path = NetworkPathWatcher { reachability.signal(.networkChanged) }
            state.running = Running(id: id, userId: userId, task: task, path: path)
            return previous
        }
        replaced?.cancel()
    }

    /// Closes the stream, if one is open (its request is cancelled; an event already on its way may still be handed on).
    func close() {
        let task = state.withLock { state in
            defer { state.running = nil }
            return state.running?.task
        }
        task?.cancel()
    }

    private func ended(_ id: UInt64) {
        state.withLock { state in
            if state.running?.id == id { state.running = nil }
        }
    }
}
