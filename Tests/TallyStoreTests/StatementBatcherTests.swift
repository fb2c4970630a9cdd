import Foundation
import Synchronization
import Testing

import TallyPostgres

/// PostgreSQL's group-commit queue, without a database: `send` is a closure that records
/// the batches it is given and can be held until the test lets it go.
@Suite("StatementBatcher", .timeLimit(.minutes(1)))
struct StatementBatcherTests {
    struct Failure: Error, Equatable {}

    /// Records each batch; the first `held` batches wait in `send` until released.
    final class Sender: Sendable {
        let batches = Mutex<[[Int]]>([])
        let held = Mutex<[CheckedContinuation<Void, Never>]>([])
        let holdFirst: Int
        let failing: @Sendable ([Int]) -> Bool

        init(holdFirst: Int = 0, failing: @escaping @Sendable ([Int]) -> Bool = { _ in false }) {
            self.holdFirst = holdFirst
            self.failing = failing
        }

        func send(_ writes: [Int]) async throws -> [String?] {
            let index = batches.withLock { batches in
                batches.append(writes)
                return batches.count
            }
            if index <= holdFirst {
                await withCheckedContinuation { continuation in held.withLock { $0.append(continuation) } }
            }
            if failing(writes) { throw Failure() }
            // Odd writes "moved" (nil); even ones went through.
            return writes.map { $0 % 2 == 0 ? "written \($0)" : nil }
        }

        func releaseAll() { held.withLock { $0.forEach { $0.resume() }; $0.removeAll() } }
        var heldCount: Int { held.withLock { $0.count } }
        var queuedCount: Int { batches.withLock { $0.count } }
    }

    /// Waits (yielding, no clock) until `condition` holds.
    func eventually(_ condition: () -> Bool) async {
        while !condition() { await Task.yield() }
    }

    @Test("A write that finds a free slot is sent alone and at once")
    func aloneWhenIdle() async throws {
        let batcher = StatementBatcher<Int, String>(maximumInFlight: 1, maximumBatch: 8)
        let sender = Sender()
        #expect(try await batcher.submit(2, send: sender.send) == "written 2")
        #expect(try await batcher.submit(3, send: sender.send) == nil)
        #expect(sender.batches.withLock { $0 } == [[2], [3]])
    }

    @Test("Writes that arrive while a batch is out go together next, each with its own result")
    func queuedWritesShareABatch() async throws {
        let batcher = StatementBatcher<Int, String>(maximumInFlight: 1, maximumBatch: 64)
        let sender = Sender(holdFirst: 1)
        try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            group.addTask { (0, try await batcher.submit(0, send: sender.send)) }
            await eventually { sender.heldCount == 1 }
            for value in 1...20 { group.addTask { (value, try await batcher.submit(value, send: sender.send)) } }
            await eventually { batcher.waiting == 20 }
            // Nothing else was sent while the slot was taken.
            #expect(sender.queuedCount == 1)
            sender.releaseAll()
            var results: [Int: String?] = [:]
            for try await (value, result) in group { results[value] = result }
            for value in 0...20 {
                let expected: String? = value % 2 == 0 ? "written \(value)" : nil
                #expect(results[value] == .some(expected), "write \(value)")
            }
        }
        let batches = sender.batches.withLock { $0 }
        #expect(batches.count >= 2)
        #expect(batches.flatMap { $0 }.sorted() == Array(0...20))
        #expect(batches[1].count > 1, "the queued writes were batched: \(batches)")
    }

    @Test("A batch never holds more than maximumBatch writes, and several may be out at once")
    func limits() async throws {
        let batcher = StatementBatcher<Int, String>(maximumInFlight: 2, maximumBatch: 4)
        let sender = Sender(holdFirst: 2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = try await batcher.submit(100, send: sender.send) }
            group.addTask { _ = try await batcher.submit(102, send: sender.send) }
            await eventually { sender.heldCount == 2 }
            for value in 0..<10 { group.addTask { _ = try await batcher.submit(value, send: sender.send) } }
            await eventually { batcher.waiting == 10 }
            sender.releaseAll()
            try await group.waitForAll()
        }
        let batches = sender.batches.withLock { $0 }
        #expect(batches.allSatisfy { $0.count <= 4 })
        #expect(batches.flatMap { $0 }.sorted() == Array(0..<10) + [100, 102])
    }

    @Test("A failed batch of several tells each write to go alone; a failed write alone gets its own error")
    func failures() async throws {
        let batcher = StatementBatcher<Int, String>(maximumInFlight: 1, maximumBatch: 64)
        let sender = Sender(holdFirst: 1, failing: { $0.count > 1 })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = try await batcher.submit(0, send: sender.send) }
            await eventually { sender.heldCount == 1 }
            for value in 1...5 {
                group.addTask {
                    await #expect(throws: StatementBatcher<Int, String>.BatchFailed.self) {
                        try await batcher.submit(value * 2, send: sender.send)
                    }
                }
            }
            await eventually { batcher.waiting == 5 }
            sender.releaseAll()
            try await group.waitForAll()
        }
        let alone = StatementBatcher<Int, String>(maximumInFlight: 1, maximumBatch: 64)
        await #expect(throws: Failure.self) {
            try await alone.submit(4, send: { _ in throw Failure() })
        }
        // The slot was given back after the failure.
        #expect(try await alone.submit(6, send: sender.send) == "written 6")
    }
}
