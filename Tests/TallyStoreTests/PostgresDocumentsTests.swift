import Foundation
import PostgresNIO
import TallyAPI
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// What only PostgreSQL has to get right about documents: two server processes (two `PostgresStore`s on one
/// database) writing for one user. The shared behaviour is the conformance suite's (`DocumentConformanceTests`).
@Suite("PostgreSQL: documents across two stores", .timeLimit(.minutes(2)))
struct PostgresDocumentsTests {
    static let notes = CollectionSpec(name: "notes", rangeKey: "date")
    /// Creating a message costs 3 tokens (no free quota).
    static let chat = CollectionSpec(name: "chat_messages", rangeKey: "sentAt", action: ActionSpec(name: "chat.message", tokens: 3))
    static let aiQuery = ActionSpec(name: "ai.query", tokens: 3)

    @Test("The same pushes sent to both stores at once apply each mutation exactly once, in order, at gapless versions")
    func samePushAcrossStores() async throws {
        try await withTwoPostgresStores { first, second in
            let now = defaultStart
            let userId = try await newPostgresUser(first, tokens: 0, now: now)
            let clientId = randomId("client-")
            var model = Model(now: now)
            var versions: [Int64] = []
            for round in 0..<4 {
                // Each batch repeats the previous one's last ten mutations (a retry after a lost answer) and adds ten.
                let batch = (Int64(round * 10 + 1)...Int64(round * 10 + 20)).map(Self.mutation)
                let expected = batch.filter { $0.id > model.lastMutationId }.map { ($0.id, model.take($0.mutation)) }
                model.lastMutationId = batch.last?.id ?? 0
                let pushes = try await concurrently(16) { index in
                    try await (index % 2 == 0 ? first : second).push(userId: userId, clientId: clientId, mutations: batch, now: now)
                }
                let outcomes = pushes.compactMap { if case .success(let outcome) = $0 { outcome } else { nil } }
                #expect(outcomes.count == 16, "round \(round): \(pushes.filter { if case .success = $0 { false } else { true } })")
                #expect(outcomes.allSatisfy { $0.lastMutationId == model.lastMutationId }, "round \(round)")
                // Each new mutation taken by exactly one push, with the result of taking it once, in order.
                for (position, mutation) in batch.enumerated() {
                    let taken = outcomes.map { $0.results[position] }.filter { $0 != .duplicate }
                    let result = expected.first { $0.0 == mutation.id }?.1
                    #expect(taken == (result.map { [$0] } ?? []), "round \(round), mutation \(mutation.id): \(taken)")
                    versions += taken.compactMap(\.appliedVersion)
                }
            }
            let page = try await second.changes(userId: userId, after: 0, limit: 1_000)
            #expect(page.changes == model.changes && page.cursor == model.version && !page.hasMore, "\(page.changes.count)")
            #expect(page.lastMutationIds == [clientId: model.lastMutationId])
            let restored = try await first.changes(userId: userId, after: nil, limit: 1_000)
            #expect(restored.changes == model.changes.filter { !$0.deleted } && restored.cursor == model.version)
            // Every version given out once, none skipped; the rows keep each document's latest.
            #expect(versions.sorted() == Array(1...model.version) && model.version > 20, "\(versions.sorted())")
            #expect(try await Self.versions(first, userId) == model.changes.map(\.version))
        }
    }

