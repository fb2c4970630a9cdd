import Foundation

/// The signed-in user's one event stream (`GET /v1/sync/events`), whatever the app configured: ``SyncHost`` opens it
/// when a user is adopted while the app is active and at ``Client/appDidBecomeActive()`` (resuming from the pull
/// cursor, and the server's `wallet` event at every connection is the current state), and closes it at
/// ``Client/appDidEnterBackground()`` and when the user leaves — then waiting for it to end. While it is open, the
/// device's network path is watched too (``NetworkPathWatcher``): a path that becomes usable is a sign that the server
/// may be back.
///
/// Each event goes to the wiring's `onEvent` with the user it belongs to. Only the followed user's stream opens
/// (``follow(_:)``), so an activation racing a change of user cannot reopen the stream of the user who left.
final class LiveEvents: Sendable {
    /// How a stream is made for a user (nil: the client is gone), and where its events go.
    struct Wiring: Sendable {
        var open: @Sendable (_ userId: String, _ lastEventId: String?) -> ServerEventStream?
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
        /// The user whose stream may be open.
        var user: String?
        var running: Running?
        var nextId: UInt64 = 0
    }

    private let state = Locked(State())
    private let reachability: Reachability

    /// Closed until ``wire(_:)``, ``follow(_:)`` and ``open(userId:lastEventId:)``; network changes are signed on `reachability`.
    init(reachability: Reachability) { self.reachability = reachability }

    deinit { state.withLock { $0.running?.task.cancel() } }

    /// Sets how streams are made (the client, once, at the end of its init).
    func wire(_ wiring: Wiring) { state.withLock { $0.wiring = wiring } }

    /// The user whose stream is open, if one is.
    var openUser: String? { state.withLock { $0.running?.userId } }

    /// Makes `userId` the user whose stream may open (nil: nobody). Another user's stream is closed — its request
    /// cancelled — and this returns once its task has ended: no event of theirs is handed on afterwards.
    func follow(_ userId: String?) async {
        let closed = state.withLock { state -> Task<Void, Never>? in
            state.user = userId
            guard let running = state.running, running.userId != userId else { return nil }
            state.running = nil
            return running.task
        }
        closed?.cancel()
        await closed?.value
    }

    /// Opens `userId`'s stream, resuming from `lastEventId`, unless it is open already or `userId` is not the user
    /// followed.
    func open(userId: String, lastEventId: String?) {
        state.withLock { state in
            guard state.user == userId, state.running == nil, let wiring = state.wiring else { return }
            state.nextId += 1
            let id = state.nextId
            let reachability = self.reachability
            // Made and kept under the lock: the task's removal of itself, which takes the lock, comes after.
            let task = Task { [weak self] in
                if let stream = wiring.open(userId, lastEventId) {
                    // It ends when cancelled (closed) or refused for good (signed out): nothing to do either way.
                    try? await stream.run { event in wiring.onEvent(userId, event) }
                }
                self?.ended(id)
            }
            let path = NetworkPathWatcher { reachability.signal(.networkChanged) }
            state.running = Running(id: id, userId: userId, task: task, path: path)
        }
    }

    /// Closes the stream without waiting (the app went to the background), if one is open: its request is cancelled;
    /// an event already on its way may still be handed on, with its user.
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
