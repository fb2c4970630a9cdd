import NIOCore

/// Runs a task's jobs on one `EventLoop`: a stream's writes and its pacing timers then stay on the loop that owns
/// its connection, with no hand-off between threads for each token. dev-llm paces its streams with it, and
/// `tally-dev bench-ai` runs each of its workers on one, so the stand-in and the measuring client take as little as
/// they can of the CPU they share with the gateway they measure.
public final class EventLoopExecutor: TaskExecutor {
    /// The loop every job runs on.
    public let eventLoop: any EventLoop

    /// An executor whose jobs run on `eventLoop`.
    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Runs `job` on the loop.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }

    /// Waits `duration` on the loop's own timer (cancellable), instead of a timer thread that would wake the loop.
    public func sleep(for duration: Duration) async throws {
        guard duration > .zero else { return }
        try await sleep(until: .now() + TimeAmount(duration))
    }

    /// Waits until `deadline` on the loop's own timer (cancellable); returns at once when it has passed.
    public func sleep(until deadline: NIODeadline) async throws {
        guard deadline > .now() else { return }
        let scheduled = eventLoop.scheduleTask(deadline: deadline) {}
        try await withTaskCancellationHandler {
            try await scheduled.futureResult.get()
        } onCancel: {
            scheduled.cancel()
        }
    }
}
