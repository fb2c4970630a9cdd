import Dispatch
import Foundation
import Synchronization

/// Threads that spin until stopped, so that what a test runs meanwhile competes for the CPU with them (a phone busy
/// with other work: answers and cancellations then land at every moment of a request's life, not only between them).
final class CPUBurners: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    private let count: Int

    /// Starts `count` busy threads.
    init(count: Int) {
        self.count = count
        for index in 0..<count {
            let thread = Thread { [self] in
                var x: UInt64 = 0x9E37_79B9_7F4A_7C15
                while !stopped.load(ordering: .relaxed) {
                    for _ in 0..<10_000 { x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407 }
                }
                if x == 42 { print("") }  // keeps the loop from being optimised away
                exited.signal()
            }
            thread.name = "cpu-burner-\(index)"
            thread.start()
        }
    }

    /// Stops the threads and returns once each has ended.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        for _ in 0..<count { exited.wait() }
    }
}

/// Bounds each call of a test: a call that returns after its limit fails the test; a call that does not return within
/// its limit and a grace period stops the process with the calls in flight named. It watches from a dispatch timer,
/// not from a task: a deadlock that holds the cooperative pool's threads would also stop a time limit kept by a task.
final class CallWatchdog: Sendable {
    private struct Call {
        let name: String
        let started: DispatchTime
        let limit: TimeInterval
    }

    private let calls = Mutex<[UInt64: Call]>([:])
    /// Seconds spent in each kind of call (its name up to " at "), and how many.
    private let spent = Mutex<[String: (seconds: TimeInterval, count: Int)]>([:])
    private let nextId = Atomic<UInt64>(0)
    // Set once in init; DispatchSource is thread-safe.
    private nonisolated(unsafe) let timer: any DispatchSourceTimer
    /// How long past its limit a call may stay in flight before the process is stopped.
    let grace: TimeInterval

    /// Starts watching; `grace` is how long past its limit a call may stay before the process stops.
    init(grace: TimeInterval = 60) {
        self.grace = grace
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "call-watchdog"))
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { [weak self] in self?.check() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// Stops the process when a call has been in flight longer than its limit and the grace period.
    private func check() {
        let now = DispatchTime.now()
        let (overdue, inFlight) = calls.withLock { calls in
            (
                calls.values.first { Self.seconds(from: $0.started, to: now) > $0.limit + grace },
                calls.values.map { "\($0.name) (\(Int(Self.seconds(from: $0.started, to: now))) s)" }
            )
        }
        guard let overdue else { return }
        fatalError("CallWatchdog: \(overdue.name) has not returned \(Int(overdue.limit + grace)) s after it started; in flight: \(inFlight)")
    }

    /// Stops watching.
    func stop() { timer.cancel() }

    /// `body`'s value; throws when it took longer than `limit` seconds.
    func call<T>(_ name: String, limit: TimeInterval, _ body: () async throws -> T) async throws -> T {
        let id = nextId.add(1, ordering: .relaxed).newValue
        let started = DispatchTime.now()
        calls.withLock { $0[id] = Call(name: name, started: started, limit: limit) }
        defer { _ = calls.withLock { $0.removeValue(forKey: id) } }
        let value = try await body()
        let elapsed = Self.seconds(from: started, to: DispatchTime.now())
        let kind = name.components(separatedBy: " at ").first ?? name
        spent.withLock { $0[kind, default: (0, 0)].seconds += elapsed; $0[kind, default: (0, 0)].count += 1 }
        if elapsed > limit { throw TestFailure("\(name) returned after \(String(format: "%.1f", elapsed)) s, over its \(Int(limit)) s limit") }
        return value
    }

    /// The time spent in each kind of call, most first: for a test's log.
    var summary: String {
        spent.withLock { spent in
            spent.sorted { $0.value.seconds > $1.value.seconds }
                .map { "\($0.key): \(String(format: "%.1f", $0.value.seconds)) s in \($0.value.count)" }.joined(separator: ", ")
        }
    }

    private static func seconds(from start: DispatchTime, to end: DispatchTime) -> TimeInterval {
        Double(end.uptimeNanoseconds &- start.uptimeNanoseconds) / 1e9
    }
}
