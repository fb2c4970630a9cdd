import NIOCore

/// Runs a task's jobs on the event loop of one connection. ``PostgresPool/withConnection(_:)`` runs each lease's body
/// on its connection's loop, and ``PooledConnection/execute(_:logger:)``'s task too: a statement is written, and its
/// answer resumes the caller, on the thread that reads the connection, with no hand-off to the cooperative pool's
/// threads and back at every round trip. A document write is five round trips; under `tally bench-events` on
/// PostgreSQL the server spent a fifth of its CPU switching threads, and this took ~5 % off its CPU per write.
final class ConnectionExecutor: TaskExecutor {
    /// The loop every job runs on.
    let eventLoop: any EventLoop

    /// An executor whose jobs run on `eventLoop`.
    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Runs `job` on the loop.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
