#if os(Linux)
import Dispatch
import Glibc
@testable import TallyServer
import Testing

/// Where ``BulkWork`` runs work, told by the thread's nice value: its threads run at ``BulkWork/niceness``, the
/// cooperative threads at the process's own.
@Suite("AI gateway: bulk work on the calling task or the low-priority threads", .timeLimit(.minutes(1)))
struct BulkWorkTests {
    @Test("Work up to inlineBytes runs on the calling task, one caller at a time; a second caller meanwhile and larger work go to the threads")
    func inlineOneAtATime() async throws {
        let bulk = BulkWork(threads: 1)
        let own = Self.niceness()
        #expect(own != BulkWork.niceness)
        #expect(try await bulk.run(bytes: BulkWork.inlineBytes) { Self.niceness() } == own, "a photo's size: here")
        #expect(try await bulk.run(bytes: BulkWork.inlineBytes + 1) { Self.niceness() } == BulkWork.niceness, "larger: the threads")
        #expect(try await bulk.run { Self.niceness() } == BulkWork.niceness, "without a size: the threads")

        // The first caller's work waits inside until the second caller's has run: the second cannot have run here.
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        async let first = bulk.run(bytes: 1) { () -> Int32 in
            started.signal()
            release.wait()
            return Self.niceness()
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                started.wait()
                done.resume()
            }
        }
        let second = try await bulk.run(bytes: 1) { Self.niceness() }
        release.signal()
        #expect(try await first == own)
        #expect(second == BulkWork.niceness, "one caller at a time on the calling task")
        #expect(try await bulk.run(bytes: 1) { Self.niceness() } == own, "free again once the first returned")

        // A failure gives the calling task back too.
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await bulk.run(bytes: 1) { () -> Int32 in throw Failure() } }
        #expect(try await bulk.run(bytes: 1) { Self.niceness() } == own)
    }

    /// The calling thread's nice value.
    static func niceness() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
    }
}
#endif
