import Foundation
import TallyAPI

/// One streamed call of the AI gateway, shared by every iteration of the same request and intent that starts while
/// it runs (a double-tapped Send): one request, one model call, one hold shown, one charge. Its events are kept as
/// they come, so an iteration that joins late reads the answer from its start; the call ends for everyone with the
/// same ending. It is cancelled — the connection closed, the server stops the model and charges what was generated —
/// only when every iteration has left.
final class AIStreamCall: Sendable {
    private struct State {
        var events: [AIStreamEvent] = []
        /// Nil while the answer streams; then how it ended (nil error: complete).
        var ending: Result<Void, any Error>?
        var readers: Set<UInt64> = []
        var waiting: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextReader: UInt64 = 0
        var task: Task<Void, Never>?
        var hold: AIWalletHold?
        var abandoned = false
    }

    private let state = Locked(State())

    /// A reader's place in the call: leaving (dropping it) is how an iteration lets go.
    final class Reader: Sendable {
        let call: AIStreamCall
        let id: UInt64

        fileprivate init(call: AIStreamCall, id: UInt64) {
            self.call = call
            self.id = id
        }

        deinit { call.leave(id) }

        /// The event at `index`, waiting for it; nil once the answer ended complete after its last event. Throws the
        /// call's failure after its last event, or `CancellationError` when the reading task is cancelled.
        func event(at index: Int) async throws -> AIStreamEvent? {
            try await call.event(at: index, reader: id)
        }
    }

    /// Adds a reader, or nil when the call is no longer streaming (ended, or abandoned by every reader): a
    /// request sent after an answer ended is a new call, never a replay of the old one.
    func join() -> Reader? {
        let id = state.withLock { state -> UInt64? in
            guard state.ending == nil, !state.abandoned else { return nil }
            state.nextReader += 1
            state.readers.insert(state.nextReader)
            return state.nextReader
        }
        return id.map { Reader(call: self, id: $0) }
    }

    /// Starts the call: `run` produces the events (``append(_:)``), shows and settles the hold (``adopt(_:)``), and
    /// ends it (``end(_:)``); `onEnd` is told once, when it ended or was abandoned.
    func start(onEnd: @escaping @Sendable () -> Void, _ run: @escaping @Sendable (AIStreamCall) async -> Void) {
        let task = Task {
            await run(self)
            onEnd()
        }
        let abandoned = state.withLock { state in
            state.task = task
            return state.abandoned
        }
        if abandoned { task.cancel() }
    }

    /// The readers that have not left.
    var readerCount: Int { state.withLock { $0.readers.count } }

    // MARK: The producing side

    /// Keeps the call's hold, so that abandoning the call settles it at once.
    func adopt(_ hold: AIWalletHold) {
        let abandoned = state.withLock { state in
            state.hold = hold
            return state.abandoned
        }
        if abandoned { hold.settle(.unknown) }
    }

    /// Hands `event` to every reader.
    func append(_ event: AIStreamEvent) {
        let waiting = state.withLock { state in
            state.events.append(event)
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Ends the answer for every reader, unless it has ended: after the events kept, `failure` is thrown (nil: the
    /// answer is complete).
    func end(_ failure: (any Error)?) {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.ending == nil else { return [] }
            state.ending = failure.map { .failure($0) } ?? .success(())
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waiter in waiting { waiter.resume() }
    }

    // MARK: The reading side

    private func event(at index: Int, reader: UInt64) async throws -> AIStreamEvent? {
        while true {
            try Task.checkCancellation()
            enum Next {
                case event(AIStreamEvent), ended(Result<Void, any Error>), wait
            }
            let next = state.withLock { state -> Next in
                if index < state.events.count { return .event(state.events[index]) }
                if let ending = state.ending { return .ended(ending) }
                return .wait
            }
            switch next {
            case .event(let event): return event
            case .ended(.success): return nil
            case .ended(.failure(let error)): throw error
            case .wait: await waitForMore(index: index, reader: reader)
            }
        }
    }

    /// Returns when there is more than `index` events, the call ended, or the reading task is cancelled.
    private func waitForMore(index: Int, reader: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if Task.isCancelled || index < state.events.count || state.ending != nil { return true }
                    state.waiting[reader] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: reader) }?.resume()
        }
    }

    /// Ends the call for every reader with `failure` (the user it was for left), cancels it — its connection closed, the
    /// server charging what was generated — and returns once it has stopped; its hold settles as unknown.
    func stop(_ failure: any Error) async {
        end(failure)
        let (task, hold) = state.withLock { state -> (Task<Void, Never>?, AIWalletHold?) in
            state.abandoned = true
            return (state.task, state.hold)
        }
        hold?.settle(.unknown)
        task?.cancel()
        await task?.value
    }

    /// A reader let go; the last one to leave a call still streaming cancels it and settles its hold at once.
    private func leave(_ reader: UInt64) {
        let (waiter, abandon) = state.withLock { state -> (CheckedContinuation<Void, Never>?, (Task<Void, Never>?, AIWalletHold?)?) in
            state.readers.remove(reader)
            let waiter = state.waiting.removeValue(forKey: reader)
            guard state.readers.isEmpty, state.ending == nil, !state.abandoned else { return (waiter, nil) }
            state.abandoned = true
            return (waiter, (state.task, state.hold))
        }
        waiter?.resume()
        guard let (task, hold) = abandon else { return }
        hold?.settle(.unknown)
        task?.cancel()
    }
}

/// The streamed calls in flight, by request and intent (``AIStream``): an iteration of a request already streaming
/// joins its call instead of sending it again.
final class AIStreamCalls: Sendable {
    private let calls = Locked<[String: AIStreamCall]>([:])

    /// Creates an empty registry.
    init() {}

    /// A reader of the call for `key`: the one in flight, else a new one that `run` performs.
    func read(_ key: String, _ run: @escaping @Sendable (AIStreamCall) async -> Void) -> AIStreamCall.Reader {
        calls.withLock { calls in
            if let call = calls[key], let reader = call.join() { return reader }
            let call = AIStreamCall()
            calls[key] = call
            let reader = call.join()!  // a new call takes readers
            // Started under the lock: ``endAll()`` finds every call it takes running, and stops it.
            call.start(onEnd: { [weak self] in self?.forget(key, call) }, run)
            return reader
        }
    }

    /// Calls in flight (tests).
    var count: Int { calls.withLock { $0.count } }

    /// Stops every call in flight (a change of user): their readers get ``ClientError/Code/unauthorized`` after the
    /// events kept, and this returns once each call's task has ended.
    func endAll() async {
        let calls = self.calls.withLock { calls in
            defer { calls = [:] }
            return Array(calls.values)
        }
        for call in calls { await call.stop(ClientError(.unauthorized, message: "the user changed before the answer was complete")) }
    }

    /// Readers of the calls in flight (tests).
    var readerCount: Int { calls.withLock { $0.values.reduce(0) { $0 + $1.readerCount } } }

    private func forget(_ key: String, _ call: AIStreamCall) {
        calls.withLock { calls in
            if calls[key] === call { calls[key] = nil }
        }
    }
}
