import Foundation

/// Group commit, and grouped reads, for PostgreSQL: the statements of one kind that arrive while earlier
/// ones are in the database go out together, as one statement (and, for writes, one commit). The store
/// keeps one batcher for the optimistic ledger writes and one each for wallet and account reads. (The
/// embedded store batches writes on its single writer thread instead, see TallySQLite's `WriterQueue`, and
/// reads from memory.)
///
/// No timer and no task of its own. A request that finds fewer than ``maximumInFlight`` batches running
/// sends itself at once (so an idle server adds no latency); otherwise it queues. A task whose batch is
/// done hands the queue (up to ``maximumBatch`` requests) to the first queued task, which sends it. Under
/// load a batch is what arrived during the previous one's round trip: the busier the server, the fewer
/// statements and commits per request and the fewer hand-offs to a database thread (measured on
/// PostgreSQL: eight actions in one statement cost it about a third of eight single ones).
///
/// A batch is only a shared transport: each request gets its own answer. When the batch fails as a whole
/// (on PostgreSQL a key stored meanwhile by another process, or a deadlock with another process's batch),
/// every request of a batch of several is told to go again on its own (``BatchFailed``), where a failure
/// is reported only to the request that caused it.
package final class StatementBatcher<Request: Sendable, Answer: Sendable>: @unchecked Sendable {
    /// How many batches may be in the database at once.
    package let maximumInFlight: Int
    /// The most requests in one batch.
    package let maximumBatch: Int

    /// What a queued request is told when its turn comes.
    private enum Turn {
        /// Send these requests (after the task's own) as the next batch.
        case lead([Queued])
        /// The batch that carried the request is done: its answer (`nil`: see ``submit(_:send:)``).
        case done(Result<Answer?, any Error>)
    }

    private struct Queued {
        let request: Request
        let turn: CheckedContinuation<Turn, Never>
    }

    private let lock = NSLock()
    private var queue: [Queued] = []
    private var inFlight = 0

    /// How many requests wait for a slot.
    package var waiting: Int { lock.withLock { queue.count } }

    /// A batch that failed as a whole: the request goes again on its own.
    package struct BatchFailed: Error {}

    /// A batcher that keeps at most `maximumInFlight` batches of at most `maximumBatch` requests in the database.
    package init(maximumInFlight: Int = 2, maximumBatch: Int = 64) {
        precondition(maximumInFlight >= 1 && maximumBatch >= 1)
        self.maximumInFlight = maximumInFlight
        self.maximumBatch = maximumBatch
    }

    /// Sends `request` with the requests waiting at the same time. `send` runs one batch and returns, by the
    /// requests' positions, each one's answer (`nil` where there is none: a write whose wallet moved, a read
    /// of an account that does not exist); it runs in whichever caller leads the batch. Throws what the
    /// statement threw when `request` was sent alone, or ``BatchFailed`` when a batch of several failed.
    package func submit(_ request: Request, send: ([Request]) async throws -> [Answer?]) async throws -> Answer? {
        let turn = await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            let leads = lock.withLock {
                guard inFlight < maximumInFlight else {
                    queue.append(Queued(request: request, turn: continuation))
                    return false
                }
                inFlight += 1
                return true
            }
            if leads { continuation.resume(returning: .lead([])) }
        }
        switch turn {
        case .done(let result):
            return try result.get()
        case .lead(let others):
            let outcome: Result<[Answer?], any Error>
            do {
                let results = try await send([request] + others.map(\.request))
                precondition(results.count == others.count + 1, "one answer per request")
                outcome = .success(results)
            } catch {
                outcome = .failure(error)
            }
            handOver()
            for (index, queued) in others.enumerated() {
                switch outcome {
                case .success(let results): queued.turn.resume(returning: .done(.success(results[index + 1])))
                case .failure: queued.turn.resume(returning: .done(.failure(BatchFailed())))
                }
            }
            switch outcome {
            case .success(let results): return results[0]
            case .failure(let error) where others.isEmpty: throw error
            case .failure: throw BatchFailed()
            }
        }
    }

    /// ``submit(_:send:)``, and when the request's batch failed as a whole (``BatchFailed``), `send` again
    /// with the request alone, so that only its own failure reaches the caller.
    package func submitOrSendAlone(_ request: Request, send: ([Request]) async throws -> [Answer?]) async throws -> Answer? {
        do {
            return try await submit(request, send: send)
        } catch is BatchFailed {
            return try await send([request])[0]
        }
    }

    /// Gives this batch's slot to the first queued request, with the requests behind it, or frees it.
    private func handOver() {
        let next: (leader: Queued, others: [Queued])? = lock.withLock {
            guard !queue.isEmpty else {
                inFlight -= 1
                return nil
            }
            let count = min(queue.count, maximumBatch)
            let batch = Array(queue.prefix(count))
            queue.removeFirst(count)
            return (batch[0], Array(batch.dropFirst()))
        }
        if let next { next.leader.turn.resume(returning: .lead(next.others)) }
    }
}
