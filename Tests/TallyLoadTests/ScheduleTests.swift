import Foundation
import TallyLoad
import Testing

/// The pure parts of the load tool: the open-loop schedule, the mix, `/proc` parsing.
@Suite(.timeLimit(.minutes(1))) struct ScheduleTests {
    @Test func theOpenLoopScheduleIsFixedInAdvance() {
        let schedule = ArrivalSchedule(perSecond: 2_000)
        #expect(schedule.start(of: 0) == .zero)
        #expect(schedule.start(of: 2_000) == .seconds(1))
        #expect(schedule.start(of: 1) == .microseconds(500))
        #expect(schedule.due(at: .zero) == 1)
        #expect(schedule.due(at: .milliseconds(999)) == 1_999)
        #expect(schedule.due(at: .seconds(60)) == 120_001)
    }

    @Test func theMixFollowsItsWeights() {
        let weights: [OperationKind: Int] = [.walletRead: 3, .grant: 1]
        var counts: [OperationKind: Int] = [:]
        for step in 0..<4_000 { counts[OperationMix.pick(Double(step) / 4_000, from: weights), default: 0] += 1 }
        #expect(counts == [.walletRead: 3_000, .grant: 1_000])
        #expect(OperationMix.pick(0.999_999, from: [.hold: 1]) == .hold)
    }

    @Test func procStatParsing() {
        let stat = "4242 (tally serve) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 1000000 500"
        #expect(ProcFS.cpuSeconds(stat: stat) == 3.0)
        #expect(ProcFS.residentBytes(statm: "100000 2560 300 10 0 5000 0") == 2_560 * 4096)
        #expect(ProcFS.cpuSeconds(stat: "garbage") == nil)
        // A postmaster: its exited backends' CPU is in cutime and cstime (fields 16 and 17).
        let postmaster = "77 (postgres) S 1 77 77 0 -1 4194560 1000 0 0 0 250 50 400 300 20 0 9 0 100 1000000 500"
        #expect(ProcFS.cpuSecondsWithChildren(stat: postmaster) == 10.0)
        #expect(ProcFS.commandName(stat: postmaster) == "postgres" && ProcFS.commandName(stat: stat) == "tally serve")
        #expect(ProcFS.cpuSecondsWithChildren(stat: "garbage") == nil)
        let cost = OperationCost(
            operations: 2_000, start: CPUReading(servers: 1, database: 2), end: CPUReading(servers: 1.5, database: 2.25))
        #expect(cost.serverMicroseconds == 250 && cost.databaseMicroseconds == 125)
        // This machine's PostgreSQL processes, if any, have used some CPU; none is counted twice or negative.
        #expect(ProcFS.cpuSeconds(ofProcessesNamed: ["no such process name"]) == 0)
    }

    @Test func theGeneratorRepeatsWithItsSeed() {
        var a = SplitMix(seed: 7), b = SplitMix(seed: 7)
        #expect((0..<5).map { _ in a.next() } == (0..<5).map { _ in b.next() })
        #expect(a.hex(32).count == 32)
    }
}
