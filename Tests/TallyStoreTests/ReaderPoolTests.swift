import Foundation
import TallyStore
import Testing

/// SQLite's readers under mixed load. GRDB's async read gives its reader back only after it resumes on a cooperative
/// thread; a read that waited for a reader synchronously on a cooperative thread (the range query did, until this
/// test) could hold every cooperative thread while every reader waited for one of them: the process hung. With the
/// range query on the calling thread this test never finished (three runs of 90 s on 2 cores); through the async read
/// its 800 reads take ~0.2 s.
@Suite("SQLite readers under mixed load", .timeLimit(.minutes(1)))
struct ReaderPoolTests {
    @Test("400 range queries (none from the page cache) mixed with 400 single-document reads all finish")
    func rangeQueriesMixedWithReads() async throws {
        try await withFixture(.sqlite) { f in
            let logs = Collections.logs
            var users: [String] = []
            for _ in 0..<8 {
                let user = try await f.newUser()
                for day in 10..<20 { try await f.put(user, logs, "d\(day)", #"{"date":"2027-01-\#(day)"}"#) }
                users.append(user)
            }
            let pages = try await withThrowingTaskGroup(of: Int.self) { group in
                for round in 0..<400 {
                    let user = users[round % users.count]
                    group.addTask {
                        // A distinct query each time, so each one reads the database.
                        let query = DocumentRangeQuery(collection: logs.name, from: "2027-01-1\(round % 10)", limit: 3 + round % 7)
                        return try await f.store.documents(userId: user, query: query).documents.count
                    }
                    group.addTask { try await f.store.document(userId: user, collection: logs.name, id: "d1\(round % 10)") == nil ? 0 : 0 }
                }
                return try await group.reduce(0, +)
            }
            // Each user has days 10…19: from day 1x there are 20 − (10 + x) documents, at most the limit.
            let expected = (0..<400).reduce(0) { $0 + min(10 - $1 % 10, 3 + $1 % 7) }
            #expect(pages == expected)
        }
    }
}
