import Synchronization
import Testing

@testable import TallyClient

/// A one-shot latch: `wait()` suspends until `open()`; a cancelled waiter throws `CancellationError`.
private final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var nextId = 0
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    }

    private let state = Mutex(State())

    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async throws {
        let id = state.withLock { state in
            state.nextId += 1
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let result: Result<Void, any Error>? = state.withLock { state in
                    if state.isOpen { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let result { continuation.resume(with: result) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }
}

/// A thread-safe counter.
private final class RunCounter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// What a coalescer's `onShared` handlers were told, in order.
private final class SharedReports: Sendable {
    private let counts = Mutex<[Int]>([])
    func record(_ count: Int) { counts.withLock { $0.append(count) } }
    var all: [Int] { counts.withLock { $0 } }
}

private struct Boom: Error, Equatable {}

@Suite(.timeLimit(.minutes(1))) struct CoalescerTests {
    /// Yields until `count` callers wait for `key`.
    private func waitForWaiters<K, V>(_ coalescer: Coalescer<K, V>, _ key: K, _ count: Int) async throws {
        try await waitUntil { coalescer.waiterCount(for: key) >= count }
    }

    @Test func thousandConcurrentCallsRunOnce() async throws {
        let coalescer = Coalescer<String, Int>()
        let gate = Gate()
        let runs = RunCounter()
        let results = try await withThrowingTaskGroup(of: (value: Int, shared: Bool).self) { group in
            for _ in 0..<1000 {
                group.addTask {
                    try await coalescer.run("wallet") {
                        runs.increment()
                        try await gate.wait()
                        return 42
                    }
                }
            }
            try await waitForWaiters(coalescer, "wallet", 1000)
            #expect(coalescer.inFlightCount == 1)
            gate.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(runs.count == 1)
        #expect(results.count == 1000)
        #expect(results.allSatisfy { $0.value == 42 })
        #expect(results.count(where: \.shared) == 999)
        #expect(coalescer.inFlightCount == 0)
    }

    @Test func followersAreReportedOnceWhenTheCallSucceeds() async throws {
        let coalescer = Coalescer<String, Int>()
        let gate = Gate()
        let reports = SharedReports()
        let operation: @Sendable () async throws -> Int = {
            try await gate.wait()
            return 5
        }
        let leader = Task { try await coalescer.run("k", onShared: { reports.record($0) }, operation: operation) }
        try await waitForWaiters(coalescer, "k", 1)
        let followers = (0..<3).map { _ in
            Task {
                try await coalescer.run("k", onShared: { _ in Issue.record("only the first caller's handler is kept") }, operation: operation)
            }
        }
        try await waitForWaiters(coalescer, "k", 4)
        // The caller that started the call leaves, and so does one follower: two followers get the value.
        leader.cancel()
        followers[0].cancel()
        await #expect(throws: CancellationError.self) { try await leader.value }
        await #expect(throws: CancellationError.self) { try await followers[0].value }
        gate.open()
        for follower in followers.dropFirst() {
            let result = try await follower.value
            #expect(result.value == 5 && result.shared)
        }
        #expect(reports.all == [2])

        // A failed call reports nothing; neither does a call nobody joined.
        let failing = Gate()
        let first = Task {
            try await coalescer.run("k", onShared: { reports.record($0) }) {
                try await failing.wait()
                throw Boom()
            }
        }
        try await waitForWaiters(coalescer, "k", 1)
        let second = Task { try await coalescer.run("k") { 0 } }
        try await waitForWaiters(coalescer, "k", 2)
        failing.open()
        await #expect(throws: Boom.self) { try await first.value }
        await #expect(throws: Boom.self) { try await second.value }
        _ = try await coalescer.run("k", onShared: { reports.record($0) }) { 1 }
        #expect(reports.all == [2])
    }

    @Test func errorsAreShared() async throws {
        let coalescer = Coalescer<String, Int>()
        let gate = Gate()
        let runs = RunCounter()
        let operation: @Sendable () async throws -> Int = {
            runs.increment()
            try await gate.wait()
            throw Boom()
        }
        let first = Task { try await coalescer.run("k", operation: operation) }
        let second = Task { try await coalescer.run("k", operation: operation) }
        try await waitForWaiters(coalescer, "k", 2)
        gate.open()
        await #expect(throws: Boom.self) { try await first.value }
        await #expect(throws: Boom.self) { try await second.value }
        #expect(runs.count == 1)
        #expect(coalescer.inFlightCount == 0)
    }

    @Test func aCancelledWaiterLeavesWithoutDisturbingOthers() async throws {
        let coalescer = Coalescer<String, Int>()
        let gate = Gate()
        let runs = RunCounter()
        let operation: @Sendable () async throws -> Int = {
            runs.increment()
            try await gate.wait()
            return 7
        }
        let stayer = Task { try await coalescer.run("k", operation: operation) }
        try await waitForWaiters(coalescer, "k", 1)
        let leaver = Task { try await coalescer.run("k", operation: operation) }
        try await waitForWaiters(coalescer, "k", 2)
        leaver.cancel()
        // The cancelled caller returns while the operation is still blocked.
        await #expect(throws: CancellationError.self) { try await leaver.value }
        #expect(coalescer.waiterCount(for: "k") == 1)
        gate.open()
        let result = try await stayer.value
        #expect(result.value == 7 && !result.shared)
        #expect(runs.count == 1)
    }

    @Test func operationIsCancelledWhenEveryWaiterLeaves() async throws {
        let coalescer = Coalescer<String, Int>()
        let never = Gate()
        let operationCancelled = Gate()
        let operation: @Sendable () async throws -> Int = {
            do {
                try await never.wait()
            } catch {
                operationCancelled.open()
                throw error
            }
            return 1
        }
        let first = Task { try await coalescer.run("k", operation: operation) }
        let second = Task { try await coalescer.run("k", operation: operation) }
        try await waitForWaiters(coalescer, "k", 2)
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        #expect(coalescer.inFlightCount == 1)
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(coalescer.inFlightCount == 0)
        try await operationCancelled.wait()  // returns only because the shared operation saw cancellation
    }

    @Test func aCallerCancelledBeforeJoiningNeverStartsTheOperation() async throws {
        let coalescer = Coalescer<String, Int>()
        let runs = RunCounter()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await coalescer.run("k") {
                runs.increment()
                return 1
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(runs.count == 0)
        #expect(coalescer.inFlightCount == 0)
    }

    @Test func aCompletedKeyIsForgotten() async throws {
        let coalescer = Coalescer<String, Int>()
        let runs = RunCounter()
        let operation: @Sendable () async throws -> Int = {
            runs.increment()
            return runs.count
        }
        let first = try await coalescer.run("k", operation: operation)
        let second = try await coalescer.run("k", operation: operation)
        #expect(first.value == 1 && !first.shared)
        #expect(second.value == 2 && !second.shared)
        #expect(coalescer.inFlightCount == 0)
    }

    @Test func differentKeysRunIndependently() async throws {
        let coalescer = Coalescer<String, String>()
        let gateA = Gate()
        let a = Task {
            try await coalescer.run("a") {
                try await gateA.wait()
                return "a"
            }
        }
        try await waitForWaiters(coalescer, "a", 1)
        let b = try await coalescer.run("b") { "b" }
        #expect(b.value == "b" && !b.shared)
        #expect(coalescer.inFlightCount == 1)
        gateA.open()
        let resultA = try await a.value
        #expect(resultA.value == "a" && !resultA.shared)
    }

    @Test func racingCancellationsNeitherHangNorLeak() async throws {
        let coalescer = Coalescer<Int, Int>()
        let gate = Gate()
        let tasks = (0..<400).map { index in
            Task {
                try await coalescer.run(index % 4) {
                    try await gate.wait()
                    return index % 4
                }
            }
        }
        for (index, task) in tasks.enumerated() where index % 2 == 0 { task.cancel() }
        gate.open()
        var values = 0
        for (index, task) in tasks.enumerated() {
            do {
                let result = try await task.value
                #expect(result.value == index % 4)
                values += 1
            } catch {
                #expect(error is CancellationError)
                #expect(index % 2 == 0, "only cancelled callers may be cancelled")
            }
        }
        #expect(values >= 200)
        #expect(coalescer.inFlightCount == 0)
    }
}
