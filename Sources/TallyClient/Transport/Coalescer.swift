import Synchronization

/// Runs one operation per key at a time; callers that arrive while it runs share its result (Go's singleflight).
/// A caller that is cancelled stops waiting (throws CancellationError) without disturbing the others;
/// the shared operation itself is cancelled only when every waiter has gone. The key is forgotten when the operation ends.
public final class Coalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Call {
        /// Tells this call from a later one for the same key.
        let id: UInt64
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

    private let state = Mutex(State())

    /// Creates an empty coalescer.
    public init() {}

    /// How many keys have a call in flight.
    public var inFlightCount: Int { state.withLock { $0.calls.count } }

    /// How many callers wait for `key` (tests use it to know every caller has joined).
    func waiterCount(for key: Key) -> Int { state.withLock { $0.calls[key]?.waiters.count ?? 0 } }

    /// The result of `operation`, and whether this caller joined a call already in flight.
    public func run(_ key: Key, operation: @escaping @Sendable () async throws -> Value) async throws -> (value: Value, shared: Bool) {
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
                        var call = Call(id: callId)
                        call.waiters[waiterId] = continuation
                        call.task = Task { await self.execute(key, callId: callId, operation) }
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
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard let call = state.calls[key], call.id == callId else { return [] }
            state.calls[key] = nil
            return Array(call.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
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
