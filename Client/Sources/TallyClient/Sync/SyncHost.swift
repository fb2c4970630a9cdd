import Foundation

/// The client's side of sync across users: holds the signed-in user's ``SyncEngine`` (made when a user is adopted,
/// closed — and its document file removed — when the user leaves) and the user's event stream (``LiveEvents``: open
/// while a user is signed in and the app is active, whatever is configured), dispatches the stream's events, and
/// keeps the app's status and event streams, which outlive any one user.
final class SyncHost: Sendable {
    private struct State {
        var userId: String?
        var engine: SyncEngine?
        /// Why the signed-in user has no engine (its file could not be opened), for the calls that need one.
        var failure: (any Error)?
        var makeEngine: (@Sendable (_ userId: String) throws -> SyncEngine)?
        /// Whether the app is in the foreground (``Client/appDidBecomeActive()``, ``Client/appDidEnterBackground()``).
        var isActive = true
        var nextId: UInt64 = 0
        var statusWatchers: [UInt64: AsyncStream<SyncStatus>.Continuation] = [:]
        var eventWatchers: [UInt64: AsyncStream<SyncEvent>.Continuation] = [:]
        var lastStatus = SyncStatus()
        /// A guest merged into an account on the server (``carryDocuments(from:to:)``): at the switch to the account,
        /// the guest's file becomes the account's instead of being removed.
        var carry: (from: String, to: String)?
    }

    private let state = Locked(State())
    /// The client's signs that the server is back, which end the engine's and the stream's waits.
    let reachability: Reachability
    private let live: LiveEvents

    /// Creates a host with no engine and no stream; ``setFactory(_:)`` and ``setLiveEvents(open:wallet:)`` tell it how
    /// to make them.
    init(reachability: Reachability) {
        self.reachability = reachability
        live = LiveEvents(reachability: reachability)
    }

    /// How to make a user's engine (the client sets it once, at the end of its init: nil keeps sync off).
    func setFactory(_ makeEngine: @escaping @Sendable (_ userId: String) throws -> SyncEngine) {
        state.withLock { $0.makeEngine = makeEngine }
    }

    /// How to open a user's event stream (nil: the client is gone), and where its `wallet` events go, with the
    /// user they belong to (the client sets it once, at the end of its init).
    func setLiveEvents(
        open: @escaping @Sendable (_ userId: String, _ lastEventId: String?) -> ServerEventStream?,
        wallet: @escaping @Sendable (_ userId: String, _ event: SyncWalletEvent) -> Void
    ) {
        live.wire(
            LiveEvents.Wiring(open: open) { [weak self] userId, event in
                self?.handle(event, of: userId, wallet: wallet)
            })
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

    /// Whether the app is in the foreground.
    var isActive: Bool { state.withLock { $0.isActive } }

    /// The server merged `guest` into `account`: when the client next switches from the guest to the account, the
    /// guest's document file — its unpushed changes included — becomes the account's (the server carried the guest's
    /// sync client over, so each change still applies once), unless the account has a file on this device already.
    func carryDocuments(from guest: String, to account: String) {
        state.withLock { $0.carry = (guest, account) }
    }

    /// The user who was signed in leaves (sign-out, another user, a lost session): their event stream and engine end —
    /// requests in flight cancelled, not waited for — and are waited for, the engine's observations with it; then its
    /// file is removed or, when the server merged that guest into `next` (``carryDocuments(from:to:)``), becomes
    /// `next`'s — its unpushed changes included —, unless `next` has a file here already. Nothing of theirs runs or is
    /// open when this returns. ``adopt(_:)`` follows.
    func leave(next: String?, documentsFile: @Sendable (String) -> URL?) async {
        let (leaving, carried) = state.withLock { state -> (SyncEngine?, Bool) in
            let carried = state.carry.map { $0.from == state.userId && $0.to == next } ?? false
            defer { (state.userId, state.engine, state.failure, state.carry) = (nil, nil, nil, nil) }
            return (state.engine, carried)
        }
        await live.follow(nil)
        if let leaving {
            // The cursor is the guest's: the account's first pull starts from nothing (the outbox stays).
            await leaving.close(forgettingCursor: carried)
            if let from = documentsFile(leaving.userId) {
                if carried, let next, let to = documentsFile(next), !FileManager.default.fileExists(atPath: to.path) {
                    Self.move(from, to)
                } else {
                    try? LocalDocumentStore.remove(path: from)
                }
            }
        }
        publish(from: nil)
    }

    /// Moves the document file `from` (closed), with its -wal and -shm, to `to`.
    private static func move(_ from: URL, _ to: URL) {
        for suffix in ["", "-wal", "-shm"] {
            let source = URL(fileURLWithPath: from.path + suffix)
            guard FileManager.default.fileExists(atPath: source.path) else { continue }
            try? FileManager.default.moveItem(at: source, to: URL(fileURLWithPath: to.path + suffix))
        }
    }

    /// Makes `userId` the one whose documents sync and whose events stream (after ``leave(next:documentsFile:)``): their
    /// engine is opened and started and, if the app is active, their stream opened.
    func adopt(_ userId: String?) async {
        let next = state.withLock { state -> SyncEngine? in
            state.userId = userId
            guard let userId, let make = state.makeEngine else { return nil }
            do {
                state.engine = try make(userId)
            } catch {
                state.failure = error
            }
            return state.engine
        }
        await live.follow(userId)
        next?.start()
        if let userId, isActive { live.open(userId: userId, lastEventId: next?.cursor) }
        publish(from: next)
    }

    /// The app came to the foreground: a sign that the server may be reachable, the stream reopened with catch-up
    /// (`Last-Event-ID` from the pull cursor; the server's `wallet` event is the current state), the engine's file
    /// re-read (a widget's writes) and a push and a pull asked for.
    func becameActive() {
        let (userId, engine) = state.withLock { state in
            state.isActive = true
            return (state.userId, state.engine)
        }
        reachability.signal(.becameActive)
        if let userId { live.open(userId: userId, lastEventId: engine?.cursor) }
        try? engine?.becameActive()
    }

    /// The app went to the background: the stream closes (the server's connection with it), and checks for an
    /// unreachable server slow down (``SyncSchedule``).
    func enteredBackground() {
        state.withLock { $0.isActive = false }
        live.close()
    }

    /// ``SyncClient/now()``: the engine's sync now; nothing to do without synced collections.
    func syncNow() async throws {
        let (userId, engine, failure) = state.withLock { ($0.userId, $0.engine, $0.failure) }
        guard userId != nil else { throw ClientError(.unauthorized, message: "sign in before syncing") }
        if let engine { return try await engine.syncNow() }
        if let failure { throw failure }
    }

    /// One event of `userId`'s stream: the server answering is a sign for the waits; `changed`, drops and returns go
    /// to the user's engine, if they have one; `wallet` to `wallet`.
    private func handle(_ event: ServerEvent, of userId: String, wallet: @Sendable (String, SyncWalletEvent) -> Void) {
        let engine = state.withLock { $0.engine?.userId == userId ? $0.engine : nil }
        switch event {
        case .connected:
            reachability.signal(.streamConnected)
            engine?.streamConnected()
        case .changed(let cursor):
            engine?.changed(cursor: cursor)
        case .wallet(let event):
            wallet(userId, event)
        case .disconnected:
            engine?.streamLost()
        }
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
