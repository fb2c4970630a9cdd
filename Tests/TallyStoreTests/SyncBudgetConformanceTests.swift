import Foundation
import TallyAPI
import TallyStore
import Testing

/// What one user's sync may cost the server, against every store, with the defaults a server runs with: a user
/// keeps at most 20,000 documents (tombstones counted until they are purged) and 5,000 sync client ids, and a pull
/// page holds at most 1 MiB of data. (Issue 31: 20,000 documents created and deleted in 0.7 s were kept 30 days,
/// 5,000 new client ids made every later pull of the user 575 KB, and a page of 1,000 documents of 16 KB was 16 MB.)
@Suite("Sync budget conformance", .timeLimit(.minutes(10)))
struct SyncBudgetConformanceTests {
    /// A collection whose own limit (live documents) is far above the budget, so the budget is what refuses.
    static let bulk = CollectionSpec(name: "bulk", maxDocuments: 1_000_000)

    /// Whether a push answered the mutation `rejected` for the budget.
    static func refusedForBudget(_ result: MutationResult) -> Bool {
        if case .rejected(let code, _) = result { return code.description == "storageFull" }
        return false
    }

    @Test("The default budget takes 20,000 documents and tombstones and refuses the 20,001st; a purge makes room", arguments: StoreKind.allCases)
    func documentBudget(kind: StoreKind) async throws {
        // Isolated: the tombstone purge is server-wide.
        try await withFixture(kind, isolated: true) { f in
            let user = try await f.newUser()
            let client = randomId("client-")
            var nextId: Int64 = 0
            func push(_ operations: [(String, DocumentMutation.Operation)]) async throws -> PushOutcome {
                let mutations = operations.map { docId, operation in
                    nextId += 1
                    return ClientMutation(id: nextId, mutation: DocumentMutation(collection: Self.bulk, docId: docId, operation: operation))
                }
                return try await f.store.push(userId: user, clientId: client, mutations: mutations, now: f.now)
            }
            let empty = DocumentMutation.Operation.put(.object([:]))
            // 15,000 created, 5,000 of them deleted (their tombstones stay), 5,000 more created: 20,000 rows.
            for batch in 0..<150 {
                let outcome = try await push((0..<100).map { ("b\(batch * 100 + $0)", empty) })
                try #require(outcome.results.allSatisfy { $0.appliedVersion != nil }, "[\(kind)] create batch \(batch): \(outcome.results.first { $0.appliedVersion == nil }!)")
            }
            for batch in 0..<50 {
                let outcome = try await push((0..<100).map { ("b\(batch * 100 + $0)", .delete) })
                try #require(outcome.results.allSatisfy { $0.appliedVersion != nil }, "[\(kind)] delete batch \(batch)")
            }
            for batch in 150..<200 {
                let outcome = try await push((0..<100).map { ("b\(batch * 100 + $0)", empty) })
                try #require(outcome.results.allSatisfy { $0.appliedVersion != nil }, "[\(kind)] create batch \(batch): the 20,000th must fit")
            }

            // The 20,001st: a new document is refused, by push and by REST, and nothing is written.
            let full = try await push([
                ("extra", empty), ("b0", .put(.object(["again": .bool(true)]))), ("b15000", .delete), ("extra", empty),
                ("b15001", .put(.object(["n": .int(1)]))),
            ])
            #expect(Self.refusedForBudget(full.results[0]), "[\(kind)] the 20,001st was taken: \(full.results[0])")
            #expect(full.results[1].appliedVersion != nil, "[\(kind)] a tombstone's id is re-created in its own row")
            #expect(full.results[2].appliedVersion != nil, "[\(kind)] a delete adds nothing")
            #expect(Self.refusedForBudget(full.results[3]), "[\(kind)] a delete freed a row: \(full.results[3])")
            #expect(full.results[4].appliedVersion != nil, "[\(kind)] a replacement adds no row")
            do {
                try await f.put(user, Self.bulk, "rest", "{}")
                Issue.record("[\(kind)] REST created the 20,001st document")
            } catch let error as StoreError {
                #expect(error.code.description == "storageFull", "[\(kind)] \(error)")
            }
            #expect(try await f.store.document(userId: user, collection: "bulk", id: "extra") == nil, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "bulk", id: "rest") == nil, "[\(kind)]")

            // Once the tombstones are purged (past their retention), their rows are free again.
            f.clock.advance(by: 31 * 86_400)
            var purged = 0
            while true {
                let batch = try await f.store.purgeTombstones(before: f.now.addingTimeInterval(-30 * 86_400), limit: 2_000)
                purged += batch
                if batch == 0 { break }
            }
            #expect(purged == 5_000, "[\(kind)] purged \(purged)")
            let after = try await push((0..<100).map { ("after\($0)", empty) })
            #expect(after.results.allSatisfy { $0.appliedVersion != nil }, "[\(kind)] the rows of purged tombstones are not free")
        }
    }

