import Foundation

/// The client's signs that the server may be back (``ServerSign``), and the waits they end: the sync engine's
/// backoff and the event stream's reconnection sleep on the client's clock through ``wait(_:_:after:)``, and a sign
/// that ``SyncSchedule/ends(_:on:)`` says ends that kind of wait wakes them at once.
///
/// Signs are numbered. A waiter passes the number it read before the attempt that failed (``generation``), so a
/// sign that came while that attempt was in flight — after it was sent, before its failure was known — ends the
/// wait at once instead of being missed. ``signal(_:)`` is cheap (one lock): the request executor calls it for
/// every answer.
final class Reachability: Sendable {
    private struct Waiter {
        let kind: SyncWait
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var generation: UInt64 = 0
        /// The number of each kind of sign's last occurrence.
        var last: [ServerSign: UInt64] = [:]
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0

        /// Whether a sign that ends `kind` came after `generation`.
        func signed(since generation: UInt64, ending kind: SyncWait) -> Bool {
            last.contains { sign, number in number > generation && SyncSchedule.ends(kind, on: sign) }
        }
    }

    private let clock: any TallyClock
    private let state = Locked(State())

    /// Signs and waits on `clock`.
    init(clock: any TallyClock) { self.clock = clock }

    /// The number of the last sign: read it before an attempt, pass it to ``wait(_:_:after:)`` after its failure.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Records `sign` and wakes the waits it ends.
    func signal(_ sign: ServerSign) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation += 1
            state.last[sign] = state.generation
            guard !state.waiters.isEmpty else { return [] }
            let ended = state.waiters.filter { SyncSchedule.ends($0.value.kind, on: sign) }.keys
            return ended.compactMap { state.waiters.removeValue(forKey: $0)?.continuation }
        }
        for continuation in woken { continuation.resume() }
    }

    /// Sleeps `seconds` on the clock, unless a sign that ends `kind` comes (or came after `generation`) first.
    /// Returns true when a sign ended it; throws `CancellationError` when the calling task is cancelled.
    func wait(_ seconds: TimeInterval, _ kind: SyncWait, after generation: UInt64) async throws -> Bool {
        if state.withLock({ $0.signed(since: generation, ending: kind) }) { return true }
        let clock = self.clock
        let signed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await clock.sleep(for: seconds)
                return false
            }
            group.addTask {
                await self.sign(ending: kind, after: generation)
                return true
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        try Task.checkCancellation()
        return signed
    }

    /// Returns when a sign that ends `kind` comes (at once if one came after `generation`), or the task is cancelled.
    private func sign(ending kind: SyncWait, after generation: UInt64) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if Task.isCancelled || state.signed(since: generation, ending: kind) { return true }
                    state.waiters[id] = Waiter(kind: kind, continuation: continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }
}
