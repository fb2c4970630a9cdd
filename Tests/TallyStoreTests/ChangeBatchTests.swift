import Foundation
import TallyStore
import Testing

/// The NOTIFY payloads that carry change events between server processes: coalescing, packing under
/// PostgreSQL's payload limit, and decoding.
@Suite("Change batches", .timeLimit(.minutes(1)))
struct ChangeBatchTests {
    static let limit = 7_999

    @Test("Events of one user coalesce: the newest document version, one wallet, every ended session")
    func coalesces() {
        let user = UUID().uuidString.lowercased()
        var batch = ChangeBatch()
        for version in [3, 9, 4] as [Int64] { batch.add(.documents(userId: user, version: version)) }
        for _ in 0..<5 { batch.add(.wallet(userId: user)) }
        batch.add(.sessionEnded(userId: user, sessionId: "s1"))
        batch.add(.sessionEnded(userId: user, sessionId: "s2"))
        batch.add(.sessionEnded(userId: user, sessionId: "s1"))
        #expect(batch.userCount == 1)
        #expect(
            Set(batch.events)
                == [
                    .documents(userId: user, version: 9), .wallet(userId: user), .sessionEnded(userId: user, sessionId: "s1"),
                    .sessionEnded(userId: user, sessionId: "s2"),
                ])
        let payloads = batch.payloads(origin: "abc", limit: Self.limit)
        #expect(payloads.count == 1)
        #expect(payloads.first.flatMap { ChangeBatch.decode($0) }.map { Set($0.events) } == Set(batch.events))
    }

    @Test("A burst of many users packs into as few payloads as the limit allows, each under it, losing nothing")
    func packsUnderTheLimit() throws {
        let users = (0..<2_000).map { _ in UUID().uuidString.lowercased() }
        var batch = ChangeBatch()
        for (index, user) in users.enumerated() {
            batch.add(.wallet(userId: user))
            batch.add(.documents(userId: user, version: Int64(index)))
        }
        let payloads = batch.payloads(origin: "origin-1", limit: Self.limit)
        #expect(payloads.allSatisfy { $0.utf8.count <= Self.limit })
        // Each user's two lines are about 40 bytes each: the batch is about 160 KB, some twenty payloads.
        #expect((20...22).contains(payloads.count), "\(payloads.count) payloads")
        #expect(payloads.dropLast().allSatisfy { $0.utf8.count > Self.limit - 64 }, "each payload but the last is full")
        var decoded: [ChangeEvent] = []
        for payload in payloads {
            let (origin, events, lost) = try #require(ChangeBatch.decode(payload))
            #expect(origin == "origin-1" && !lost)
            decoded += events
        }
        #expect(decoded.count == 4_000)
        #expect(Set(decoded) == Set(batch.events))
    }

    @Test("Beyond its bound a batch stops collecting new users and says events were lost")
    func bounded() throws {
        var batch = ChangeBatch()
        for index in 0..<10 { batch.add(.wallet(userId: "u\(index)"), maxUsers: 4) }
        batch.add(.documents(userId: "u1", version: 7), maxUsers: 4)  // a known user still coalesces
        #expect(batch.userCount == 4 && batch.lostEvents)
        let payload = try #require(batch.payloads(origin: "o", limit: Self.limit).first)
        #expect(try #require(ChangeBatch.decode(payload)).lostEvents)
        #expect(try #require(ChangeBatch.decode(payload)).events.contains(.documents(userId: "u1", version: 7)))
    }

    @Test("Decoding skips what it does not understand and refuses payloads that are not Tally's")
    func decodesStrictly() throws {
        #expect(ChangeBatch.decode("") == nil)
        #expect(ChangeBatch.decode("hello world") == nil)
        #expect(ChangeBatch.decode("tally1") == nil)
        let (origin, events, lost) = try #require(
            ChangeBatch.decode("tally1 p1\nc u1 12\nc u2 twelve\nw\nw u3\nx u4\ns u5 s5\nd u6\nc u7 1 extra\n"))
        #expect(origin == "p1" && !lost)
        #expect(
            events == [
                .documents(userId: "u1", version: 12), .wallet(userId: "u3"), .sessionEnded(userId: "u5", sessionId: "s5"),
                .accountDeleted(userId: "u6"),
            ])
    }

    @Test("An id that cannot travel in a line is never encoded")
    func refusesUnsafeIds() {
        var batch = ChangeBatch()
        batch.add(.wallet(userId: "a b"))
        batch.add(.wallet(userId: "a\nw victim"))
        batch.add(.wallet(userId: ""))
        batch.add(.wallet(userId: String(repeating: "x", count: ChangeBatch.maxIdBytes + 1)))
        batch.add(.sessionEnded(userId: "ok", sessionId: "s\n1"))
        #expect(batch.isEmpty)
    }
}
