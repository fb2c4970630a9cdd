import Foundation
import Testing

@testable import TallyClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``URLTaskAttempt`` on a task that never touches the network: its `resume()` runs what the test says (an answer that
/// comes before `start` returns, as a near server's stream head does on a busy machine), and its `cancel()` is counted.
@Suite("URLTaskAttempt", .timeLimit(.minutes(1)))
struct URLTaskAttemptTests {
    final class ScriptedTask: URLSessionDataTask, @unchecked Sendable {
        private let onResume: @Sendable () -> Void
        private let cancels = Locked(0)
        var cancelCount: Int { cancels.withLock { $0 } }

        init(onResume: @escaping @Sendable () -> Void) {
            self.onResume = onResume
            super.init()
        }

        override func resume() { onResume() }
        override func cancel() { cancels.withLock { $0 += 1 } }
        override var state: URLSessionTask.State { .running }
    }

    static func serialQueue() -> OperationQueue {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        return queue
    }

    /// Returns once what `queue` (serial) holds now has run.
    static func drain(_ queue: OperationQueue) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in queue.addOperation { done.resume() } }
    }

    @Test("A head answered before start() returns leaves the task running: its body is the stream")
    func answerDuringResumeKeepsTheTask() async throws {
        let queue = Self.serialQueue()
        let attempt = URLTaskAttempt<Int>(delegateQueue: queue)
        let task = ScriptedTask { attempt.answered(.success(200)) }
        let status = try await withCheckedThrowingContinuation { attempt.start(task, resuming: $0, deadline: 60) }
        #expect(status == 200)
        await Self.drain(queue)
        #expect(task.cancelCount == 0, "a stream whose head came first was cancelled")
    }

    @Test("The caller's cancellation and the deadline cancel the task, once")
    func cancellationAndDeadlineCancelTheTask() async throws {
        let queue = Self.serialQueue()
        let cancelled = URLTaskAttempt<Int>(delegateQueue: queue)
        let first = ScriptedTask { cancelled.cancel() }  // the caller cancelled while the task was being resumed
        await #expect(throws: CancellationError.self) {
            try await withCheckedThrowingContinuation { cancelled.start(first, resuming: $0, deadline: 60) }
        }
        let late = URLTaskAttempt<Int>(delegateQueue: queue)
        let second = ScriptedTask {}
        await #expect(throws: TransportError.timedOut) {
            try await withCheckedThrowingContinuation { late.start(second, resuming: $0, deadline: 0) }
        }
        late.answered(.success(200))  // an answer after the deadline changes nothing
        // The deadline's timer resumes the caller, then queues the cancel.
        for _ in 0..<10_000 where second.cancelCount == 0 { await Self.drain(queue) }
        await Self.drain(queue)
        #expect(first.cancelCount == 1 && second.cancelCount == 1)
    }
}
