import Foundation
import TallyAPI
import TallyStore
import Testing

private let notes = Collections.notes
private let logs = Collections.logs
private let small = Collections.small
private let chat = Collections.chat

/// The sync protocol against every store: push (exactly once, in order, never blocked), changes (pull) and the
/// purge of tombstones, with a property test of random writes against ``DocumentModel``.
extension DocumentConformanceTests {
    @Test("push: applies in order, skips ids at or below the client's last, and a retried batch changes nothing", arguments: StoreKind.allCases)
    func pushInOrder(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let client = randomId("client-")
            let batch = [
                mutation(1, notes, "a", .put(try json(#"{"n":1}"#))),
                mutation(2, notes, "a", .patch(try json(#"{"m":2}"#))),
                mutation(3, logs, "l", .put(try json(#"{"date":"2027-01-01"}"#))),
                mutation(4, notes, "a", .delete),
                mutation(5, notes, "a", .put(try json(#"{"n":5}"#)), ifVersion: 0),
            ]
            let outcome = try await f.store.push(userId: user, clientId: client, mutations: batch, now: f.now)
            #expect(outcome.lastMutationId == 5 && outcome.charged == nil, "[\(kind)]")
            #expect(
                outcome.results == [
                    .applied(try record(notes, "a", #"{"n":1}"#, version: 1, at: f.now)),
                    .applied(try record(notes, "a", #"{"m":2,"n":1}"#, version: 2, at: f.now)),
                    .applied(try record(logs, "l", #"{"date":"2027-01-01"}"#, version: 3, at: f.now)),
                    .applied(try record(notes, "a", nil, version: 4, at: f.now)),
                    .applied(try record(notes, "a", #"{"n":5}"#, version: 5, at: f.now)),
                ], "[\(kind)] \(outcome.results)")

            f.clock.advance(by: 10)
            let before = try await f.allChanges(user, after: 0)
            let retried = try await f.store.push(userId: user, clientId: client, mutations: batch, now: f.now)
            #expect(retried.lastMutationId == 5 && retried.results == Array(repeating: .duplicate, count: 5), "[\(kind)] \(retried.results)")
            let after = try await f.allChanges(user, after: 0)
            #expect(after.changes == before.changes && after.cursor == before.cursor, "[\(kind)] a retried batch changed the documents")

            let overlapping = [
                mutation(4, notes, "a", .delete),
                mutation(5, notes, "b", .put(try json("{}"))),
                mutation(6, notes, "b", .put(try json(#"{"n":6}"#))),
                mutation(9, notes, "a", .patch(try json(#"{"n":9}"#))),
            ]
            let next = try await f.store.push(userId: user, clientId: client, mutations: overlapping, now: f.now)
            #expect(next.lastMutationId == 9, "[\(kind)]")
            #expect(next.results.map(\.appliedVersion) == [nil, nil, 6, 7] && next.results.prefix(2).allSatisfy { $0 == .duplicate }, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "a")?.data == (try json(#"{"n":9}"#)).bytes, "[\(kind)]")
            #expect(try await f.store.changes(userId: user, after: nil, limit: 10).lastMutationIds == [client: 9], "[\(kind)]")

            // An empty push claims a new client id at 0.
            let fresh = randomId("client-")
            #expect(try await f.store.push(userId: user, clientId: fresh, mutations: [], now: f.now).lastMutationId == 0, "[\(kind)]")
            #expect(try await f.store.changes(userId: user, after: nil, limit: 10).lastMutationIds == [client: 9, fresh: 0], "[\(kind)]")
            await expectStoreError(.clientIdInUse, kind) {
                try await f.store.push(userId: try await f.newUser(), clientId: fresh, mutations: [], now: f.now)
            }
            await expectStoreError(.userNotFound, kind) {
                try await f.store.push(userId: randomId(), clientId: randomId("client-"), mutations: batch, now: f.now)
            }
        }
    }

    @Test("push: a conflict or a rejection is final, advances the last mutation id and does not block the mutations behind it", arguments: StoreKind.allCases)
    func pushNeverBlocks(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let existing = try await f.put(user, notes, "a", #"{"n":1}"#).document
            let client = randomId("client-")
            let batch = [
                mutation(1, notes, "a", .patch(try json(#"{"n":2}"#)), ifVersion: 9),
                mutation(2, small, "big", .put(.object(["s": .string(String(repeating: "x", count: 100))]))),
                mutation(3, logs, "nodate", .put(try json(#"{"habit":"run"}"#))),
                mutation(4, notes, "missing", .delete),
                mutation(5, notes, "missing", .put(try json(#"{"n":3}"#)), ifVersion: 2),
                mutation(6, notes, "b", .put(try json(#"{"n":4}"#))),
            ]
            let outcome = try await f.store.push(userId: user, clientId: client, mutations: batch, now: f.now)
            #expect(
                outcome.results == [
                    .conflict(current: existing), .rejected(.documentTooLarge, state: nil), .rejected(.invalidDocument, state: nil),
                    .rejected(.documentNotFound, state: nil), .conflict(current: nil),
                    .applied(try record(notes, "b", #"{"n":4}"#, version: 2, at: f.now)),
                ], "[\(kind)] \(outcome.results)")
            #expect(outcome.lastMutationId == 6, "[\(kind)]")
            #expect(try await f.allChanges(user, after: 0).changes.map(\.id) == ["a", "b"], "[\(kind)] a refusal wrote")
            // Final: the same batch again is all duplicates, even though mutation 5 could now apply.
            try await f.delete(user, notes, "b")
            let again = try await f.store.push(userId: user, clientId: client, mutations: batch, now: f.now)
            #expect(again.results == Array(repeating: .duplicate, count: 6) && again.lastMutationId == 6, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "small", id: "big") == nil, "[\(kind)]")
        }
    }

    @Test("push: a client id belongs to the user who first pushed it", arguments: StoreKind.allCases)
    func clientIdOwnership(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let alice = try await f.newUser()
            let bob = try await f.newUser()
            let client = randomId("client-")
            _ = try await f.store.push(userId: alice, clientId: client, mutations: [mutation(1, notes, "a", .put(try json("{}")))], now: f.now)
            await expectStoreError(.clientIdInUse, kind) {
                try await f.store.push(userId: bob, clientId: client, mutations: [mutation(2, notes, "b", .put(try json("{}")))], now: f.now)
            }
            #expect(try await f.store.document(userId: bob, collection: "notes", id: "b") == nil, "[\(kind)]")
            #expect(try await f.currentVersion(bob) == 0, "[\(kind)]")
            #expect(try await f.store.changes(userId: bob, after: nil, limit: 10).lastMutationIds.isEmpty, "[\(kind)]")
            let next = try await f.store.push(userId: alice, clientId: client, mutations: [mutation(2, notes, "b", .put(try json("{}")))], now: f.now)
            #expect(next.results.first?.appliedVersion == 2 && next.lastMutationId == 2, "[\(kind)] bob's attempt moved alice's client")
        }
    }

    @Test("push: 20 concurrent identical pushes apply each mutation exactly once and charge each created document once", arguments: StoreKind.allCases)
    func concurrentPushes(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser(tokens: 4)
            let client = randomId("client-")
            var batch: [ClientMutation] = []
            func add(_ collection: CollectionSpec, _ id: String, _ operation: DocumentMutation.Operation) {
                batch.append(mutation(Int64(batch.count + 1), collection, id, operation))
            }
            for index in 1...4 {
                add(chat, "c\(index)", .put(try json(#"{"sentAt":"2027-01-15T0\#(index)"}"#)))
                add(notes, "n\(index)", .put(try json(#"{"n":\#(index)}"#)))
            }
            add(chat, "c5", .put(try json(#"{"sentAt":"2027-01-15T05"}"#)))
            add(notes, "n1", .patch(try json(#"{"m":1}"#)))
            let pushes = batch
            let attempts = try await concurrently(20) { _ in
                try await f.store.push(userId: user, clientId: client, mutations: pushes, now: f.now)
            }
            var outcomes: [PushOutcome] = []
            for attempt in attempts {
                guard case .success(let outcome) = attempt else {
                    Issue.record("[\(kind)] a push failed: \(attempt)")
                    continue
                }
                outcomes.append(outcome)
            }
            #expect(outcomes.count == 20 && outcomes.allSatisfy { $0.lastMutationId == 10 }, "[\(kind)]")
            for (index, pushed) in batch.enumerated() {
                let results = outcomes.map { $0.results[index] }
                let taken = results.filter { $0 != .duplicate }
                #expect(taken.count == 1, "[\(kind)] mutation \(pushed.id) taken \(taken.count) times")
            }
            // Two free messages, then two paid ones; the fifth cannot be paid.
            let taken = outcomes.first { $0.results.contains { $0 != .duplicate } }
            #expect(taken?.results[8] == .rejected(.insufficientTokens, state: taken?.charged), "[\(kind)] \(String(describing: taken?.results[8]))")
            #expect(taken?.charged?.wallet.balance == 0 && taken?.charged?.counters["messages"]?.used == 2, "[\(kind)]")
            let changes = try await f.allChanges(user, after: 0)
            #expect(changes.cursor == 9 && changes.changes.count == 8, "[\(kind)] \(changes.cursor) versions for 9 applied mutations")
            #expect(try await f.allEntries(user).filter { $0.kind == .debit }.count == 2, "[\(kind)] charged more than once")
            try await f.checkInvariants([user])
        }
    }

    @Test("changes: pages visit each document once at its latest state; no cursor, no tombstones; the end is the current version", arguments: StoreKind.allCases)
    func changesPaging(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            for index in 0..<12 { try await f.put(user, notes, "n\(index)", #"{"n":\#(index)}"#) }
            for index in 0..<5 { try await f.put(user, logs, "l\(index)", #"{"date":"2027-01-0\#(index + 1)"}"#) }
            for index in [3, 7, 3, 11, 0] { try await f.patch(user, notes, "n\(index)", #"{"edit":true}"#) }
            for index in [2, 7, 9] { try await f.delete(user, notes, "n\(index)") }
            try await f.delete(user, logs, "l0")
            let current: Int64 = 12 + 5 + 5 + 4
            var latest: [DocumentKey: DocumentRecord] = [:]
            for (collection, count) in [(notes, 12), (logs, 5)] {
                for index in 0..<count {
                    let id = "\(collection == notes ? "n" : "l")\(index)"
                    latest[DocumentKey(collection.name, id)] = try await f.store.document(userId: user, collection: collection.name, id: id)
                }
            }

            for pageSize in [1, 4, 17, 100] {
                let all = try await f.allChanges(user, after: 0, pageSize: pageSize)
                #expect(all.cursor == current, "[\(kind)] page size \(pageSize)")
                #expect(Dictionary(uniqueKeysWithValues: all.changes.map { (DocumentKey($0), $0) }) == latest, "[\(kind)] page size \(pageSize)")
                var replica: [DocumentKey: DocumentRecord] = [:]
                let restored = try await f.allChanges(user, after: nil, pageSize: pageSize)
                replay(restored.changes, into: &replica)
                #expect(replica == latest.filter { !$0.value.deleted } && restored.cursor == current, "[\(kind)] page size \(pageSize)")
            }
            let whole = try await f.store.changes(userId: user, after: nil, limit: 100)
            #expect(!whole.hasMore && whole.cursor == current && whole.changes.count == 13, "[\(kind)]")
            #expect(whole.changes.allSatisfy { !$0.deleted }, "[\(kind)] a pull without a cursor has a tombstone")
            let first = try await f.store.changes(userId: user, after: nil, limit: 3)
            #expect(first.hasMore && first.cursor == first.changes.last?.version && first.changes.allSatisfy { !$0.deleted }, "[\(kind)]")
            let exact = try await f.store.changes(userId: user, after: current - 4, limit: 4)
            #expect(exact.changes.count == 4 && exact.cursor == current && !exact.hasMore, "[\(kind)] a page ending at the last change")

            let end = try await f.store.changes(userId: user, after: current, limit: 10)
            #expect(end.changes.isEmpty && !end.hasMore && end.cursor == current, "[\(kind)]")
            await expectStoreError(.resyncRequired, kind) { try await f.store.changes(userId: user, after: current + 1, limit: 10) }
            let newcomer = try await f.newUser()
            let empty = try await f.store.changes(userId: newcomer, after: nil, limit: 10)
            #expect(empty.changes.isEmpty && empty.cursor == 0 && !empty.hasMore, "[\(kind)]")
            #expect(try await f.store.changes(userId: newcomer, after: 0, limit: 10).cursor == 0, "[\(kind)]")
        }
    }

    @Test("purgeTombstones: deletes old tombstones up to the limit; a cursor before one of them needs a resync", arguments: StoreKind.allCases)
    func purge(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let user = try await f.newUser()
            let other = try await f.newUser()
            for id in ["a", "b", "c"] { try await f.put(user, notes, id, "{}") }
            try await f.delete(user, notes, "a")
            try await f.put(other, notes, "x", "{}")
            try await f.delete(other, notes, "x")
            let cutoff = f.now.addingTimeInterval(1)
            f.clock.advance(by: 10 * 86_400)
            let recent = try await f.delete(user, notes, "b").document
            let d = try await f.put(user, notes, "d", "{}").document

            #expect(try await f.store.purgeTombstones(before: cutoff, limit: 100) == 2, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "a") == nil, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "b") == recent, "[\(kind)] a recent tombstone went")
            for stale: Int64 in [0, 3] {
                await expectStoreError(.resyncRequired, kind) { try await f.store.changes(userId: user, after: stale, limit: 10) }
            }
            #expect(try await f.store.changes(userId: user, after: 4, limit: 10).changes == [recent, d], "[\(kind)]")
            #expect(try await f.store.changes(userId: user, after: nil, limit: 10).changes.map(\.id) == ["c", "d"], "[\(kind)]")
            await expectStoreError(.resyncRequired, kind) { try await f.store.changes(userId: other, after: 1, limit: 10) }
            #expect(try await f.store.changes(userId: other, after: 2, limit: 10).changes.isEmpty, "[\(kind)]")
            // Purging does not turn back the counter.
            #expect(try await f.put(other, notes, "x", "{}").document.version == 3, "[\(kind)]")

            for id in ["e", "f", "g", "h"] {
                try await f.put(user, notes, id, "{}")
                try await f.delete(user, notes, id)
            }
            let later = f.now.addingTimeInterval(1)
            #expect(try await f.store.purgeTombstones(before: later, limit: 2) == 2, "[\(kind)]")
            #expect(try await f.store.purgeTombstones(before: later, limit: 2) == 2, "[\(kind)]")
            #expect(try await f.store.purgeTombstones(before: later, limit: 2) == 1, "[\(kind)]")
            #expect(try await f.store.purgeTombstones(before: later, limit: 2) == 0, "[\(kind)]")
            let current = try await f.currentVersion(user)
            await expectStoreError(.resyncRequired, kind) { try await f.store.changes(userId: user, after: current - 1, limit: 10) }
            #expect(try await f.store.changes(userId: user, after: current, limit: 10).changes.isEmpty, "[\(kind)]")
        }
    }

    @Test("property: after random puts, patches and deletes by REST and by three clients, pulls reproduce the store exactly", arguments: StoreKind.allCases)
    func pullReproducesStore(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            for seed: UInt64 in [19, 2027, 0xC0FFEE] {
                var writes = RandomWrites(seed: seed, label: "[\(kind)] seed \(seed)")
                try await writes.run(f)
            }
        }
    }
}
