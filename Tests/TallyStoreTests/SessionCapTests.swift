import Foundation
import TallyStore
import Testing

/// ``SessionCap``: which sessions opening one revokes, for both stores.
@Suite("SessionCap", .timeLimit(.minutes(1)))
struct SharedRulesSessionCapTests {
    @Test("Others kept: limit - 1, never below 0")
    func othersKept() {
        #expect([-1, 0, 1, 2, 5, 50].map { SessionCap.othersKept(limit: $0) } == [0, 0, 0, 1, 4, 49])
    }

    @Test("The oldest beyond the cap, newest first by creation time to the millisecond, ties by id descending")
    func revoked() {
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        let sessions = [
            SessionCap.LiveSession(id: "a", createdAt: t), SessionCap.LiveSession(id: "c", createdAt: t),
            SessionCap.LiveSession(id: "b", createdAt: t.addingTimeInterval(0.0004)),  // the same millisecond
            SessionCap.LiveSession(id: "z", createdAt: t.addingTimeInterval(-1)), SessionCap.LiveSession(id: "n", createdAt: t.addingTimeInterval(1)),
        ]
        #expect(SessionCap.revoked(sessions, limit: 50).isEmpty)
        #expect(SessionCap.revoked(sessions, limit: 3) == ["b", "a", "z"])
        #expect(SessionCap.revoked(sessions, limit: 2) == ["c", "b", "a", "z"])
        #expect(SessionCap.revoked(sessions, limit: 1) == ["n", "c", "b", "a", "z"])
        #expect(SessionCap.revoked(sessions, limit: 0) == SessionCap.revoked(sessions, limit: 1))
    }

    @Test("The SQL order names the columns both stores sort by")
    func order() {
        #expect(SessionCap.newestFirst == "created_at DESC, id DESC")
    }
}
