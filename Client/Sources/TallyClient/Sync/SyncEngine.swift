import Foundation
import TallyAPI

/// What the sync engine needs of the server: the client's one-attempt push, pull and reachability check. The client
/// makes these holding itself weakly, so an engine never keeps it alive.
struct SyncRemote: Sendable {
    var push: @Sendable (_ clientId: String, _ mutations: [SyncMutation]) async throws -> SyncPushResponse
    var pull: @Sendable (_ cursor: String?, _ limit: Int) async throws -> SyncPullResponse
    /// `GET /health`, one attempt: returns if the server answered, throws the ``ClientError`` otherwise.
    var probe: @Sendable () async throws -> Void
}

/// One signed-in user's sync: owns the user's ``LocalDocumentStore`` and, between ``start()`` and ``close()``, the
/// sync loop: push the whole outbox in order in batches, then pull, until nothing is wanted.
///
/// One push and one pull at a time: a trigger while one runs sets a flag the loop takes when it is done. A round
/// that fails keeps what it wanted and waits on the client's ``Reachability`` (``SyncSchedule``): without an answer
/// it checks `GET /health` on a short backoff and pushes as soon as the server answers or any sign says it is back;
/// after a "not now" it waits the server's time. Each attempt re-reads the outbox, so writes made meanwhile go in
/// the first push after the wait, and a batch whose answer was lost is sent again (the server applies each
/// mutation id once). The event stream is the client's (``LiveEvents``); it hands the engine its `changed`
/// events, its drops and its returns.
final class SyncEngine: Sendable {
    /// Mutations per push (the server's limit).
    static let pushBatch = 100
    /// Changes per pull page.
    static let pullLimit = 500

    private struct State {
        var pushWanted = true
        var pullWanted = true
        var activity = SyncActivity()
        /// ``Reachability/generation`` before the last request was sent, and when it was sent.
        var sentAt: UInt64 = 0
        var lastAttemptAt: Date?
        /// The event stream reported a disconnection: its next connection may follow missed changes.
        var streamWasDown = false
        var task: Task<Void, Never>?
        var closed = false
        /// What ends with the engine: the app's observations of its store.
        var onClose: [UInt64: @Sendable () -> Void] = [:]
        /// The last id given to a close handler or a waiter.
        var nextHandler: UInt64 = 0
        /// ``SyncClient/now()`` calls waiting for the outbox to empty and a pull to complete.
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        /// ``nextHandler`` when the last request was sent: a failure of it is news only to the waiters up to this id. A
        /// call made while the request was under way (the network back meanwhile) waits for a round of its own.
        var lastSentHandler: UInt64 = 0
    }

