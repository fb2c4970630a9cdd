import Foundation
import TallyStore
import Testing

private let logs = Collections.logs
private let notes = Collections.notes

/// The rules written once in TallyStore give the same answers on both stores: the pages of a range query
/// (``DocumentRangeBounds``), the sessions a new one revokes (``SessionCap``), a refresh token's fate
/// (``RefreshTokenPolicy``). Each store is checked against the pure rule, so both agree with each other.
@Suite("Shared rules conformance", .timeLimit(.minutes(10)))
struct SharedRulesConformanceTests {
    /// A document as compared across stores (their user ids differ).
    private struct Seen: Hashable, CustomStringConvertible {
        var id: String
        var rangeValue: String?
        var description: String { "\(rangeValue ?? "NULL")/\(id)" }
        init(_ record: DocumentRecord) { (id, rangeValue) = (record.id, record.rangeValue) }
        init(id: String, rangeValue: String?) { (self.id, self.rangeValue) = (id, rangeValue) }
        /// A document of a collection without a range key.
        static func make(_ id: String) -> Self { Self(id: id, rangeValue: nil) }
    }

    /// Every page of `query` in order, following the cursor of each.
    private func pages(_ f: Fixture, _ user: String, _ query: DocumentRangeQuery) async throws -> [[Seen]] {
        var query = query
        var pages: [[Seen]] = []
        for _ in 0..<100 {
            let page = try await f.store.documents(userId: user, query: query)
            pages.append(page.documents.map(Seen.init))
            guard page.hasMore, let last = page.documents.last else { return pages }
            query.after = (last.rangeValue, last.id)
        }
        throw HarnessError("[\(f.kind)] the pages never end")
    }

    /// The pages the pure rule gives for `query` over `documents`: each page the first `limit` documents its bounds admit.
    private func expectedPages(_ documents: [Seen], _ query: DocumentRangeQuery) -> [[Seen]] {
        var query = query
        var pages: [[Seen]] = []
        while true {
            let bounds = query.bounds
            let admitted = documents.filter { bounds.admits(rangeValue: $0.rangeValue, id: $0.id) }
                .sorted { bounds.orders(($0.rangeValue, $0.id), before: ($1.rangeValue, $1.id)) }
            let page = Array(admitted.prefix(query.limit))
            pages.append(page)
            guard admitted.count > query.limit, let last = page.last else { return pages }
            query.after = (last.rangeValue, last.id)
        }
    }

