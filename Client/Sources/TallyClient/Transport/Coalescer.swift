
/// Runs one operation per key at a time; callers that arrive while it runs share its result (Go's singleflight).
/// The operation runs once and its value is handed to every caller as is: followers neither decode nor
/// read anything again. A caller that is cancelled stops waiting (throws CancellationError) without
/// disturbing the others; the shared operation itself is cancelled only when every waiter has gone.
/// The key is forgotten when the operation ends.
public final class Coalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Told, once per successful call, how many callers besides the one that started it received its value.
    public typealias SharedHandler = @Sendable (_ followers: Int) -> Void

    private struct Call {
        /// Tells this call from a later one for the same key.
        let id: UInt64
        /// The waiter that started the call (it may leave; the others are followers).
        let leader: UInt64
        let onShared: SharedHandler?
        var waiters: [UInt64: CheckedContinuation<Value, any Error>] = [:]
        var task: Task<Void, Never>?
    }

    private struct State {
        var calls: [Key: Call] = [:]
        var nextId: UInt64 = 0

        mutating func makeId() -> UInt64 {
            nextId += 1
            return nextId
        }
    }

    private let state = Locked(State())

    /// Creates an empty coalescer.
    public init() {}

    /// How many keys have a call in flight.
    public var inFlightCount: Int { state.withLock { $0.calls.count } }

    /// How many callers wait for `key` (tests use it to know every caller has joined).
    func waiterCount(for key: Key) -> Int { state.withLock { $0.calls[key]?.waiters.count ?? 0 } }

    /// What the caller that starts a call supplies.
    public struct Start: Sendable {
        /// The work whose result every caller of the key receives.
        public var operation: @Sendable () async throws -> Value
        /// Told once, after the operation succeeds, how many followers received its value (never 0), so
        /// counting coalesced callers costs one call, not one per follower.
        public var onShared: SharedHandler?

        /// Creates a start.
        public init(operation: @escaping @Sendable () async throws -> Value, onShared: SharedHandler? = nil) {
            self.operation = operation
            self.onShared = onShared
        }
    }

    /// The result of `operation`, and whether this caller joined a call already in flight.
    /// `onShared` and `operation` are kept only from the caller that starts the call (see ``Start``).
    public func run(
        _ key: Key, onShared: SharedHandler? = nil, operation: @escaping @Sendable () async throws -> Value
    ) async throws -> (value: Value, shared: Bool) {
        try await run(key) { Start(operation: operation, onShared: onShared) }
    }

    /// The result of the call for `key`, and whether this caller joined one already in flight.
    ///
    /// `start` is called only if this caller starts the call, under the coalescer's lock (so it must be
    /// quick and must not use this coalescer). A caller that joins thus allocates and retains nothing for
    /// an operation it will not run, and has nothing to release when it resumes along with the others
    /// (releases of shared objects from many cores at once contend for their reference counts).
    public func run(_ key: Key, starting start: () -> Start) async throws -> (value: Value, shared: Bool) {
        let waiterId = state.withLock { $0.makeId() }
        var joined = false
        let value = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                // Checked under the lock: a cancellation after this point finds the waiter registered.
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    if state.calls[key] != nil {
                        joined = true
                        state.calls[key]?.waiters[waiterId] = continuation
                    } else {
                        let callId = state.makeId()
                        let started = start()
                        var call = Call(id: callId, leader: waiterId, onShared: started.onShared)
                        call.waiters[waiterId] = continuation
                        call.task = Task { await self.execute(key, callId: callId, started.operation) }
                        state.calls[key] = call
                    }
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            leave(key, waiterId: waiterId)
        }
        return (value, joined)
    }

    /// Runs the operation and hands its result to every waiter still registered.
    private func execute(_ key: Key, callId: UInt64, _ operation: @Sendable () async throws -> Value) async {
        let result: Result<Value, any Error>
        do { result = .success(try await operation()) } catch { result = .failure(error) }
        let call = state.withLock { state -> Call? in
            guard let call = state.calls[key], call.id == callId else { return nil }
            state.calls[key] = nil
            return call
        }
        guard let call else { return }
        // Counted before anyone resumes, so a caller that has its value also sees it counted.
        let followers = call.waiters.count - (call.waiters[call.leader] == nil ? 0 : 1)
        if case .success = result, followers > 0 { call.onShared?(followers) }
        for waiter in call.waiters.values { waiter.resume(with: result) }
    }

    /// Removes a cancelled waiter; cancels the operation when it was the last one.
    private func leave(_ key: Key, waiterId: UInt64) {
        let (continuation, abandoned) = state.withLock { state -> (CheckedContinuation<Value, any Error>?, Task<Void, Never>?) in
            guard let continuation = state.calls[key]?.waiters.removeValue(forKey: waiterId) else { return (nil, nil) }
            guard state.calls[key]?.waiters.isEmpty == true else { return (continuation, nil) }
            let task = state.calls[key]?.task
            state.calls[key] = nil
            return (continuation, task)
        }
        continuation?.resume(throwing: CancellationError())
        abandoned?.cancel()
    }
}
