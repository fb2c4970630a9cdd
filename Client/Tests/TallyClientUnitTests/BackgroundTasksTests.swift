import Foundation
@testable import TallyClient
import TallyTestKit
import Testing

/// The client's background work: kept while it runs, cancelled for the user who leaves, gone when it ends.
@Suite("Background tasks", .timeLimit(.minutes(1)))
struct BackgroundTasksTests {
    @Test("A change of user cancels the user's work only; work for data of no user goes on; ended tasks are forgotten")
    func cancelsTheUsersWorkOnly() async throws {
        let clock = ManualClock()
        let tasks = BackgroundTasks()
        let outcomes = Locked<[String]>([])
        for (name, isUserData) in [("user", true), ("shared", false)] {
            tasks.start(isUserData: isUserData) {
                let outcome = (try? await clock.sleep(for: 60)) == nil ? "cancelled" : "done"
                outcomes.withLock { $0.append("\(name) \(outcome)") }
            }
        }
        try await clock.waitForSleepers(2)
        #expect(tasks.count == 2)
        await tasks.cancelUserWork()  // returns once the user's task has ended
        #expect(tasks.count == 1)
        #expect(outcomes.withLock { $0 } == ["user cancelled"])
        #expect(clock.sleeperCount == 1)  // the shared task still waits
        clock.advance(by: 60)
        #expect(await eventually { tasks.count == 0 })
        #expect(outcomes.withLock { $0 } == ["user cancelled", "shared done"])
    }
}
