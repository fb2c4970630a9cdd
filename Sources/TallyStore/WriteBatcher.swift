import Foundation

/// Group commit for PostgreSQL: the writes that arrive while earlier ones are in the database go out
/// together, as one statement and one commit. (The embedded store batches on its single writer thread
/// instead, see TallySQLite's `WriterQueue`.)
///
/// No timer and no task of its own. A write that finds fewer than ``maximumInFlight`` batches running sends
/// itself at once (so an idle server adds no latency); otherwise it queues. A task whose batch is done
/// hands the queue (up to ``maximumBatch`` writes) to the first queued task, which sends it. Under load a
/// batch is what arrived during the previous one's round trip: the busier the server, the fewer commits
/// per write and the fewer hand-offs to a database thread (measured on PostgreSQL: eight actions in one
/// statement cost it about a third of eight single ones).
///
/// A batch is only a shared transport: each write gets its own result. When the batch fails as a whole
/// (on PostgreSQL a key stored meanwhile by another process, or a deadlock with another process's batch),
/// every write of a batch of several is told to go again on its own (``BatchFailed``), where a failure is
/// reported only to the write that caused it.
package final class WriteBatcher<Write: Sendable, Written: Sendable>: @unchecked Sendable {
    /// How many batches may be in the database at once.
    package let maximumInFlight: Int
    /// The most writes in one batch.
    package let maximumBatch: Int

    /// What a queued write is told when its turn comes.
    private enum Turn {
        /// Send these writes (after the task's own) as the next batch.
        case lead([Queued])
        /// The batch that carried the write is done: its result, or `nil` when its wallet moved.
        case done(Result<Written?, any Error>)
    }

    private struct Queued {
        let write: Write
        let turn: CheckedContinuation<Turn, Never>
    }

    private let lock = NSLock()
    private var queue: [Queued] = []
    private var inFlight = 0

    /// How many writes wait for a slot.
    package var waiting: Int { lock.withLock { queue.count } }

    /// A batch that failed as a whole: the write goes again on its own.
    package struct BatchFailed: Error {}

    package init(maximumInFlight: Int = 2, maximumBatch: Int = 64) {
        precondition(maximumInFlight >= 1 && maximumBatch >= 1)
        self.maximumInFlight = maximumInFlight
        self.maximumBatch = maximumBatch
    }

    /// Sends `write` with the writes waiting at the same time. `send` runs one batch and returns, by the
    /// writes' positions, each one's result (`nil`: not written, such as a wallet that moved); it runs in whichever caller leads the
    /// batch. Throws what the statement threw when `write` was sent alone, or ``BatchFailed`` when a batch
    /// of several failed.
    package func write(_ write: Write, send: ([Write]) async throws -> [Written?]) async throws -> Written? {
        let turn = await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            let leads = lock.withLock {
                guard inFlight < maximumInFlight else {
                    queue.append(Queued(write: write, turn: continuation))
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
            let outcome: Result<[Written?], any Error>
            do {
                let results = try await send([write] + others.map(\.write))
                precondition(results.count == others.count + 1, "one result per write")
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

    /// Gives this batch's slot to the first queued write, with the writes behind it, or frees it.
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