    let userId: String
    let store: LocalDocumentStore
    private let remote: SyncRemote
    private let clock: any TallyClock
    private let random: @Sendable () -> Double
    private let host: SyncHost
    private let reachability: Reachability
    private let state = Locked(State())
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init(
        userId: String, store: LocalDocumentStore, remote: SyncRemote, clock: any TallyClock, random: @escaping @Sendable () -> Double,
        host: SyncHost
    ) {
        self.userId = userId
        self.store = store
        self.remote = remote
        self.clock = clock
        self.random = random
        self.host = host
        reachability = host.reachability
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: Lifecycle

    /// Starts the sync loop, which pushes what the outbox holds and pulls.
    func start() {
        state.withLock { state in
            guard !state.closed, state.task == nil else { return }
            state.task = Task { await self.runSync() }
        }
        wake.yield()
    }

    /// Stops the loop — a request in flight is cancelled, not waited for — waits for it to end, fails the
    /// ``SyncClient/now()`` calls waiting, and closes the store's file
    /// (for ``LocalDocumentStore/remove(path:)``); `forgettingCursor` first resets the pull cursor (the file goes to
    /// another user, whose first pull starts from nothing).
    func close(forgettingCursor: Bool = false) async {
        let (task, onClose, waiters) = state.withLock { state in
            state.closed = true
            defer { (state.task, state.onClose, state.waiters) = (nil, [:], [:]) }
            return (state.task, Array(state.onClose.values), Array(state.waiters.values))
        }
        wake.finish()
        for handler in onClose { handler() }
        for waiter in waiters { waiter.resume(throwing: ClientError(.unauthorized, message: "signed out before the sync finished")) }
        task?.cancel()
        await task?.value
        if forgettingCursor { try? store.resetForResync() }
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

    /// A local write was committed: push it, with the rest of the outbox (the loop pulls afterwards). A wait for an
    /// unreachable server ends, unless the last attempt was under a second ago (``SyncSchedule/writeIsSign(sinceAttempt:)``):
    /// the push finds out at once whether the server is back.
    func localWriteCommitted() {
        let now = clock.now
        let lastAttempt = state.withLock { state in
            state.pushWanted = true
            return state.lastAttemptAt
        }
        wake.yield()
        if SyncSchedule.writeIsSign(sinceAttempt: lastAttempt.map { now.timeIntervalSince($0) }) { reachability.signal(.localWrite) }
        publishStatus()
    }

    /// The app came to the foreground: other processes' writes (a widget's) are shown at once, from the file;
    /// then their outbox rows are pushed and the server's changes pulled.
    func becameActive() throws {
        try store.refreshFromOtherProcesses()
        requestSync()
    }

    /// ``SyncClient/now()``: ends the current wait, pushes the whole outbox and pulls; returns once nothing is left
    /// to push and a pull made after the call has completed, or throws the failure of the attempt that stopped it.
    func syncNow() async throws {
        let id = state.withLock { state in
            state.nextHandler += 1
            return state.nextHandler
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let registered = state.withLock { state -> Bool in
                    guard !state.closed, !Task.isCancelled else { return false }
                    state.waiters[id] = continuation
                    (state.pushWanted, state.pullWanted) = (true, true)
                    return true
                }
                guard registered else {
                    return continuation.resume(throwing: Task.isCancelled ? CancellationError() : ClientError(.unauthorized))
                }
                wake.yield()
                reachability.signal(.syncNow)
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
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

    /// The status now: the outbox's size and last sync from the store, the phase from the loop.
    func status() -> SyncStatus {
        let activity = state.withLock { $0.activity }
        let local = try? store.syncState()
        return SyncStatus(
            pendingMutations: local?.pendingCount ?? 0, lastSyncedAt: local?.lastSyncAt, phase: activity.phase, retryAt: activity.retryAt,
            isSyncing: activity.working)
    }

    private func publishStatus() {
        if host.hasStatusWatchers { host.publish(from: self) }
    }

    private func update(_ event: SyncActivity.Event) {
        if state.withLock({ $0.activity.apply(event) }) { publishStatus() }
    }

    // MARK: The sync loop

    private func runSync() async {
        var failures = 0
        for await _ in wakes {
            while true {
                do {
                    try await syncUntilNothingIsWanted()
                    failures = 0
                    store.checkpoint()  // the round's writes go into the file here, never inside an app's write
                    break
                } catch is CancellationError {
                    return
                } catch {
                    let failure = (error as? ClientError).map(SyncSchedule.failure) ?? .refused
                    fail(error, keepWanting: failure != .refused)
                    guard failure != .refused else {
                        // Refused for good (signed out, the clientId another user's): wait for the next trigger.
                        update(.finished)
                        break
                    }
                    failures += 1
                    do {
                        try await waitToRetry(after: failure, failures: &failures)
                    } catch {
                        return  // cancelled: the engine is closing
                    }
                }
            }
        }
    }

    /// A round failed: the ``SyncClient/now()`` calls waiting get `error`, but for a round that may be tried again
    /// only those made before its failed request was sent (a later call gets the next round, at once); what the round
    /// wanted is wanted again.
    private func fail(_ error: any Error, keepWanting: Bool) {
        let waiters = state.withLock { state in
            if keepWanting { (state.pushWanted, state.pullWanted) = (true, true) }
            let failed = keepWanting ? state.waiters.filter { $0.key <= state.lastSentHandler } : state.waiters
            for id in failed.keys { state.waiters[id] = nil }
            state.lastSentHandler = state.nextHandler  // a call kept gets the next failure, sent or not: one more round at most
            return Array(failed.values)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// Waits after `failures` failures in a row, the last being `failure`, until the next attempt is due. Without an
    /// answer, each elapsed wait is followed by a `GET /health`; an answer or a sign that the server is back ends it.
    /// A ``SyncClient/now()`` call waiting ends it too, even one whose sign a failed check took for old news: it asked
    /// for the round itself.
    private func waitToRetry(after failure: SyncSchedule.Failure, failures: inout Int) async throws {
        var since = state.withLock { $0.sentAt }
        while true {
            if state.withLock({ !$0.waiters.isEmpty }) { return }
            guard let wait = SyncSchedule.wait(after: failure, failures: failures, isActive: host.isActive, unitRandom: random()) else { return }
            update(.waiting(wait.kind, retryAt: clock.now.addingTimeInterval(wait.seconds)))
            if try await reachability.wait(wait.seconds, wait.kind, after: since) || wait.kind != .unreachable { return }
            do {
                try await request { [remote] in try await remote.probe() }
                return
            } catch let error as ClientError where SyncSchedule.failure(error) == .unreachable {
                failures += 1
                since = state.withLock { $0.sentAt }
            } catch is ClientError {
                return  // the server answered something: try the round itself
            }
        }
    }

    /// Pushes (the whole outbox, in batches) and pulls while either is wanted; then tells the ``SyncClient/now()``
    /// calls waiting, in the same lock that found nothing wanted: a call made later has set the flags again.
    private func syncUntilNothingIsWanted() async throws {
        enum Step {
            case push, pull
            case done([CheckedContinuation<Void, any Error>])
        }
        while true {
            let step = state.withLock { state -> Step in
                if state.pushWanted {
                    state.pushWanted = false
                    return .push
                }
                if state.pullWanted {
                    state.pullWanted = false
                    return .pull
                }
                defer { state.waiters = [:] }
                return .done(Array(state.waiters.values))
            }
            switch step {
            case .push:
                if try await pushOutbox() { state.withLock { $0.pullWanted = true } }
            case .pull:
                try await pullChanges()
            case .done(let waiters):
                update(.finished)
                for waiter in waiters { waiter.resume() }
                return
            }
        }
    }

    /// Pushes the outbox in order, a batch at a time, until it is empty; returns whether anything was pushed. The
    /// outbox is read again for every batch, after any wait: what it holds now goes, never a batch read before.
    private func pushOutbox() async throws -> Bool {
        var pushed = false
        while true {
            let batch = try store.pendingMutations(limit: Self.pushBatch)
            guard !batch.isEmpty else { return pushed }
            let answer = try await request { [remote, store] in try await remote.push(store.clientId, batch) }
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
            let page: SyncPullResponse
            do {
                page = try await request { [remote] in try await remote.pull(cursor, Self.pullLimit) }
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

    /// Sends one request (`operation`), noting the sign number before it (for the wait after its failure) and
    /// moving the phase.
    private func request<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let (generation, now) = (reachability.generation, clock.now)
        state.withLock { ($0.sentAt, $0.lastAttemptAt, $0.lastSentHandler) = (generation, now, $0.nextHandler) }
        update(.attempting)
        let value = try await operation()
        update(.answered)
        return value
    }

    // MARK: The event stream

    /// The pull cursor, for the event stream's `Last-Event-ID`.
    var cursor: String? { try? store.syncState().cursor }

    /// The event stream connected: the server is reachable; after a drop, the changes made meanwhile are pulled (the
    /// first connection's are the loop's own first pull).
    func streamConnected() {
        let reconnected = state.withLock { state in
            defer { state.streamWasDown = false }
            return state.streamWasDown
        }
        update(.streamConnected)
        if reconnected { requestPull() }
    }

    /// The user's documents changed on the server up to `cursor`: pull unless that is where the store is.
    func changed(cursor: String) {
        if cursor != self.cursor { requestPull() }
    }

    /// The event stream dropped (not closed by the app): live changes stop until it is back.
    func streamLost() {
        state.withLock { $0.streamWasDown = true }
        update(.streamLost)
    }
}
