import Foundation
import TallyAPI

/// What the sync engine needs of the server: the client's one-attempt push and pull, its event stream, and where
/// a `wallet` event goes. The client makes these holding itself weakly, so an engine never keeps it alive.
struct SyncRemote: Sendable {
    var push: @Sendable (_ clientId: String, _ mutations: [SyncMutation]) async throws -> SyncPushResponse
    var pull: @Sendable (_ cursor: String?, _ limit: Int) async throws -> SyncPullResponse
    var events: @Sendable (_ lastEventId: String?) -> ServerEventStream
    var wallet: @Sendable (SyncWalletEvent) -> Void
}

/// One signed-in user's sync: owns the user's ``LocalDocumentStore`` and, between ``start()`` and ``close()``,
/// two tasks: the sync loop (push the outbox in order in batches, pull after a push and when asked, until
/// nothing is wanted; transient failures retried with backoff on the injected clock) and the event stream
/// (each `changed` asks for a pull, each `wallet` goes to the client's cache).
///
/// One push and one pull at a time: a trigger while one runs sets a flag the loop takes when it is done.
final class SyncEngine: Sendable {
    /// Mutations per push (the server's limit).
    static let pushBatch = 100
    /// Changes per pull page.
    static let pullLimit = 500
    /// Retry forever: full jitter under a ceiling of 1 s doubling to 60 s; a Retry-After is honoured.
    static let backoff = RetryPolicy(maxAttempts: .max, baseDelay: 1, multiplier: 2, maxDelay: 60, maxRetryAfter: .infinity)

    private struct State {
        var pushWanted = true
        var pullWanted = true
        var isOffline = false
        var isSyncing = false
        /// The event stream reported a disconnection: its next connection may follow missed changes.
        var streamWasDown = false
        var tasks: [Task<Void, Never>] = []
        var closed = false
        /// What ends with the engine: the app's observations of its store.
        var onClose: [UInt64: @Sendable () -> Void] = [:]
        var nextHandler: UInt64 = 0
    }

