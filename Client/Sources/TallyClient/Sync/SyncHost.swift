import Foundation

/// The client's side of sync across users: holds the signed-in user's ``SyncEngine`` (made when a user is
/// adopted, closed — and its document file removed — when the user leaves), and the app's status and event
/// streams, which outlive any one user.
final class SyncHost: Sendable {
    private struct State {
        var engine: SyncEngine?
        /// Why the signed-in user has no engine (its file could not be opened), for the calls that need one.
        var failure: (any Error)?
        var makeEngine: (@Sendable (_ userId: String) throws -> SyncEngine)?
        var nextId: UInt64 = 0
        var statusWatchers: [UInt64: AsyncStream<SyncStatus>.Continuation] = [:]
        var eventWatchers: [UInt64: AsyncStream<SyncEvent>.Continuation] = [:]
        var lastStatus = SyncStatus()
    }

    private let state = Locked(State())

    /// Creates a host with no engine; ``setFactory(_:)`` tells it how to make one.
    init() {}

    /// How to make a user's engine (the client sets it once, at the end of its init: nil keeps sync off).
    func setFactory(_ makeEngine: @escaping @Sendable (_ userId: String) throws -> SyncEngine) {
        state.withLock { $0.makeEngine = makeEngine }
    }

    /// The signed-in user's engine; throws when no user is signed in or the user's document file could not be opened.
    func engine() throws -> SyncEngine {
        try state.withLock { state in
            if let engine = state.engine { return engine }
            if let failure = state.failure { throw failure }
            throw ClientError(.unauthorized, message: "sign in before using synced collections")
        }
    }

    /// The engine, if a user has one.
    var currentEngine: SyncEngine? { state.withLock { $0.engine } }

    /// Makes `userId` the one whose documents sync: the engine of a different user is closed and its file removed
    /// (sign-out, another user signing in), then the new user's engine is opened and started.
    func adopt(_ userId: String?, documentsFile: @Sendable (String) -> URL?) async {
        let (previous, next) = state.withLock { state -> (SyncEngine?, SyncEngine?) in
            if let engine = state.engine, engine.userId == userId { return (nil, nil) }
            let previous = state.engine
            state.engine = nil
            state.failure = nil
            guard let userId, let make = state.makeEngine else { return (previous, nil) }
            do {
                state.engine = try make(userId)
            } catch {
                state.failure = error
            }
            return (previous, state.engine)
        }
        if let previous {
            await previous.close()
            if let file = documentsFile(previous.userId) { try? LocalDocumentStore.remove(path: file) }
        }
        next?.start()
        publish(from: next)
    }

    // MARK: Status

    /// The signed-in user's status now (all zero without one).
    var status: SyncStatus { currentEngine?.status() ?? SyncStatus() }

    /// Whether anyone follows the status (the engine skips computing it otherwise).
    var hasStatusWatchers: Bool { state.withLock { !$0.statusWatchers.isEmpty } }

    /// Sends `engine`'s status to the watchers if it differs from the last one sent, unless `engine` is no longer
    /// current. Read under the lock: statuses read on two threads are sent in the order they were read.
    func publish(from engine: SyncEngine?) {
        state.withLock { state in
            guard state.engine === engine else { return }
            let status = engine?.status() ?? SyncStatus()
            guard state.lastStatus != status else { return }
            state.lastStatus = status
            for watcher in state.statusWatchers.values { watcher.yield(status) }
        }
    }

    /// The status now, then each change.
    func statusChanges() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = watch(\.statusWatchers, buffering: 16)
        // Read after registering, under the lock like ``publish(from:)``: no change is missed or sent out of order.
        state.withLock { state in
            let current = state.engine?.status() ?? SyncStatus()
            state.lastStatus = current
            continuation.yield(current)
        }
        return stream
    }

    // MARK: Events

    /// Sends each of `events` to the event watchers.
    func report(_ events: [SyncEvent]) {
        guard !events.isEmpty else { return }
        state.withLock { state in
            for watcher in state.eventWatchers.values {
                for event in events { watcher.yield(event) }
            }
        }
    }

    /// The sync events from now on.
    func events() -> AsyncStream<SyncEvent> {
        watch(\.eventWatchers, buffering: 1_000).stream
    }

    /// A new stream whose continuation is kept in `watchers` until the stream ends.
    private func watch<Element>(
        _ watchers: any WritableKeyPath<State, [UInt64: AsyncStream<Element>.Continuation]> & Sendable, buffering: Int
    ) -> (stream: AsyncStream<Element>, continuation: AsyncStream<Element>.Continuation) {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(buffering))
        let id = state.withLock { state in
            state.nextId += 1
            state[keyPath: watchers][state.nextId] = continuation
            return state.nextId
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0[keyPath: watchers].removeValue(forKey: id) } }
        return (stream, continuation)
    }
}
