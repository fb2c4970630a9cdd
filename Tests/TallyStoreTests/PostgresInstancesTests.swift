import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// The running instances' rows on PostgreSQL: a process whose keys disagree is refused while another runs, and a
/// process that stopped beating no longer counts after ``PostgresStore/instanceStaleness`` of the store's clock.
@Suite("PostgreSQL running instances", .timeLimit(.minutes(10)))
struct PostgresInstancesTests {
    struct Refused: Error {
        let message: String
    }

    static func instance(_ name: String, signing: [String], clock: ManualClock) -> ServerInstance {
        ServerInstance(
            id: "\(name)-\(UUID().uuidString)", host: name, pid: 1, signingKeys: signing, adminKey: "adminfingerprint",
            startedAt: clock.now, seenAt: clock.now)
    }

    /// `nil` when `instance` joined, else why it was refused.
    static func join(_ store: PostgresStore, _ instance: ServerInstance) async throws -> String? {
        do {
            try await store.join(instance) { running in
                if let refusal = KeyAgreement.refusal(instance, running: running) { throw Refused(message: refusal) }
            }
            return nil
        } catch let refused as Refused {
            return refused.message
        }
    }

    @Test("Refused while the other beats; counted no more once its heartbeat stops for the stated time (a crash)")
    func heartbeatAndStaleness() async throws {
        let clock = ManualClock()
        try await withPostgresStore(isolated: true, clock: clock) { store in
            let first = Self.instance("a", signing: ["k1k1k1k1k1"], clock: clock)
            #expect(try await Self.join(store, first) == nil)
            let second = Self.instance("b", signing: ["k2k2k2k2k2"], clock: clock)
            #expect(try await Self.join(store, second)?.hasPrefix("TALLY_SIGNING_KEY differs") == true)
            #expect(try await store.runningInstances().map(\.id) == [first.id], "the refused one wrote nothing")

            let heartbeat = Task { await InstanceHeartbeat(store: store) { first }.run() }
            // Four times the staleness, beat by beat: the revocation poller and the heartbeat sleep on the clock.
            let beats = Int(4 * PostgresStore.instanceStaleness / PostgresStore.instanceHeartbeat)
            for _ in 0..<beats {
                try await clock.waitForSleepers(2)
                clock.advance(by: PostgresStore.instanceHeartbeat)
            }
            try await clock.waitForSleepers(2)
            #expect(try await store.runningInstances().first?.seenAt == clock.now, "the last beat wrote the clock's time")
            #expect(try await Self.join(store, second) != nil, "still refused: the first beats")

            // The first process dies (its task torn down, no graceful stop): its row stays, and counts until stale.
            heartbeat.cancel()
            await heartbeat.value
            clock.advance(by: PostgresStore.instanceStaleness - 1)
            #expect(try await Self.join(store, second) != nil, "refused 29 s after the last beat")
            clock.advance(by: 1)
            #expect(try await Self.join(store, second) == nil, "30 s after the last beat the first no longer counts")
            #expect(try await store.runningInstances().map(\.id) == [second.id], "the stale row was deleted")
            try await store.leave(id: second.id)
            #expect(try await store.runningInstances().isEmpty)
        }
    }

    @Test("Two processes with disagreeing keys joining at once: exactly one runs")
    func concurrentJoins() async throws {
        let clock = ManualClock()
        try await withPostgresStore(isolated: true, clock: clock) { store in
            for round in 0..<10 {
                let instances = (0..<4).map { Self.instance("p\($0)", signing: ["key-of-\($0)"], clock: clock) }
                let refusals = try await withThrowingTaskGroup(of: String?.self) { group in
                    for instance in instances { group.addTask { try await Self.join(store, instance) } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(refusals.filter { $0 == nil }.count == 1, "round \(round): \(refusals)")
                #expect(try await store.runningInstances().count == 1)
                for instance in instances { try await store.leave(id: instance.id) }
            }
        }
    }
}
