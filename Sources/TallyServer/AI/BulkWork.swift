#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Threads for work measured in megabytes — a chat body with images read, checked and written again (tens of
/// milliseconds) — at a lower scheduling priority than the event loops and the concurrency pool, so that while
/// they run, every short request (a wallet read beside a crowd of uploads) still gets a core the moment it needs
/// one. A service: the threads start on first use and stop with the application.
final class BulkWork: Service, Sendable {
    /// The nice value of the threads on Linux (0 is the default; 19 the lowest priority): a thread at 10 gets about
    /// a tenth of a contended core beside one at 0, and yields to it as it wakes.
    static let niceness: Int32 = 10

    private let threads: Int
    private let pool = Mutex<(pool: NIOThreadPool?, closed: Bool)>((nil, false))
    /// Whether a caller is running work of at most ``inlineBytes`` itself (``run(bytes:_:)``).
    private let inlineBusy = Atomic<Bool>(false)

    /// Work on at most this many bytes (a chat body with a photo: a megabyte is read, checked and written again in
    /// about a third of a millisecond) runs on the calling task, one caller at a time: the hop to the threads and
    /// back costs as much as the work, and more under load, where the threads wait behind everything else (a 769 KiB
    /// PNG question at 6 streams, `scripts/bench-ai`'s peers: the gateway's own time p99 2.7 ms against 5.5
    /// offloaded). A second caller meanwhile, or larger work, goes to the threads, so the cooperative threads never
    /// hold more than one such piece of work.
    static let inlineBytes = 2 * 1024 * 1024

    /// `threads` threads (the machine's cores by default).
    init(threads: Int = System.coreCount) {
        self.threads = max(1, threads)
    }

    /// Runs `work`, which handles `bytes` bytes, and returns its result: on the calling task when it is at most
    /// ``inlineBytes`` and no other caller runs such work itself now, else on one of the threads.
    func run<T: Sendable>(bytes: Int, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        if bytes <= Self.inlineBytes, inlineBusy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            defer { inlineBusy.store(false, ordering: .releasing) }
            return try work()
        }
        return try await run(work)
    }

    /// Runs `work` on one of the threads and returns its result.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await started().runIfActive {
            Self.lowerPriority()
            return try work()
        }
    }

    private func started() throws -> NIOThreadPool {
        try pool.withLock { state in
            if let pool = state.pool { return pool }
            guard !state.closed else { throw NIOThreadPoolError.ThreadPoolInactive() }
            let pool = NIOThreadPool(numberOfThreads: threads)
            pool.start()
            state.pool = pool
            return pool
        }
    }

    /// Lowers the calling thread's priority (Linux: `setpriority` with 0 names the calling thread); once lowered, it
    /// stays so (an unprivileged process cannot raise it again), which is what a thread of this pool wants.
    private static func lowerPriority() {
        #if os(Linux)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
        #endif
    }

    /// Waits for the application's graceful shutdown, then stops the threads.
    func run() async throws {
        try? await gracefulShutdown()
        let made = pool.withLock { state in
            state.closed = true
            defer { state.pool = nil }
            return state.pool
        }
        try await made?.shutdownGracefully()
    }

    deinit {
        // Routes built but never served as a service (an embedding app's tests): stop without waiting.
        pool.withLock { $0.pool }?.shutdownGracefully { _ in }
    }
}