    @Test("A metered collection written through both stores while both debit the wallet charges once per created document")
    func meteredAgainstDebits() async throws {
        try await withTwoPostgresStores { first, second in
            let now = defaultStart
            let userId = try await newPostgresUser(first, tokens: 45, now: now)
            // Four clients push five new messages each, every push sent to both stores; 16 debits through both.
            let batches = (0..<4).map { client in
                (randomId("client-"), (1...5).map { id in
                    ClientMutation(
                        id: Int64(id),
                        mutation: DocumentMutation(
                            collection: Self.chat, docId: "m\(client)-\(id)", operation: .put(.object(["sentAt": .string("2027-01-15T08:0\(id)")]))))
                })
            }
            let attempts = try await concurrently(24) { index -> PushOutcome? in
                let store = index % 2 == 0 ? first : second
                if index < 8 {
                    let (clientId, mutations) = batches[index / 2]
                    return try await store.push(userId: userId, clientId: clientId, mutations: mutations, now: now)
                }
                _ = try await store.execute(.performAction(userId: userId, action: Self.aiQuery, quotaLimit: nil), idempotency: nil, now: now) {
                    try RenderedBody.render($0)
                }
                return nil
            }
            var (applied, rejected, duplicates, debits, refusedDebits) = (0, 0, 0, 0, 0)
            for attempt in attempts {
                switch attempt {
                case .success(let outcome?):
                    for result in outcome.results {
                        switch result {
                        case .applied: applied += 1
                        case .duplicate: duplicates += 1
                        case .rejected(let code, let state):
                            rejected += 1
                            #expect(code == .insufficientTokens && (state?.wallet.balance ?? 99) < 3, "\(code) \(String(describing: state))")
                        case .conflict: Issue.record("a create conflicted")
                        }
                    }
                case .success(nil): debits += 1
                case .failure(let error) where error.code == .insufficientTokens: refusedDebits += 1
                case .failure(let error): Issue.record("\(error)")
                case .other(let error): Issue.record("\(error)")
                }
            }
            // 20 creates and 16 debits of 3 tokens each against 45: 15 are paid, every other one is refused (at
            // least 5 of the creates, which alone ask for 60).
            #expect(applied + rejected == 20 && duplicates == 20 && debits + refusedDebits == 16)
            #expect(applied + debits == 15 && rejected >= 5, "applied \(applied), debits \(debits)")
            let stored = try await first.documents(userId: userId, query: DocumentRangeQuery(collection: Self.chat.name, limit: 100))
            #expect(stored.documents.count == applied)
            let fixture = Fixture(store: second, kind: .postgres, clock: ManualClock(now))
            let entries = try await fixture.allEntries(userId)
            #expect(entries.filter { $0.reason == "chat.message" }.count == applied)
            #expect(entries.filter { $0.reason == "ai.query" }.count == debits)
            #expect(entries.filter { $0.kind == .debit }.allSatisfy { $0.amount == -3 })
            #expect(try await second.wallet(userId: userId, now: now)?.balance == 0)
            try await fixture.checkInvariants([userId])
            #expect(try await Self.versions(second, userId) == Array(1...Int64(applied)))
        }
    }

    @Test("Deleting a user removes their documents, sync state and clients: the client id is free again")
    func deletionRemovesEverything() async throws {
        try await withTwoPostgresStores { first, second in
            let now = defaultStart
            let (userId, other) = (try await newPostgresUser(first, tokens: 0, now: now), try await newPostgresUser(first, tokens: 0, now: now))
            let clientId = randomId("client-")
            let writes = (1...3).map { Self.mutation(Int64($0)) }
            _ = try await first.push(userId: userId, clientId: clientId, mutations: writes, now: now)
            await expectStoreError(.clientIdInUse, .postgres) {
                try await second.push(userId: other, clientId: clientId, mutations: writes, now: now)
            }
            #expect(try await second.deleteUser(id: userId))
            for table in ["documents", "sync_state", "sync_clients"] {
                let rows = try await first.rows(PostgresQuery(unsafeSQL: "SELECT count(*) AS rows FROM \(table) WHERE user_id = $1", binds: Self.binds(userId)))
                #expect(try Columns(try #require(rows.first))["rows"] == Int64(0), "\(table)")
            }
            let outcome = try await first.push(userId: other, clientId: clientId, mutations: writes, now: now)
            #expect(outcome.lastMutationId == 3 && outcome.results.contains { $0.appliedVersion == 1 })
            await expectStoreError(.userNotFound, .postgres) {
                try await first.push(userId: userId, clientId: randomId("client-"), mutations: writes, now: now)
            }
        }
    }

