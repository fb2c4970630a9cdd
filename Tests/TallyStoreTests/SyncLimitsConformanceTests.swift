import Foundation
import TallyAPI
import TallyStore
import Testing

/// ``PageBound`` and ``SyncBudget`` with small limits, against every store: pages cut by bytes as well as by count
/// visit every document exactly once; the budget holds exactly under concurrent pushes; idle clients are purged.
@Suite("Sync limits conformance", .timeLimit(.minutes(10)))
struct SyncLimitsConformanceTests {
    static let sized = CollectionSpec(name: "sized", rangeKey: "k", maxDocumentBytes: 10_000, maxDocuments: 1_000)

    /// Writes `count` documents of 20 to 6,000 bytes with shuffled range values; returns them as stored.
    static func writeSized(_ f: Fixture, _ user: String, count: Int, seed: UInt64) async throws -> [DocumentRecord] {
        var random = SplitMix64(seed: seed)
        var records: [DocumentRecord] = []
        for index in 0..<count {
            let size = 20 + Int(random.next() % 6_000)
            let text = #"{"k":"r\#(random.next() % 50)","t":"\#(String(repeating: "x", count: size))"}"#
            records.append(try await f.put(user, sized, "s\(index)", text).document)
        }
        return records
    }

    @Test("documents(query:) and changes: pages cut at maxBytes (a larger first document alone) visit every document exactly once", arguments: StoreKind.allCases)
    func byteBoundedPages(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let records = try await Self.writeSized(f, user, count: 40, seed: 7)
            for (limit, maxBytes) in [(5, 4_000), (100, 9_000), (3, 1), (100, 1 << 20)] {
                for descending in [false, true] {
                    var query = DocumentRangeQuery(collection: "sized", descending: descending, limit: limit, maxBytes: maxBytes)
                    var seen: [DocumentRecord] = []
                    for _ in 0..<1_000 {
                        let page = try await f.store.documents(userId: user, query: query)
                        let bytes = page.documents.reduce(0) { $0 + $1.data.count }
                        #expect(page.documents.count <= limit && (bytes <= maxBytes || page.documents.count == 1), "[\(kind)] \(page.documents.count) documents, \(bytes) bytes")
                        #expect(!page.documents.isEmpty || !page.hasMore, "[\(kind)]")
                        seen += page.documents
                        guard page.hasMore, let last = page.documents.last else { break }
                        // Full: the next document would not have fit.
                        query.after = (last.rangeValue, last.id)
                    }
                    let order = records.sorted { ($0.rangeValue!, $0.id) < ($1.rangeValue!, $1.id) }
                    #expect(seen == (descending ? order.reversed() : order), "[\(kind)] limit \(limit), \(maxBytes) bytes, descending \(descending)")
                }
                var cursor: Int64? = 0
                var changes: [DocumentRecord] = []
                for _ in 0..<1_000 {
                    let page = try await f.store.changes(userId: user, after: cursor, limit: limit, maxBytes: maxBytes)
                    let bytes = page.changes.reduce(0) { $0 + $1.data.count }
                    #expect(page.changes.count <= limit && (bytes <= maxBytes || page.changes.count == 1), "[\(kind)]")
                    changes += page.changes
                    cursor = page.cursor
                    if !page.hasMore { break }
                }
                #expect(changes == records, "[\(kind)] changes, limit \(limit), \(maxBytes) bytes")
            }
        }
    }

    @Test("Concurrent pushes fill the budget exactly: documents, bytes and client ids", arguments: StoreKind.allCases)
    func concurrentBudget(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let notes = Collections.notes
            // Documents: 10 pushes of 10 new documents each against a budget of 37.
            let user = try await f.newUser()
            let budget = SyncBudget(documents: 37, bytes: 1 << 20, clientIds: 100)
            let outcomes = try await withThrowingTaskGroup(of: PushOutcome.self) { group in
                for lane in 0..<10 {
                    group.addTask {
                        let mutations = (0..<10).map { mutation(Int64($0 + 1), notes, "l\(lane)-\($0)", .put(.object([:]))) }
                        return try await f.store.push(userId: user, clientId: "lane-client-\(lane)-x", mutations: mutations, budget: budget, now: f.now)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let results = outcomes.flatMap(\.results)
            #expect(results.filter { $0.appliedVersion != nil }.count == 37, "[\(kind)]")
            #expect(results.filter { $0 == .rejected(.storageFull, state: nil) }.count == 63, "[\(kind)]")
            #expect(try await f.allChanges(user, after: 0).changes.count == 37, "[\(kind)]")

            // Bytes: documents of 100 bytes of data against 1,000 bytes; a replacement that grows counts its growth.
            let writer = try await f.newUser()
            let small = SyncBudget(documents: 1_000, bytes: 1_000, clientIds: 100)
            let hundred = try json(#"{"t":"\#(String(repeating: "y", count: 92))"}"#)
            #expect(hundred.bytes.count == 100)
            let byBytes = try await withThrowingTaskGroup(of: PushOutcome.self) { group in
                for lane in 0..<4 {
                    group.addTask {
                        let mutations = (0..<5).map { mutation(Int64($0 + 1), notes, "b\(lane)-\($0)", .put(hundred)) }
                        return try await f.store.push(userId: writer, clientId: "bytes-client-\(lane)-x", mutations: mutations, budget: small, now: f.now)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(byBytes.flatMap(\.results).filter { $0.appliedVersion != nil }.count == 10, "[\(kind)]")
            let live = try await f.allChanges(writer, after: 0).changes
            let larger = try json(#"{"t":"\#(String(repeating: "z", count: 142))"}"#)  // 150 bytes: 50 more
            let grown = try await f.store.push(
                userId: writer, clientId: "bytes-client-0-x",
                mutations: [
                    mutation(6, notes, live[0].id, .put(larger)), mutation(7, notes, live[1].id, .put(try json("{}"))),
                    mutation(8, notes, live[0].id, .put(larger)),
                ], budget: small, now: f.now)
            #expect(grown.results[0] == .rejected(.storageFull, state: nil), "[\(kind)] \(grown.results)")
            #expect(grown.results[1].appliedVersion != nil && grown.results[2].appliedVersion != nil, "[\(kind)] shrinking one made room")

            // Client ids: 8 new clients at once against a budget of 3.
            let owner = try await f.newUser()
            let few = SyncBudget(documents: 1_000, bytes: 1 << 20, clientIds: 3)
            let claims = await withTaskGroup(of: Bool?.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        do {
                            _ = try await f.store.push(userId: owner, clientId: "claim-client-\(lane)-x", mutations: [], budget: few, now: f.now)
                            return true
                        } catch let error as StoreError where error.code == .storageFull {
                            return false
                        } catch {
                            return nil
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(claims.filter { $0 == true }.count == 3 && claims.filter { $0 == false }.count == 5, "[\(kind)] \(claims)")
            #expect(try await f.store.changes(userId: owner, after: nil, limit: 1).lastMutationIds.count == 3, "[\(kind)]")
        }
    }

    @Test("purgeClients: a client none of whose mutations was taken since the cutoff is forgotten, and no longer counts", arguments: StoreKind.allCases)
    func purgeIdleClients(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let user = try await f.newUser()
            let budget = SyncBudget(documents: 1_000, bytes: 1 << 20, clientIds: 2)
            let notes = Collections.notes
            _ = try await f.store.push(userId: user, clientId: "idle-client-a", mutations: [mutation(1, notes, "a", .put(.object([:])))], budget: budget, now: f.now)
            _ = try await f.store.push(userId: user, clientId: "busy-client-b", mutations: [mutation(1, notes, "b", .put(.object([:])))], budget: budget, now: f.now)
            await expectStoreError(.storageFull, kind) {
                try await f.store.push(userId: user, clientId: "third-client-c", mutations: [], budget: budget, now: f.now)
            }
            f.clock.advance(by: 10 * 86_400)
            // b pushes again; a duplicate-only push of a does not count as activity (nothing was taken).
            _ = try await f.store.push(userId: user, clientId: "busy-client-b", mutations: [mutation(2, notes, "b", .delete)], budget: budget, now: f.now)
            _ = try await f.store.push(userId: user, clientId: "idle-client-a", mutations: [mutation(1, notes, "a", .put(.object([:])))], budget: budget, now: f.now)
            f.clock.advance(by: 25 * 86_400)
            let cutoff = f.now.addingTimeInterval(-30 * 86_400)
            #expect(try await f.store.purgeClients(before: cutoff, limit: 100) == 1, "[\(kind)]")
            #expect(try await f.store.purgeClients(before: cutoff, limit: 100) == 0, "[\(kind)]")
            #expect(try await f.store.changes(userId: user, after: nil, limit: 10).lastMutationIds == ["busy-client-b": 2], "[\(kind)]")
            // Its place in the budget is free, and the forgotten id starts again from 0.
            #expect(try await f.store.push(userId: user, clientId: "third-client-c", mutations: [], budget: budget, now: f.now).lastMutationId == 0, "[\(kind)]")
        }
    }
}

@Suite("PageBound", .timeLimit(.minutes(10)))
struct PageBoundTests {
    @Test("Paging a list by cut pages visits every document once; each page within its bounds and full when more follow")
    func pagingProperty() {
        var random = SplitMix64(seed: 2027)
        var checked = 0
        for _ in 0..<500 {
            let sizes = (0..<Int(random.next() % 40)).map { _ in Int(random.next() % 3) == 0 ? 0 : Int(random.next() % 5_000) }
            let records = sizes.enumerated().map { index, size in
                DocumentRecord(collection: "c", id: "d\(index)", data: Array(repeating: 0x61, count: size), rangeValue: nil, version: Int64(index + 1), updatedAt: Date(timeIntervalSince1970: 0), deleted: size == 0)
            }
            let bound = PageBound(limit: 1 + Int(random.next() % 6), maxBytes: Int(random.next() % 12_000))
            var start = 0
            var seen: [DocumentRecord] = []
            while true {
                // What a store reads: limit + 1 rows from the position on.
                let (page, hasMore) = bound.cut(Array(records[start..<min(start + bound.limit + 1, records.count)]))
                let bytes = page.reduce(0) { $0 + $1.data.count }
                #expect(page.count <= bound.limit && (bytes <= bound.maxBytes || page.count == 1))
                #expect(hasMore == (start + page.count < records.count))
                if hasMore {
                    #expect(!page.isEmpty)
                    let next = records[start + page.count]
                    #expect(page.count == bound.limit || bytes + next.data.count > bound.maxBytes, "cut before a document that fits")
                }
                seen += page
                start += page.count
                if !hasMore { break }
                checked += 1
            }
            #expect(seen == records)
        }
        #expect(checked > 100, "the property saw too few cut pages")
    }
}