    @Test("The default budget takes 5,000 sync client ids and refuses the 5,001st, which claims nothing", arguments: StoreKind.allCases)
    func clientIdBudget(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let lanes = 4
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<lanes {
                    group.addTask {
                        for index in stride(from: lane, to: 5_000, by: lanes) {
                            _ = try await f.store.push(userId: user, clientId: "budget-client-\(index)", mutations: [], now: f.now)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await f.store.changes(userId: user, after: nil, limit: 1).lastMutationIds.count == 5_000, "[\(kind)]")
            do {
                let outcome = try await f.store.push(
                    userId: user, clientId: "budget-client-5000", mutations: [mutation(1, Collections.notes, "n", .put(.object([:])))],
                    now: f.now)
                Issue.record("[\(kind)] the 5,001st client id was taken: \(outcome)")
            } catch let error as StoreError {
                #expect(error.code.description == "storageFull", "[\(kind)] \(error)")
            }
            #expect(try await f.store.changes(userId: user, after: nil, limit: 1).lastMutationIds.count == 5_000, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "n") == nil, "[\(kind)] the refused push wrote")
            // The user's known clients still push.
            let known = try await f.store.push(
                userId: user, clientId: "budget-client-7", mutations: [mutation(1, Collections.notes, "n", .put(.object([:])))], now: f.now)
            #expect(known.results.first?.appliedVersion != nil, "[\(kind)]")
        }
    }

    @Test("changes: pages of large documents hold at most 1 MiB of data, and every change comes exactly once", arguments: StoreKind.allCases)
    func byteBoundedChanges(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let large = CollectionSpec(name: "large", maxDocumentBytes: CollectionSpec.maxDocumentBytesLimit)
            var random = SplitMix64(seed: 31)
            var latest: [String: DocumentRecord] = [:]  // each document's latest state, tombstones included
            // 60 documents of 1 to 200 KB (about 6 MB), then 30 replacements and deletions among them.
            for index in 0..<90 {
                let id = "d\(index < 60 ? index : Int(random.next() % 60))"
                if index >= 60, random.next() % 3 == 0, latest[id]?.deleted == false {
                    latest[id] = try await f.delete(user, large, id).document
                } else {
                    let size = 1_000 + Int(random.next() % 200_000)
                    latest[id] = try await f.put(user, large, id, #"{"t":"\#(String(repeating: "a", count: size))"}"#).document
                }
            }
            for start in [nil, Int64(0), Int64(40)] as [Int64?] {
                var cursor = start
                var seen: [DocumentRecord] = []
                var pages = 0
                var firstCursor: Int64?
                while true {
                    let page = try await f.store.changes(userId: user, after: cursor, limit: 1_000)
                    pages += 1
                    if firstCursor == nil { firstCursor = page.cursor }
                    let bytes = page.changes.reduce(0) { $0 + $1.data.count }
                    #expect(bytes <= 1 << 20 || page.changes.count == 1, "[\(kind)] a page of \(page.changes.count) documents holds \(bytes) bytes")
                    #expect(!page.changes.isEmpty || !page.hasMore, "[\(kind)] an empty page says more")
                    #expect(page.changes.allSatisfy { $0.version > (cursor ?? 0) }, "[\(kind)] a change at or below the cursor")
                    seen += page.changes
                    cursor = page.cursor
                    if !page.hasMore { break }
                }
                // Exactly the documents changed after the start, at their latest state, each once (live ones only
                // without a cursor), in version order.
                // Exactly the documents changed after the start, at their latest state, each once, in version order;
                // without a cursor the first page holds live documents only, and the later ones (after its cursor)
                // tombstones too, so a replica that applies them holds the live documents.
                let changed = latest.values.filter { $0.version > (start ?? 0) }.sorted { $0.version < $1.version }
                let wanted = start == nil ? changed.filter { !$0.deleted || $0.version > firstCursor! } : changed
                func names(_ records: [DocumentRecord]) -> [String] { records.map { "\($0.id)@\($0.version)" } }
                #expect(names(seen) == names(wanted) && seen == wanted, "[\(kind)] from \(String(describing: start)): \(names(seen)), wanted \(names(wanted))")
                var replica: [DocumentKey: DocumentRecord] = [:]
                replay(seen, into: &replica)
                if start == nil { #expect(Set(replica.values) == Set(latest.values.filter { !$0.deleted }), "[\(kind)]") }
                #expect(pages > 1, "[\(kind)] \(wanted.reduce(0) { $0 + $1.data.count }) bytes came in one page")
                #expect(cursor == latest.values.map(\.version).max(), "[\(kind)] the last cursor is not the current version")
            }
        }
    }
}