    @Test("Deleting a user waits for a document write's sync state lock without holding the wallet (no deadlock with a metered write)")
    func deletionLockOrder() async throws {
        try await withPostgresStore(isolated: false) { store in
            let now = defaultStart
            let userId = try await newPostgresUser(store, tokens: 0, now: now)
            _ = try await store.push(userId: userId, clientId: randomId("client-"), mutations: [Self.mutation(1)], now: now)
            let (held, holding) = AsyncStream<Int32>.makeStream()
            let (released, release) = AsyncStream<Void>.makeStream()
            try await withThrowingTaskGroup(of: Void.self) { group in
                // A document write's transaction, between its sync state lock and its charge.
                group.addTask {
                    try await store.transaction { connection in
                        let rows = try await connection.rows(
                            "SELECT pg_backend_pid() AS pid FROM sync_state WHERE user_id = \(userId) FOR UPDATE", logger: store.logger)
                        holding.yield(try Columns(try #require(rows.first))["pid"])
                        for await _ in released {}
                    }
                }
                var heldBy = held.makeAsyncIterator()
                let writer = try #require(await heldBy.next())
                group.addTask {
                    let deleted = try await store.deleteUser(id: userId)
                    #expect(deleted)
                }
                // Until the deletion waits on the writer (each poll is a round trip; ten seconds at most).
                let deadline = ContinuousClock.now.advanced(by: .seconds(10))
                var waiting = false
                while !waiting, ContinuousClock.now < deadline {
                    let rows = try await store.rows("SELECT count(*) AS blocked FROM pg_stat_activity WHERE \(writer) = ANY(pg_blocking_pids(pid))")
                    waiting = try Columns(try #require(rows.first))["blocked"] as Int64 > 0
                }
                #expect(waiting, "the deletion never waited for the writer")
                // The writer could take the wallet now: the deletion does not hold it.
                let wallet = try? await store.rows("SELECT 1 FROM wallets WHERE user_id = \(userId) FOR UPDATE NOWAIT")
                #expect(wallet?.count == 1, "the deletion holds the wallet while it waits for the writer")
                release.finish()
                try await group.waitForAll()
            }
            #expect(try await store.user(id: userId) == nil)
        }
    }

    @Test("A purge skips a user whose writer holds their sync state and still purges everyone else's tombstones")
    func purgeSkipsBusyUsers() async throws {
        try await withPostgresStore(isolated: true) { store in
            let old = defaultStart
            // The busy user has the 10 oldest tombstones; with a limit of 5 they fill every batch of "oldest".
            let busy = try await newPostgresUser(store, tokens: 0, now: old)
            let idle = try await newPostgresUser(store, tokens: 0, now: old)
            let writes = (0..<10).map { n in
                ClientMutation(id: Int64(n + 1), mutation: DocumentMutation(
                    collection: Self.notes, docId: "b\(n)", operation: .put(.object(["date": .string("2027-01-10")]))))
            }
            let deletes = (0..<10).map { n in
                ClientMutation(id: Int64(n + 11), mutation: DocumentMutation(collection: Self.notes, docId: "b\(n)", operation: .delete))
            }
            _ = try await store.push(userId: busy, clientId: randomId("client-"), mutations: writes + deletes, now: old)
            let idleClient = randomId("client-")
            _ = try await store.push(userId: idle, clientId: idleClient, mutations: [writes[0]], now: old)
            _ = try await store.push(
                userId: idle, clientId: idleClient,
                mutations: [ClientMutation(id: 2, mutation: DocumentMutation(collection: Self.notes, docId: "b0", operation: .delete))],
                now: old.addingTimeInterval(60))
            let (held, holding) = AsyncStream<Void>.makeStream()
            let (released, release) = AsyncStream<Void>.makeStream()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await store.transaction { connection in
                        _ = try await connection.rows("SELECT 1 FROM sync_state WHERE user_id = \(busy) FOR UPDATE", logger: store.logger)
                        holding.yield()
                        for await _ in released {}
                    }
                }
                var heldBy = held.makeAsyncIterator()
                _ = await heldBy.next()
                #expect(try await store.purgeTombstones(before: old.addingTimeInterval(3600), limit: 5) == 1)
                release.finish()
                try await group.waitForAll()
            }
            #expect(try await Self.versions(store, idle).isEmpty)
            #expect(try await Self.versions(store, busy).count == 10)
            #expect(try await store.purgeTombstones(before: old.addingTimeInterval(3600), limit: 5) == 5)
        }
    }

    @Test("A range page is answered from memory while the user's counter stands still; a write through the other store shows at once")
    func rangePagesAcrossStores() async throws {
        try await withTwoPostgresStores { first, second in
            let now = defaultStart
            let userId = try await newPostgresUser(first, tokens: 0, now: now)
            let writes = (1...30).map { n in
                ClientMutation(id: Int64(n), mutation: DocumentMutation(
                    collection: Self.notes, docId: "d\(n)", operation: .put(.object(["date": .string("2027-01-\(10 + n % 10)")]))))
            }
            let clientId = randomId("client-")
            _ = try await second.push(userId: userId, clientId: clientId, mutations: writes, now: now)
            let query = DocumentRangeQuery(collection: "notes", from: "2027-01-12", to: "2027-01-15", limit: 5)
            let page = try await first.documents(userId: userId, query: query)
            #expect(page.documents.map(\.id) == ["d12", "d2", "d22", "d13", "d23"])
            #expect(first.pages.page(userId: userId, query: query, stamp: 30) == page, "the page was not kept")
            #expect(try await first.documents(userId: userId, query: query) == page)
            // The other process deletes one and adds one in the range: the next read has both.
            _ = try await second.push(
                userId: userId, clientId: clientId,
                mutations: [
                    ClientMutation(id: 31, mutation: DocumentMutation(collection: Self.notes, docId: "d2", operation: .delete)),
                    ClientMutation(id: 32, mutation: DocumentMutation(
                        collection: Self.notes, docId: "a0", operation: .put(.object(["date": .string("2027-01-12")])))),
                ], now: now)
            #expect(try await first.documents(userId: userId, query: query).documents.map(\.id) == ["a0", "d12", "d22", "d13", "d23"])
        }
    }

    // MARK: Support

    /// Mutation `id` of a client: a put, a patch or a delete of one of five notes, so some patches and deletes
    /// find no document and are refused, and some conditional ones conflict (which still takes them).
    static func mutation(_ id: Int64) -> ClientMutation {
        let docId = "n\(id % 5)"
        let operation: DocumentMutation.Operation =
            switch id % 3 {
            case 0: .delete
            case 1: .put(.object(["date": .string("2027-01-\(10 + id % 5)"), "n": .number("\(id)")]))
            default: .patch(.object(["patched": .number("\(id)")]))
            }
        // Every seventh is conditional on the document being at version 1: mostly a conflict.
        return ClientMutation(
            id: id, mutation: DocumentMutation(collection: notes, docId: docId, operation: operation, ifVersion: id % 7 == 0 ? 1 : nil))
    }

    /// Every version the user's documents are at, in order.
    static func versions(_ store: PostgresStore, _ userId: String) async throws -> [Int64] {
        try await store.rows(PostgresQuery(unsafeSQL: "SELECT version FROM documents WHERE user_id = $1 ORDER BY version", binds: binds(userId)))
            .map { try Columns($0)["version"] }
    }

    static func binds(_ value: String) -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(value)
        return binds
    }

    /// The documents as mutations taken once each, in order, leave them (planned by ``DocumentPlanner``, as a store does).
    struct Model {
        let now: Date
        var documents: [String: DocumentRecord] = [:]
        var version: Int64 = 0
        var lastMutationId: Int64 = 0

        /// Every document's latest change, in version order.
        var changes: [DocumentRecord] { documents.values.sorted { $0.version < $1.version } }

        mutating func take(_ mutation: DocumentMutation) -> MutationResult {
            let existing = documents[mutation.docId]
            let live = documents.values.filter { !$0.deleted }.count
            switch DocumentPlanner.plan(mutation, existing: existing, liveCount: live) {
            case .conflict(let current): return .conflict(current: current)
            case .refused(let code): return .rejected(code, state: nil)
            case .write(let data, let rangeValue, let deleted, _, _):
                version += 1
                let record = DocumentRecord(
                    collection: mutation.collection.name, id: mutation.docId, data: data, rangeValue: rangeValue, version: version,
                    updatedAt: Date(millis: now.millis), deleted: deleted)
                documents[mutation.docId] = record
                return .applied(record)
            }
        }
    }
}
