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

    /// `threads` threads (the machine's cores by default).
    init(threads: Int = System.coreCount) {
        self.threads = max(1, threads)
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