    let userId: String
    let store: LocalDocumentStore
    private let remote: SyncRemote
    private let clock: any ClientClock
    private let random: @Sendable () -> Double
    private let host: SyncHost
    private let state = Locked(State())
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(
        userId: String, store: LocalDocumentStore, remote: SyncRemote, clock: any ClientClock, random: @escaping @Sendable () -> Double,
        host: SyncHost
    ) {
        self.userId = userId
        self.store = store
        self.remote = remote
        self.clock = clock
        self.random = random
        self.host = host
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: Lifecycle

    /// Starts the sync loop (which pushes what the outbox holds and pulls) and the event stream.
    func start() {
        state.withLock { state in
            guard !state.closed, state.tasks.isEmpty else { return }
            state.tasks = [Task { await self.runSync() }, Task { await self.runEvents() }]
        }
        wake.yield()
    }

    /// Stops both tasks, waits for them to end, and closes the store's file (for ``LocalDocumentStore/remove(path:)``).
    func close() async {
        let (tasks, onClose) = state.withLock { state in
            state.closed = true
            defer { (state.tasks, state.onClose) = ([], [:]) }
            return (state.tasks, Array(state.onClose.values))
        }
        wake.finish()
        for handler in onClose { handler() }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        try? store.close()
    }

    /// Calls `handler` when the engine closes (at once if it has); returns the id for ``removeCloseHandler(_:)``.
    func onClose(_ handler: @escaping @Sendable () -> Void) -> UInt64 {
        let id = state.withLock { state -> UInt64? in
            guard !state.closed else { return nil }
            state.nextHandler += 1
            state.onClose[state.nextHandler] = handler
            return state.nextHandler
        }
        guard let id else {
            handler()
            return 0
        }
        return id
    }

    /// Forgets the close handler `id`.
    func removeCloseHandler(_ id: UInt64) {
        _ = state.withLock { $0.onClose.removeValue(forKey: id) }
    }

    // MARK: Triggers

    /// A local write was committed: push it (the loop pulls afterwards).
    func localWriteCommitted() {
        state.withLock { $0.pushWanted = true }
        wake.yield()
        publishStatus()
    }

    /// The app came to the foreground: other processes' writes (a widget's) are shown at once, from the file;
    /// then their outbox rows are pushed and the server's changes pulled.
    func becameActive() throws {
        try store.refreshFromOtherProcesses()
        requestSync()
    }

    /// Asks for a push of whatever the outbox holds and a pull.
    func requestSync() {
        state.withLock {
            $0.pushWanted = true
            $0.pullWanted = true
        }
        wake.yield()
    }

    private func requestPull() {
        state.withLock { $0.pullWanted = true }
        wake.yield()
    }

    // MARK: Status

    /// The status now: the outbox's size and last sync from the store, the rest from the loop.
    func status() -> SyncStatus {
        let (isOffline, isSyncing) = state.withLock { ($0.isOffline, $0.isSyncing) }
        let local = try? store.syncState()
        return SyncStatus(
            pendingMutations: local?.pendingCount ?? 0, lastSyncedAt: local?.lastSyncAt, isOffline: isOffline, isSyncing: isSyncing)
    }

    private func publishStatus() {
        if host.hasStatusWatchers { host.publish(from: self) }
    }

    private func set(offline: Bool? = nil, syncing: Bool? = nil) {
        let changed = state.withLock { state -> Bool in
            let before = (state.isOffline, state.isSyncing)
            if let offline { state.isOffline = offline }
            if let syncing { state.isSyncing = syncing }
            return before != (state.isOffline, state.isSyncing)
        }
        if changed { publishStatus() }
    }

    // MARK: The sync loop

    private func runSync() async {
        for await _ in wakes {
            do {
                try await syncUntilNothingIsWanted()
                store.checkpoint()  // the round's writes go into the file here, never inside an app's write
            } catch is CancellationError {
                return
            } catch {
                // Refused for good (signed out, the clientId another user's): wait for the next trigger.
            }
            set(syncing: false)
        }
    }

    private func syncUntilNothingIsWanted() async throws {
        while true {
            let push = state.withLock { state in
                defer { state.pushWanted = false }
                return state.pushWanted
            }
            if push, try await pushOutbox() { state.withLock { $0.pullWanted = true } }
            let pull = state.withLock { state in
                defer { state.pullWanted = false }
                return state.pullWanted
            }
            if pull { try await pullChanges() }
            if !push && !pull { return }
        }
    }

    /// Pushes the outbox in order, a batch at a time, until it is empty; returns whether anything was pushed.
    /// A batch whose answer was lost is resent unchanged: the server applies each mutation id once.
    private func pushOutbox() async throws -> Bool {
        var pushed = false
        while true {
            let batch = try store.pendingMutations(limit: Self.pushBatch)
            guard !batch.isEmpty else { return pushed }
            set(syncing: true)
            let answer = try await withBackoff { [remote, store] in try await remote.push(store.clientId, batch) }
            let refusals = try store.apply(push: answer)
            pushed = true
            host.report(refusals.map(SyncEvent.init))
            publishStatus()
        }
    }

    /// Pulls from the stored cursor until the server has no more; a `410 resync_required` starts over from no
    /// cursor (the outbox stays).
    private func pullChanges() async throws {
        while true {
            let cursor = try store.syncState().cursor
            set(syncing: true)
            let page: SyncPullResponse
            do {
                page = try await withBackoff { [remote] in try await remote.pull(cursor, Self.pullLimit) }
            } catch let error as ClientError where error.status == 410 && cursor != nil {
                try store.resetForResync()
                continue
            }
            try store.apply(pull: page)
            if !page.hasMore {
                publishStatus()
                return
            }
        }
    }

    /// Runs `operation` until it succeeds or fails for good; failures that retrying can help (offline, a
    /// timeout, 408, 429, 5xx) are retried after a backoff slept on the injected clock, and mark the engine offline.
    private func withBackoff<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        var failures = 0
        while true {
            do {
                let value = try await Self.shielded(operation)
                set(offline: false)
                return value
            } catch let error as ClientError where Self.isTransient(error) {
                try Task.checkCancellation()
                set(offline: true)
                failures += 1
                let failure = AttemptFailure.status(error.status ?? 503, code: nil, retryAfter: error.retryAfter)
                let delay = Self.backoff.delay(afterAttempt: failures, failure: failure, safeToRetry: true, unitRandom: random())
                try await clock.sleep(for: delay ?? Self.backoff.maxDelay)
            }
        }
    }

    /// Runs `operation` (one request) in a task of its own, so that closing the engine never cancels a request in
    /// flight: swift-corelibs-foundation can deadlock cancelling a URLSession task whose answer is being delivered
    /// (the cancel waits on the session's queue while that queue waits for the task's status lock). A close waits
    /// for the request's answer or timeout instead, then stops.
    private static func shielded<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let value = try await Task { try await operation() }.value
        try Task.checkCancellation()
        return value
    }

    /// Whether retrying may help: no answer, or a status the server uses for "not now".
    static func isTransient(_ error: ClientError) -> Bool {
        switch error.code {
        case .offline, .timedOut, .rateLimited: return true
        case .server: return error.status.map { $0 == 408 || $0 >= 500 } ?? true
        default: return false
        }
    }

    // MARK: The event stream

    private func runEvents() async {
        let stream = remote.events(try? store.syncState().cursor)
        // It ends only when cancelled or refused for good (signed out); the sync loop goes on either way.
        try? await stream.run { event in self.handle(event) }
    }

    private func handle(_ event: ServerEvent) {
        switch event {
        case .connected:
            let reconnected = state.withLock { state in
                defer { state.streamWasDown = false }
                return state.streamWasDown
            }
            set(offline: false)
            if reconnected { requestPull() }  // changes made while it was down; the first pull is the loop's own
        case .changed(let cursor):
            if cursor != (try? store.syncState().cursor) { requestPull() }
        case .wallet(let event):
            remote.wallet(event)
        case .disconnected:
            state.withLock { $0.streamWasDown = true }
            set(offline: true)
        }
    }
}
