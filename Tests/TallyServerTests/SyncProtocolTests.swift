import Foundation
import HTTPTypes
import TallyAPI
import TallyStore
import Testing

@testable import TallyServer

/// The sync protocol over the real HTTP stack: exactly-once push, ordered application, final conflicts and
/// rejections, pull reproducing the server's state, retention, and users kept apart.
@Suite("Sync protocol: push and pull", .timeLimit(.minutes(5)))
struct SyncProtocolTests {
    static let client = "client-0123456789abcdef"

    @Test("A push applies its mutations in order, once; a retried batch is all duplicates", arguments: StoreKind.allCases)
    func pushInOrderExactlyOnce(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let batch = [
                SyncMutation(id: 1, op: .put, collection: "habit_logs", docId: "a", data: jsonValue(#"{"date":"2027-01-15","n":1}"#)),
                SyncMutation(id: 2, op: .patch, collection: "habit_logs", docId: "a", data: jsonValue(#"{"n":2,"done":true}"#)),
                SyncMutation(id: 3, op: .put, collection: "profile", docId: "me", data: jsonValue(#"{"name":"Ada"}"#)),
                SyncMutation(id: 5, op: .put, collection: "habit_logs", docId: "b", data: jsonValue(#"{"date":"2027-01-16"}"#)),
                SyncMutation(id: 8, op: .delete, collection: "habit_logs", docId: "b"),
            ]
            let first = try await api.push(user, clientId: Self.client, batch)
            #expect(first.status == .ok, "\(first.text)")
            let answer = try first.decode(SyncPushResponse.self)
            #expect(answer.lastMutationId == 8)
            #expect(answer.results.map(\.id) == [1, 2, 3, 5, 8] && answer.results.allSatisfy { $0.status == .applied })
            let versions = answer.results.compactMap(\.version)
            try #require(versions.count == 5, "\(versions)")
            #expect(versions == versions.sorted() && Set(versions).count == 5, "\(versions)")
            let state = try await api.state(user)
            #expect(state.keys.sorted() == ["habit_logs/a", "profile/me"])
            #expect(state["habit_logs/a"]?.data == jsonValue(#"{"date":"2027-01-15","n":2,"done":true}"#), "the patch ran after the put")
            #expect(state["habit_logs/a"]?.version == versions[1])

            // The answer was lost: the same batch again changes nothing.
            let retry = try await api.push(user, clientId: Self.client, batch).decode(SyncPushResponse.self)
            #expect(retry.lastMutationId == 8 && retry.results.allSatisfy { $0.status == .duplicate && $0.version == nil })
            #expect(try await api.state(user) == state)
            // A batch that overlaps: the old ids are skipped, the new ones applied.
            let overlap = try await api.push(user, clientId: Self.client, [
                batch[4], SyncMutation(id: 9, op: .patch, collection: "profile", docId: "me", data: jsonValue(#"{"city":"Paris"}"#)),
            ]).decode(SyncPushResponse.self)
            #expect(overlap.results.map(\.status) == [.duplicate, .applied] && overlap.lastMutationId == 9)
            let pulled = try await api.pull(user).decode(SyncPullResponse.self)
            #expect(pulled.lastMutationIds == [Self.client: 9])
            #expect(try await api.getDocument(user, "profile", "me").decode(Document.self).data == jsonValue(#"{"name":"Ada","city":"Paris"}"#))
            await api.close()
        }
    }

    @Test("A conflict and a rejection are final and do not block the mutations behind them", arguments: StoreKind.allCases)
    func conflictsAndRejectionsDoNotBlock(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let existing = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#)).decode(Document.self)
            let big = JSONValue.object(["name": .string(String(repeating: "x", count: 300))])
            func message(_ id: String) -> JSONValue { .object(["sentAt": .string("2027-01-15T08:00:00Z"), "text": .string(id)]) }
            let batch = [
                SyncMutation(id: 1, op: .put, collection: "profile", docId: "me", data: jsonValue(#"{"name":"Eve"}"#), ifVersion: existing.version + 7),
                SyncMutation(id: 2, op: .put, collection: "profile", docId: "new", data: big),
                SyncMutation(id: 3, op: .patch, collection: "habit_logs", docId: "absent", data: jsonValue(#"{"n":1}"#)),
                SyncMutation(id: 4, op: .put, collection: "habit_logs", docId: "nodate", data: jsonValue(#"{"n":1}"#)),
                SyncMutation(id: 5, op: .put, collection: "chat_messages", docId: "m1", data: message("m1")),
                SyncMutation(id: 6, op: .put, collection: "chat_messages", docId: "m2", data: message("m2")),
                SyncMutation(id: 7, op: .put, collection: "chat_messages", docId: "m3", data: message("m3")),  // no quota, no tokens: 402
                SyncMutation(id: 8, op: .put, collection: "profile", docId: "p2", data: jsonValue(#"{"name":"Bo"}"#)),
                SyncMutation(id: 9, op: .put, collection: "profile", docId: "p3", data: jsonValue(#"{"name":"Cy"}"#)),  // a third
                SyncMutation(id: 10, op: .put, collection: "profile", docId: "p4", data: jsonValue(#"{"name":"Di"}"#)),  // a fourth: full
                SyncMutation(id: 11, op: .put, collection: "profile", docId: "absent", data: jsonValue(#"{"name":"Fay"}"#), ifVersion: 0),
                SyncMutation(id: 12, op: .put, collection: "habit_logs", docId: "ok", data: jsonValue(#"{"date":"2027-01-15"}"#)),
            ]
            let response = try await api.push(user, clientId: Self.client, batch)
            #expect(response.status == .ok, "\(response.text)")
            let answer = try response.decode(SyncPushResponse.self)
            #expect(answer.lastMutationId == 12)
            #expect(answer.results.map(\.status) == [
                .conflict, .rejected, .rejected, .rejected, .applied, .applied, .rejected, .applied, .applied, .rejected, .rejected, .applied,
            ], "\(response.text)")
            #expect(answer.results[0].current == existing)
            #expect(answer.results.map { $0.error?.code.rawValue } == [
                nil, "document_too_large", "not_found", "invalid_document", nil, nil, "insufficient_tokens", nil, nil,
                "collection_full", "collection_full", nil,
            ])
            let state = try await api.state(user)
            #expect(state.keys.sorted() == ["chat_messages/m1", "chat_messages/m2", "habit_logs/ok", "profile/me", "profile/p2", "profile/p3"])
            #expect(state["profile/me"] == existing)
            // A conflict's current is null when the document does not exist.
            let absent = try await api.push(user, clientId: Self.client, [
                SyncMutation(id: 13, op: .patch, collection: "habit_logs", docId: "nope", data: jsonValue(#"{"n":1}"#), ifVersion: 4)
            ])
            #expect(absent.text.contains(#""current":null"#), "\(absent.text)")
            #expect(try absent.decode(SyncPushResponse.self).results.first?.status == .conflict)
            // Final: the same batch again is all duplicates, even once the conflict would now pass.
            let retry = try await api.push(user, clientId: Self.client, batch).decode(SyncPushResponse.self)
            #expect(retry.results.allSatisfy { $0.status == .duplicate } && retry.lastMutationId == 13)
            #expect(try await api.state(user) == state)
            #expect(try await api.wallet(user).balance == 0)
            try await api.expectBooksBalance(user)
            await api.close()
        }
    }

    @Test("Twenty concurrent identical pushes apply the batch once and charge once", arguments: StoreKind.allCases)
    func concurrentIdenticalPushes(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let setup = server.connection()
            let user = try await setup.newGuest(granted: 100)
            let batch = Self.mixedBatch(prefix: "c")
            let answers = try await concurrently(20, server: server) { _, api in
                try await api.push(user, clientId: Self.client, batch)
            }
            try Self.expectExactlyOnce(answers, batch: batch)
            let state = try await setup.state(user)
            #expect(state.count == 9, "\(state.keys.sorted())")
            // Four messages: two free, two at 2 tokens.
            #expect(try await setup.wallet(user).balance == 96)
            #expect(try await setup.allEntries(user).filter { $0.kind == "debit" }.count == 2)
            try await setup.expectBooksBalance(user)
            await setup.close()
        }
    }

    @Test("Two server processes on PostgreSQL receiving the same push apply it once")
    func twoProcessesSamePush() async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            try await ServerPair.with(url: url, config: Self.processCatalogYAML + SyncFixture.yaml) { pair in
                try await Self.samePush(pair)
            }
        }
    }

    private static func samePush(_ pair: ServerPair) async throws {
        let setup = pair.connection(0)
        let user = try await setup.newGuest(granted: 100)
        let batch = Self.mixedBatch(prefix: "p")
        let answers = try await withThrowingTaskGroup(of: APIResponse.self) { group in
            for index in 0..<20 {
                group.addTask {
                    let api = pair.connection(index % 2)
                    let response = try await api.push(user, clientId: Self.client, batch)
                    await api.close()
                    return response
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try Self.expectExactlyOnce(answers, batch: batch)
        let other = pair.connection(1)
        #expect(try await other.state(user).count == 9)
        #expect(try await other.wallet(user).balance == 96)
        try await other.expectBooksBalance(user)
        await other.close()
        await setup.close()
        #expect(pair.stop() == [.exited(0), .exited(0)])
    }

    @Test("Pull replayed into an empty map reproduces the server's state after random puts, patches and deletes", arguments: StoreKind.allCases)
    func pullReproducesState(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            for seed: UInt64 in [1, 19, 2027] {
                let user = try await api.newGuest()
                var random = SplitMix64(seed: seed)
                var model: [String: JSONValue] = [:]  // what the server must hold, by collection/id
                var replica: [String: Document] = [:]  // what a second device holds by pulling as it goes
                var cursor: String?
                var mutationId: Int64 = 0
                let ids = (0..<12).map { "d\($0)" }
                for step in 0..<120 {
                    let collection = random.next() % 3 == 0 ? "profile" : "habit_logs"
                    let id = ids[Int(random.next() % UInt64(ids.count))]
                    let key = "\(collection)/\(id)"
                    let data = Self.randomData(&random, collection: collection)
                    let viaPush = random.next() % 2 == 0
                    let draw = random.next() % 5
                    let op: SyncOperation = draw < 2 ? .put : draw < 4 ? .patch : .delete
                    // What the write rules say: the new state, or a refusal (absent, too large, full).
                    let after: JSONValue? = switch op {
                    case .put: data
                    case .patch: model[key]?.merging(data)
                    case .delete: nil
                    }
                    let profiles = model.keys.filter { $0.hasPrefix("profile/") }.count
                    let refused = (op != .put && model[key] == nil)
                        || (collection == "profile" && (after.map { $0.bytes.count > 200 } ?? false))
                        || (collection == "profile" && op == .put && model[key] == nil && profiles >= 3)
                    let accepted: Bool
                    if viaPush {
                        mutationId += 1 + Int64(random.next() % 3)
                        let mutation = SyncMutation(id: mutationId, op: op, collection: collection, docId: id, data: op == .delete ? nil : data)
                        let response = try await api.push(user, clientId: "prop-client-\(seed)-000000", [mutation])
                        let result = try #require(try response.decode(SyncPushResponse.self).results.first, "\(response.text)")
                        accepted = result.status == .applied
                    } else {
                        let response: APIResponse = switch op {
                        case .put: try await api.putDocument(user, collection, id, data)
                        case .patch: try await api.patchDocument(user, collection, id, data)
                        case .delete: try await api.deleteDocument(user, collection, id)
                        }
                        #expect(response.status.code < 500, "seed \(seed) step \(step): \(response.text)")
                        accepted = (200..<300).contains(response.status.code)
                    }
                    #expect(accepted == !refused, "seed \(seed) step \(step): \(op) \(key) via \(viaPush ? "push" : "REST")")
                    if accepted { model[key] = after }
                    #expect(try await Self.current(api, user, collection, id)?.data == model[key], "seed \(seed) step \(step): GET differs")
                    if random.next() % 7 == 0 {
                        cursor = try await api.pullAll(user, into: &replica, from: cursor, limit: 1 + Int(random.next() % 4))
                    }
                }
                cursor = try await api.pullAll(user, into: &replica, from: cursor, limit: 3)
                #expect(replica.mapValues(\.data) == model, "seed \(seed): the incremental replica differs")
                let fresh = try await api.state(user, limit: 2)
                #expect(fresh == replica, "seed \(seed): a new device's pull differs from the incremental one")
                #expect(try await api.pull(user, cursor: cursor).decode(SyncPullResponse.self).changes.isEmpty)
            }
            await api.close()
        }
    }

    @Test("Pull pages: hasMore, tombstones after a cursor, none without one, one entry per document", arguments: StoreKind.allCases)
    func pullPages(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            for index in 0..<5 {
                #expect(try await api.putDocument(user, "habit_logs", "h\(index)", .object(["date": .string("2027-01-1\(index)")])).status == .created)
            }
            let firstPage = try await api.pull(user, limit: 2).decode(SyncPullResponse.self)
            #expect(firstPage.changes.map(\.id) == ["h0", "h1"] && firstPage.hasMore)
            let rest = try await api.pull(user, cursor: firstPage.cursor, limit: 10).decode(SyncPullResponse.self)
            #expect(rest.changes.map(\.id) == ["h2", "h3", "h4"] && !rest.hasMore)
            // Three changes to h1 and a delete of h2 after the cursor: one entry each, at the latest state.
            for n in 1...3 { #expect(try await api.patchDocument(user, "habit_logs", "h1", .object(["n": .int(n)])).status == .ok) }
            #expect(try await api.deleteDocument(user, "habit_logs", "h2").status == .noContent)
            let changes = try await api.pull(user, cursor: rest.cursor).decode(SyncPullResponse.self)
            #expect(changes.changes.map(\.id) == ["h1", "h2"])
            #expect(changes.changes[0].data["n"] == .int(3) && changes.changes[1].deleted && changes.changes[1].data == .object([:]))
            let whole = try await api.pull(user).decode(SyncPullResponse.self)
            #expect(whole.changes.map(\.id).sorted() == ["h0", "h1", "h3", "h4"] && whole.changes.allSatisfy { !$0.deleted })
            #expect(whole.cursor == changes.cursor)
            await api.close()
        }
    }

    @Test("A cursor older than the tombstones kept gets 410; a pull without one starts again", arguments: StoreKind.allCases)
    func resyncAfterRetention(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            for id in ["a", "b"] {
                #expect(try await api.putDocument(user, "habit_logs", id, .object(["date": .string("2027-01-15")])).status == .created)
            }
            let old = try await api.pull(user).decode(SyncPullResponse.self).cursor
            #expect(try await api.deleteDocument(user, "habit_logs", "a").status == .noContent)
            // A day later (retention: 2 days) the tombstone is still there for the old cursor.
            server.clock.advance(by: 86_400)
            try await server.sweep()
            let kept = try await api.pull(user, cursor: old).decode(SyncPullResponse.self)
            #expect(kept.changes.map(\.id) == ["a"] && kept.changes.first?.deleted == true)
            server.clock.advance(by: 86_400 + 1)
            try await server.sweep()
            let gone = try await api.pull(user, cursor: old)
            #expect(gone.status == .gone && gone.errorCode == "resync_required", "\(gone.text)")
            // A cursor from after the purge still works; starting again gives the live state.
            #expect(try await api.pull(user, cursor: kept.cursor).status == .ok)
            let again = try await api.pull(user).decode(SyncPullResponse.self)
            #expect(again.changes.map(\.id) == ["b"])
            #expect(try await api.pull(user, cursor: again.cursor).status == .ok)
            await api.close()
        }
    }

    @Test("Writes through the routes announce themselves: `changed` with the newest version, `wallet` when a create was charged", arguments: StoreKind.allCases)
    func writesAnnounceChanges(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 5)
            let stream = try await SyncEventsTests.openStream(server, user)
            defer { Task { await stream.close() } }
            #expect(try await SyncEventsTests.walletEvent(stream).wallet.balance == 5)
            func expectChanged(_ version: Int64, _ what: String) async throws {
                let cursor = try SyncCursor.encode(version: version, userId: user.userId, keys: server.services.cursors)
                let event = try await stream.nextEvent(within: .seconds(10))
                #expect(event == .event(name: "changed", id: cursor, data: #"{"cursor":"\#(cursor)"}"#), "\(what)")
            }
            let put = try await api.putDocument(user, "habit_logs", "a", jsonValue(#"{"date":"2027-01-15"}"#)).decode(Document.self)
            try await expectChanged(put.version, "PUT")
            let patched = try await api.patchDocument(user, "habit_logs", "a", jsonValue(#"{"done":true}"#)).decode(Document.self)
            try await expectChanged(patched.version, "PATCH")
            #expect(try await api.deleteDocument(user, "habit_logs", "a").status == .noContent)
            try await expectChanged(patched.version + 1, "DELETE")
            let pushed = try await api.push(user, clientId: Self.client, [
                SyncMutation(id: 1, op: .put, collection: "habit_logs", docId: "b", data: jsonValue(#"{"date":"2027-01-16"}"#)),
                SyncMutation(id: 2, op: .put, collection: "habit_logs", docId: "c", data: jsonValue(#"{"date":"2027-01-17"}"#)),
                SyncMutation(id: 3, op: .put, collection: "habit_logs", docId: "bad", data: jsonValue(#"{"no":"date"}"#)),
            ]).decode(SyncPushResponse.self)
            try await expectChanged(try #require(pushed.results[1].version), "a push: its highest applied version")
            // A metered create: the document and the wallet (two free messages a day, then 2 tokens).
            for index in 1...3 {
                let message = JSONValue.object(["sentAt": .string("2027-01-15T08:00:0\(index)Z")])
                let created = try await api.putDocument(user, "chat_messages", "m\(index)", message).decode(Document.self)
                let events = [try await stream.nextEvent(within: .seconds(10)), try await stream.nextEvent(within: .seconds(10))]
                let cursor = try SyncCursor.encode(version: created.version, userId: user.userId, keys: server.services.cursors)
                #expect(events.contains(.event(name: "changed", id: cursor, data: #"{"cursor":"\#(cursor)"}"#)), "\(events)")
                let wallet = try events.compactMap { event -> SyncWalletEvent? in
                    guard case .event("wallet", _, let data) = event else { return nil }
                    return try TallyJSON.decoder().decode(SyncWalletEvent.self, from: Data(data.utf8))
                }
                #expect(wallet.first?.wallet.balance == (index < 3 ? 5 : 3), "message \(index): \(events)")
            }
            await api.close()
        }
    }

    @Test("Users are kept apart: documents, client ids and cursors", arguments: StoreKind.allCases)
    func crossUser(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let alice = try await api.newGuest()
            let bob = try await api.newGuest()
            let secret = jsonValue(#"{"name":"alice's secret"}"#)
            #expect(try await api.putDocument(alice, "profile", "me", secret).status == .created)
            let pushed = try await api.push(alice, clientId: Self.client, [SyncMutation(id: 1, op: .put, collection: "profile", docId: "x", data: secret)])
            #expect(pushed.status == .ok)
            let aliceCursor = try await api.pull(alice).decode(SyncPullResponse.self).cursor
            let before = try await api.pull(alice).text

            #expect(try await api.getDocument(bob, "profile", "me").status == .notFound)
            #expect(try await api.send(.get, "/v1/collections/profile/docs", token: bob.accessToken).decode(DocumentPage.self).items.isEmpty)
            #expect(try await api.deleteDocument(bob, "profile", "me").status == .notFound)
            #expect(try await api.patchDocument(bob, "profile", "me", jsonValue(#"{"name":"bob"}"#)).status == .notFound)
            let stolen = try await api.push(bob, clientId: Self.client, [SyncMutation(id: 2, op: .delete, collection: "profile", docId: "me")])
            #expect(stolen.status == .forbidden && stolen.errorCode == "client_id_in_use", "\(stolen.text)")
            let foreignCursor = try await api.pull(bob, cursor: aliceCursor)
            #expect(foreignCursor.status == .badRequest && foreignCursor.errorCode == "invalid_cursor")
            // Bob's own document under the same id is his.
            #expect(try await api.putDocument(bob, "profile", "me", jsonValue(#"{"name":"bob"}"#)).status == .created)
            let bobs = try await api.pull(bob).decode(SyncPullResponse.self)
            #expect(bobs.changes.map(\.id) == ["me"] && bobs.lastMutationIds.isEmpty && !bobs.changes[0].data.text.contains("alice"))
            #expect(try await api.pull(alice).text == before)
            await api.close()
        }
    }
}

extension SyncProtocolTests {
    /// The catalog of `SyncFixture`, as the processes read it from their configuration file.
    static let processCatalogYAML = """
        guestSignupsPerIPPerHour: 100000
        quotas: [{name: readings, daily: 3}, {name: messages, daily: 2}]
        actions: [{name: reading, quota: readings, tokens: 5}, {name: ai.query, tokens: 3}, {name: chat.message, quota: messages, tokens: 2}]

        """

    /// Ten mutations over three collections, nine documents: four metered messages (two free, two at 2 tokens),
    /// four habit logs, a patch and a profile.
    static func mixedBatch(prefix: String) -> [SyncMutation] {
        var batch: [SyncMutation] = []
        for index in 0..<4 {
            batch.append(SyncMutation(
                id: Int64(batch.count + 1), op: .put, collection: "chat_messages", docId: "\(prefix)m\(index)",
                data: .object(["sentAt": .string("2027-01-15T08:00:0\(index)Z"), "text": .string("hi \(index)")])))
        }
        for index in 0..<4 {
            batch.append(SyncMutation(
                id: Int64(batch.count + 1), op: .put, collection: "habit_logs", docId: "\(prefix)h\(index)",
                data: .object(["date": .string("2027-01-1\(index)")])))
        }
        batch.append(SyncMutation(id: 9, op: .patch, collection: "habit_logs", docId: "\(prefix)h0", data: .object(["done": .bool(true)])))
        batch.append(SyncMutation(id: 10, op: .put, collection: "profile", docId: "\(prefix)me", data: .object(["name": .string("Ada")])))
        return batch
    }

    /// Every answer is 200 with `lastMutationId` 10, and each mutation is applied in exactly one of them.
    static func expectExactlyOnce(_ answers: [APIResponse], batch: [SyncMutation], sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(answers.allSatisfy { $0.status == .ok }, "\(answers.map { "\($0.status) \($0.text)" })", sourceLocation: sourceLocation)
        let pushes = try answers.map { try $0.decode(SyncPushResponse.self) }
        #expect(pushes.allSatisfy { $0.lastMutationId == batch.last?.id }, sourceLocation: sourceLocation)
        for mutation in batch {
            let applied = pushes.filter { $0.results.contains { $0.id == mutation.id && $0.status == .applied } }.count
            #expect(applied == 1, "mutation \(mutation.id) applied \(applied) times", sourceLocation: sourceLocation)
        }
        #expect(pushes.allSatisfy { push in push.results.allSatisfy { $0.status == .applied || $0.status == .duplicate } }, sourceLocation: sourceLocation)
    }

    /// The document as the server holds it (`nil`: absent or deleted).
    static func current(_ api: APIConnection, _ user: TestUser, _ collection: String, _ id: String) async throws -> Document? {
        let response = try await api.getDocument(user, collection, id)
        if response.status == .notFound { return nil }
        try #require(response.status == .ok, "\(response.text)")
        return try response.decode(Document.self)
    }

    /// Random document data: a date for habit logs (the range key), and a few fields, some nested, some null
    /// (which a patch uses to remove a field); now and then too large for the profile collection.
    static func randomData(_ random: inout SplitMix64, collection: String) -> JSONValue {
        var fields: [JSONKey: JSONValue] = [:]
        if collection == "habit_logs" || random.next() % 4 == 0 { fields["date"] = .string("2027-01-\(10 + random.next() % 20)") }
        for name in ["a", "b", "c"] where random.next() % 2 == 0 {
            switch random.next() % 4 {
            case 0: fields[name] = .int(Int(random.next() % 1000))
            case 1: fields[name] = .string(random.hex(Int(random.next() % 12)))
            case 2: fields[name] = .object(["x": .int(Int(random.next() % 10)), "y": random.next() % 2 == 0 ? .null : .bool(true)])
            default: fields[name] = .null
            }
        }
        if random.next() % 10 == 0 { fields["big"] = .string(random.hex(220)) }
        return .object(fields)
    }
}