    @Test("Range pages are the same on both stores: ties across a page boundary, empty and equal bounds, cursors at the edges")
    func rangePages() async throws {
        var seen: [StoreKind: [String: [[Seen]]]] = [:]
        for kind in StoreKind.allCases {
            try await withFixture(kind) { f in
                let user = try await f.newUser()
                var documents: [Seen] = []
                // Five on one day (a tie that crosses every page boundary of a small limit), and days around it.
                let days = ["2027-01-13", "2027-01-13", "2027-01-13", "2027-01-13", "2027-01-13", "2027-01-12", "2027-01-14", "2027-01-11"]
                for (n, day) in days.enumerated() {
                    documents.append(Seen(try await f.put(user, logs, "d\(n)", #"{"date":"\#(day)"}"#).document))
                }
                try await f.put(user, logs, "gone", #"{"date":"2027-01-13"}"#)
                try await f.delete(user, logs, "gone")
                var cases: [String: DocumentRangeQuery] = [:]
                for limit in [1, 2, 3, 5, 100] {
                    for descending in [false, true] {
                        let way = descending ? "desc" : "asc"
                        cases["all \(way) \(limit)"] = DocumentRangeQuery(collection: logs.name, descending: descending, limit: limit)
                        cases["the tie \(way) \(limit)"] = DocumentRangeQuery(
                            collection: logs.name, from: "2027-01-13", to: "2027-01-14", descending: descending, limit: limit)
                        cases["empty \(way) \(limit)"] = DocumentRangeQuery(
                            collection: logs.name, from: "2027-01-14", to: "2027-01-12", descending: descending, limit: limit)
                        cases["bounds equal \(way) \(limit)"] = DocumentRangeQuery(
                            collection: logs.name, from: "2027-01-13", to: "2027-01-13", descending: descending, limit: limit)
                        cases["no day \(way) \(limit)"] = DocumentRangeQuery(
                            collection: logs.name, from: "2027-02-01", descending: descending, limit: limit)
                    }
                }
                // Cursors: at the last row (both ways), inside the tie, at a bound, outside the bounds.
                cases["cursor at the last row asc"] = DocumentRangeQuery(
                    collection: logs.name, after: ("2027-01-14", "d6"), limit: 3)
                cases["cursor at the last row desc"] = DocumentRangeQuery(
                    collection: logs.name, descending: true, after: ("2027-01-11", "d7"), limit: 3)
                cases["cursor inside the tie asc"] = DocumentRangeQuery(
                    collection: logs.name, from: "2027-01-12", to: "2027-01-14", after: ("2027-01-13", "d2"), limit: 2)
                cases["cursor inside the tie desc"] = DocumentRangeQuery(
                    collection: logs.name, from: "2027-01-12", to: "2027-01-14", descending: true, after: ("2027-01-13", "d2"), limit: 2)
                cases["cursor at from asc"] = DocumentRangeQuery(
                    collection: logs.name, from: "2027-01-13", after: ("2027-01-13", "d0"), limit: 2)
                cases["cursor at to desc"] = DocumentRangeQuery(
                    collection: logs.name, to: "2027-01-13", descending: true, after: ("2027-01-13", "d9"), limit: 2)
                cases["cursor below from asc"] = DocumentRangeQuery(
                    collection: logs.name, from: "2027-01-13", after: ("2027-01-01", "z"), limit: 2)
                cases["cursor above to desc"] = DocumentRangeQuery(
                    collection: logs.name, to: "2027-01-13", descending: true, after: ("2027-12-31", "a"), limit: 2)
                cases["cursor beyond to asc"] = DocumentRangeQuery(
                    collection: logs.name, to: "2027-01-13", after: ("2027-01-13", ""), limit: 2)
                var pagesByCase: [String: [[Seen]]] = [:]
                for (name, query) in cases {
                    let got = try await pages(f, user, query)
                    #expect(got == expectedPages(documents, query), "[\(kind)] \(name)")
                    pagesByCase[name] = got
                }
                // Without a range key: by id, cursor at the last id.
                for id in ["b", "a", "c"] { try await f.put(user, notes, id, #"{"n":1}"#) }
                let byId = DocumentRangeQuery(collection: notes.name, limit: 2)
                pagesByCase["by id"] = try await pages(f, user, byId)
                #expect(pagesByCase["by id"] == [[Seen.make("a"), Seen.make("b")], [Seen.make("c")]], "[\(kind)]")
                var atLast = byId
                atLast.after = (nil, "c")
                #expect(try await f.store.documents(userId: user, query: atLast) == RangePage(documents: [], hasMore: false), "[\(kind)]")
                seen[kind] = pagesByCase
            }
        }
        if let sqlite = seen[.sqlite], let postgres = seen[.postgres] {
            for name in sqlite.keys.sorted() { #expect(sqlite[name] == postgres[name], "\(name): the stores' pages differ") }
        }
    }

    @Test("Opening a session revokes the same ones on both stores: ties in time by id, a clock gone back, limits 1 and 0")
    func sessionCap() async throws {
        var revokedBy: [StoreKind: [[String]]] = [:]
        for kind in StoreKind.allCases {
            try await withFixture(kind) { f in
                let prefix = randomId("cap-")
                func id(_ name: String) -> String { "\(prefix)-\(name)" }
                let t0 = f.now
                let user = try await f.signIn(sessionId: id("m"), sessionsPerUser: 3).user.id
                var live = [SessionCap.LiveSession(id: id("m"), createdAt: t0)]
                var steps: [[String]] = []
                // (name, seconds after t0, limit): three at one instant, a fourth there too, then caps of 1 and 0,
                // then sessions opened earlier than the newest one (a clock that went back).
                let opens: [(String, TimeInterval, Int)] = [
                    ("b", 1, 3), ("a", 1, 3), ("c", 1, 3), ("d", 1, 3), ("e", 2, 1), ("f", 3, 0), ("g", 0, 2), ("h", 0, 2), ("i", 0.0004, 2),
                ]
                for (name, offset, limit) in opens {
                    let now = t0.addingTimeInterval(offset)
                    let expected = SessionCap.revoked(live, limit: limit)
                    _ = try await f.store.openSession(
                        userId: user, sessionId: id(name), refresh: NewRefreshToken(hash: randomId("rt-"), expiresAt: now.addingTimeInterval(3600)),
                        sessionsPerUser: limit, now: now)
                    live = live.filter { !expected.contains($0.id) } + [SessionCap.LiveSession(id: id(name), createdAt: now)]
                    var stillLive: [String] = []
                    for session in ["m", "a", "b", "c", "d", "e", "f", "g", "h", "i"].map(id)
                    where try await f.store.liveSessionUser(sessionId: session) == user {
                        stillLive.append(session)
                    }
                    #expect(Set(stillLive) == Set(live.map(\.id)), "[\(kind)] after opening \(name) with limit \(limit)")
                    steps.append(expected.map { String($0.dropFirst(prefix.count + 1)) })
                }
                revokedBy[kind] = steps
            }
        }
        if let sqlite = revokedBy[.sqlite], let postgres = revokedBy[.postgres] { #expect(sqlite == postgres) }
    }

    @Test("A refresh token's fate is the policy's on both stores: rotated once, reuse revokes, expired refused")
    func refreshTokens() async throws {
        for kind in StoreKind.allCases {
            try await withFixture(kind) { f in
                let first = f.refresh(expiresIn: 60)
                let grant = try await f.signIn(refresh: first)
                let second = f.refresh()
                #expect(try await f.store.rotateRefreshToken(hash: first.hash, next: second, now: f.now).sessionId == grant.sessionId, "[\(kind)]")
                let revokeSessionError = await #expect(throws: StoreError.self, "[\(kind)] reuse") {
                    try await f.store.rotateRefreshToken(hash: first.hash, next: f.refresh(), now: f.now)
                }
                #expect(revokeSessionError?.code == RefreshDecision.revokeSession.error?.code, "[\(kind)] reuse")
                #expect(try await f.store.liveSessionUser(sessionId: grant.sessionId) == nil, "[\(kind)] reuse revoked the session")
                let refused0 = await #expect(throws: StoreError.self, "[\(kind)] the successor dies with its session") {
                    try await f.store.rotateRefreshToken(hash: second.hash, next: f.refresh(), now: f.now)
                }
                #expect(refused0?.code == RefreshDecision.refuse.error?.code, "[\(kind)] the successor dies with its session")
                // Expired, unused: refused, the session left alone.
                let short = f.refresh(expiresIn: 10)
                let other = try await f.signIn(refresh: short)
                let refused1 = await #expect(throws: StoreError.self, "[\(kind)] expired") {
                    try await f.store.rotateRefreshToken(hash: short.hash, next: f.refresh(), now: f.now.addingTimeInterval(10))
                }
                #expect(refused1?.code == RefreshDecision.refuse.error?.code, "[\(kind)] expired")
                #expect(try await f.store.liveSessionUser(sessionId: other.sessionId) == other.user.id, "[\(kind)]")
                let refused2 = await #expect(throws: StoreError.self, "[\(kind)] unknown") {
                    try await f.store.rotateRefreshToken(hash: randomId("nope-"), next: f.refresh(), now: f.now)
                }
                #expect(refused2?.code == RefreshDecision.refuse.error?.code, "[\(kind)] unknown")
            }
        }
    }
}
