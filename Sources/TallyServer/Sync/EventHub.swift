import Metrics
import Synchronization
import TallyStore

/// The open `GET /v1/sync/events` streams of this process, by user (a user may have several: one per
/// device), and the fan-out of ``ChangeEvent``s to them.
///
/// Delivering never blocks the writer and never queues without bound: each stream keeps one
/// ``PendingEvents`` — the newest document version, whether the wallet must be read again, a heartbeat,
/// its end — that events are folded into, so a burst of writes leaves one `changed` (with the newest
/// cursor) and one `wallet` (one read of the account) for a stream that was busy. With no stream open,
/// delivering is one atomic load.
final class EventHub: Sendable {
    /// Streams one user may hold open; opening one more ends their oldest (a reconnecting device's old
    /// connection may not have been noticed as gone yet).
    static let maxStreamsPerUser = 10

    private struct State {
        var nextId: UInt64 = 0
        var streams: [String: [EventSubscription]] = [:]
        var count = 0
    }

    private let state = Mutex(State())
    /// Streams open, read without the lock by ``deliver(_:)``. A stream subscribes before it reads the state
    /// it shows first, so an event that finds no subscriber here changed state the stream reads anyway.
    private let open = Atomic(0)
    private let gauge: Gauge

    init(metrics: any MetricsFactory) {
        gauge = Gauge(label: "tally_event_streams", factory: metrics)
    }

    /// Streams open now.
    var openStreams: Int { open.load(ordering: .relaxed) }

    /// Registers a stream of `userId`'s session `sessionId`. Call ``unsubscribe(_:)`` when it ends.
    func subscribe(userId: String, sessionId: String) -> EventSubscription {
        let (subscription, superseded, count) = state.withLock { state in
            state.nextId += 1
            let subscription = EventSubscription(id: state.nextId, userId: userId, sessionId: sessionId)
            var list = state.streams[userId] ?? []
            list.append(subscription)
            let superseded = list.count > Self.maxStreamsPerUser ? list.removeFirst() : nil
            state.streams[userId] = list
            if superseded == nil { state.count += 1 }
            open.store(state.count, ordering: .relaxed)
            return (subscription, superseded, state.count)
        }
        superseded?.end(.superseded)
        gauge.record(count)
        return subscription
    }

    /// Forgets a stream (it ended, or its client went away).
    func unsubscribe(_ subscription: EventSubscription) {
        let count: Int? = state.withLock { state in
            guard var list = state.streams[subscription.userId],
                let index = list.firstIndex(where: { $0 === subscription })
            else { return nil }
            list.remove(at: index)
            state.streams[subscription.userId] = list.isEmpty ? nil : list
            state.count -= 1
            open.store(state.count, ordering: .relaxed)
            return state.count
        }
        if let count { gauge.record(count) }
    }

    /// The users with a stream open here (what the listener's fallback polls for: `ListenerFallbackPoller`).
    func watchedUsers() -> [String] {
        guard open.load(ordering: .relaxed) > 0 else { return [] }
        return state.withLock { Array($0.streams.keys) }
    }

    /// Folds `event` into the pending events of its user's streams in this process.
    func deliver(_ event: ChangeEvent) {
        guard open.load(ordering: .relaxed) > 0 else { return }
        let streams = state.withLock { $0.streams[event.userId] } ?? []
        for stream in streams {
            switch event {
            case .documents(_, let version): stream.post { $0.version = max($0.version ?? version, version) }
            case .wallet: stream.post { $0.wallet = true }
            case .sessionEnded(_, let sessionId): if stream.sessionId == sessionId { stream.end(.sessionEnded) }
            case .accountDeleted: stream.end(.accountDeleted)
            }
        }
    }

    /// Ends every stream of this process (their clients reconnect and catch up): events may have been
    /// missed, or the server is stopping.
    func endAll(_ reason: StreamEnd) {
        guard open.load(ordering: .relaxed) > 0 else { return }
        let streams = state.withLock { $0.streams.values.flatMap { $0 } }
        for stream in streams { stream.end(reason) }
    }
}

/// Why a stream ended.
enum StreamEnd: String, Sendable {
    /// Its session signed out or was revoked, or its access token expired.
    case sessionEnded
    /// The account was deleted.
    case accountDeleted
    /// The user opened more than ``EventHub/maxStreamsPerUser`` streams; this was the oldest.
    case superseded
    /// Events may have been missed (the PostgreSQL listener reconnected): the client reconnects and catches up.
    case stale
    /// The server is shutting down.
    case shutdown
    /// The task serving it was cancelled.
    case cancelled
}

/// What waits to be written to one stream. Bounded by construction: events fold into it.
struct PendingEvents: Sendable, Equatable {
    /// The newest document version announced (a `changed` event).
    var version: Int64?
    /// The wallet or quotas changed (a `wallet` event, read when written).
    var wallet = false
    /// A heartbeat is due.
    var heartbeat = false
    /// The stream must end (nothing else is written then).
    var end: StreamEnd?

    var isEmpty: Bool { version == nil && !wallet && !heartbeat && end == nil }
}

/// One open stream: its pending events and the task waiting for them.
final class EventSubscription: Sendable {
    let id: UInt64
    let userId: String
    let sessionId: String

    private struct State {
        var pending = PendingEvents()
        var waiter: CheckedContinuation<PendingEvents, Never>?
        var ended = false

        /// Takes what is pending; after an end, nothing more is ever pending.
        mutating func take() -> PendingEvents {
            defer { pending = PendingEvents() }
            if pending.end != nil { ended = true }
            return pending
        }
    }

    private let state = Mutex(State())

    init(id: UInt64, userId: String, sessionId: String) {
        (self.id, self.userId, self.sessionId) = (id, userId, sessionId)
    }

    /// Folds an event into the pending ones and wakes the stream. Never blocks on the stream.
    func post(_ change: (inout PendingEvents) -> Void) {
        let handOff = state.withLock { state -> (CheckedContinuation<PendingEvents, Never>, PendingEvents)? in
            guard !state.ended else { return nil }
            change(&state.pending)
            guard !state.pending.isEmpty, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return (waiter, state.take())
        }
        if let (waiter, pending) = handOff { waiter.resume(returning: pending) }
    }

    /// Ends the stream: its next ``next()`` returns the end.
    func end(_ reason: StreamEnd) {
        post { if $0.end == nil { $0.end = reason } }
    }

    /// Waits until something is pending and takes it all. Cancellation ends the stream.
    func next() async -> PendingEvents {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PendingEvents, Never>) in
                let ready = state.withLock { state -> PendingEvents? in
                    if state.ended { return PendingEvents(end: .cancelled) }
                    if !state.pending.isEmpty { return state.take() }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            end(.cancelled)
        }
    }
}
