import Foundation
import TallyAPI
import TallyStore
import Testing

private let notes = Collections.notes
private let logs = Collections.logs
private let small = Collections.small
private let chat = Collections.chat

/// Synced documents through the REST path (`writeDocument`), range queries, metering, accounts and isolation,
/// against every store. The sync protocol (push, changes, purge) is in DocumentConformanceTests+Sync.swift.
@Suite("Document conformance", .timeLimit(.minutes(10)))
struct DocumentConformanceTests {
    @Test("writeDocument: create, replace, patch, delete and create again, on one counter across collections", arguments: StoreKind.allCases)
    func lifecycle(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            #expect(try await f.currentVersion(user) == 0, "[\(kind)]")
            let created = try await f.put(user, notes, "a", #"{"title":"Milk","done":false}"#)
            #expect(created.created && created.charged == nil, "[\(kind)]")
            #expect(created.document == (try record(notes, "a", #"{"done":false,"title":"Milk"}"#, version: 1, at: f.now)), "[\(kind)]")
            #expect(String(decoding: created.document.data, as: UTF8.self) == #"{"done":false,"title":"Milk"}"#, "[\(kind)] canonical")
            let log = try await f.put(user, logs, "d1", #"{"habit":"run","date":"2027-01-15"}"#)
            #expect(log.document == (try record(logs, "d1", #"{"date":"2027-01-15","habit":"run"}"#, version: 2, at: f.now)), "[\(kind)]")

            f.clock.advance(by: 5)
            let replaced = try await f.put(user, notes, "a", #"{"title":"Oat milk","done":false}"#)
            #expect(!replaced.created, "[\(kind)]")
            #expect(replaced.document == (try record(notes, "a", #"{"done":false,"title":"Oat milk"}"#, version: 3, at: f.now)), "[\(kind)]")
            let patched = try await f.patch(user, notes, "a", #"{"done":true,"shop":{"name":"corner"}}"#)
            #expect(!patched.created, "[\(kind)]")
            #expect(
                patched.document == (try record(notes, "a", #"{"done":true,"shop":{"name":"corner"},"title":"Oat milk"}"#, version: 4, at: f.now)),
                "[\(kind)]")
            f.clock.advance(by: 5)
            let deleted = try await f.delete(user, notes, "a")
            let tombstone = try record(notes, "a", nil, version: 5, at: f.now)
            #expect(!deleted.created && deleted.document == tombstone, "[\(kind)]")
            #expect(deleted.document.data.isEmpty && deleted.document.rangeValue == nil && deleted.document.liveVersion == 0, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "a") == deleted.document, "[\(kind)] the tombstone")

            // A tombstone, like a document never written, cannot be patched or deleted; nothing is written.
            await expectStoreError(.documentNotFound, kind) { try await f.patch(user, notes, "a", "{}") }
            await expectStoreError(.documentNotFound, kind) { try await f.delete(user, notes, "a") }
            await expectStoreError(.documentNotFound, kind) { try await f.patch(user, notes, "never", #"{"x":1}"#) }
            await expectStoreError(.documentNotFound, kind) { try await f.delete(user, notes, "never") }
            #expect(try await f.store.document(userId: user, collection: "notes", id: "never") == nil, "[\(kind)]")
            #expect(try await f.currentVersion(user) == 5, "[\(kind)] a refusal took a version")

            let again = try await f.put(user, notes, "a", #"{"title":"Bread"}"#)
            #expect(again.created && again.document.version == 6, "[\(kind)] re-created")
            // The same id in another collection is another document.
            let other = try await f.put(user, logs, "a", #"{"date":"2027-01-16"}"#)
            #expect(other.created && other.document.version == 7, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "a") == again.document, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "habit_logs", id: "d1") == log.document, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "habit_logs", id: "a") == other.document, "[\(kind)]")
            let changes = try await f.allChanges(user, after: 0)
            #expect(changes.changes == [log.document, again.document, other.document] && changes.cursor == 7, "[\(kind)]")
        }
    }

    @Test("writeDocument: ifVersion applies on a match, creates only on 0, and a conflict carries the document as it is", arguments: StoreKind.allCases)
    func preconditions(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let first = try await f.put(user, notes, "p", #"{"n":1}"#, ifVersion: 0)
            #expect(first.created && first.document.version == 1, "[\(kind)]")
            let exists = await expectStoreError(.versionConflict, kind) { try await f.put(user, notes, "p", #"{"n":2}"#, ifVersion: 0) }
            #expect(exists?.current == first.document, "[\(kind)] current")
            for call in [
                { try await f.put(user, notes, "p", #"{"n":2}"#, ifVersion: 7) },
                { try await f.patch(user, notes, "p", #"{"n":2}"#, ifVersion: 7) },
                { try await f.delete(user, notes, "p", ifVersion: 7) },
            ] as [@Sendable () async throws -> DocumentWriteOutcome] {
                let stale = await expectStoreError(.versionConflict, kind, call)
                #expect(stale?.current == first.document, "[\(kind)] current")
            }
            let second = try await f.put(user, notes, "p", #"{"n":2}"#, ifVersion: 1)
            let third = try await f.patch(user, notes, "p", #"{"m":3}"#, ifVersion: second.document.version)
            #expect(second.document.version == 2 && third.document.version == 3, "[\(kind)]")
            #expect(third.document.data == (try json(#"{"m":3,"n":2}"#)).bytes, "[\(kind)]")

            let absent = await expectStoreError(.versionConflict, kind) { try await f.put(user, notes, "q", "{}", ifVersion: 4) }
            #expect(absent != nil && absent?.current == nil, "[\(kind)] an absent document's current is nil")
            try await f.delete(user, notes, "p", ifVersion: 3)
            // A tombstone does not exist: its version does not match, 0 does.
            let tombstone = await expectStoreError(.versionConflict, kind) { try await f.put(user, notes, "p", "{}", ifVersion: 4) }
            #expect(tombstone != nil && tombstone?.current == nil, "[\(kind)]")
            let recreated = try await f.put(user, notes, "p", #"{"n":5}"#, ifVersion: 0)
            #expect(recreated.created && recreated.document.version == 5, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "q") == nil, "[\(kind)]")
            #expect(try await f.currentVersion(user) == 5, "[\(kind)] a conflict wrote something")
        }
    }

    @Test("writeDocument: merge patches of two devices editing different fields keep both edits", arguments: StoreKind.allCases)
    func mergePatch(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            try await f.put(user, notes, "m", #"{"title":"Plan","done":false,"meta":{"color":"red","size":2},"tags":["a"]}"#)
            // Both devices saw version 1; each sends only what it changed.
            try await f.patch(user, notes, "m", #"{"title":"Plan B"}"#)
            try await f.patch(user, notes, "m", #"{"done":true,"meta":{"size":null,"shape":"round"},"tags":["b"]}"#)
            let merged = try #require(try await f.store.document(userId: user, collection: "notes", id: "m"), "[\(kind)]")
            #expect(merged.version == 3, "[\(kind)]")
            #expect(
                merged.data == (try json(#"{"done":true,"meta":{"color":"red","shape":"round"},"tags":["b"],"title":"Plan B"}"#)).bytes,
                "[\(kind)] \(String(decoding: merged.data, as: UTF8.self))")
        }
    }

    @Test("writeDocument: an invalid document, a missing range key, a document too large, a full collection write nothing", arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let keep = try await f.put(user, logs, "keep", #"{"date":"2027-01-01","n":1}"#)
            let fits = try await f.put(user, small, "s1", #"{"s":""# + String(repeating: "x", count: 56) + #""}"#)
            #expect(fits.document.data.count == 64, "[\(kind)] the limit is inclusive")
            try await f.put(user, small, "s2", "{}")
            var version: Int64 = 3

            let refused: [(StoreError.Code, @Sendable () async throws -> DocumentWriteOutcome)] = [
                (.invalidDocument, { try await f.put(user, notes, "bad", "[1,2]") }),
                (.invalidDocument, { try await f.put(user, notes, "bad", #""text""#) }),
                (.invalidDocument, { try await f.put(user, notes, "bad", "null") }),
                (.invalidDocument, { try await f.patch(user, logs, "keep", "[1]") }),
                (.invalidDocument, { try await f.put(user, logs, "bad", #"{"habit":"run"}"#) }),
                (.invalidDocument, { try await f.put(user, logs, "bad", #"{"date":20270101}"#) }),
                (.invalidDocument, { try await f.patch(user, logs, "keep", #"{"date":null}"#) }),
                (.invalidDocument, { try await f.put(user, logs, "keep", #"{"n":2}"#) }),
                (.documentTooLarge, { try await f.put(user, small, "big", #"{"s":""# + String(repeating: "x", count: 57) + #""}"#) }),
                (.documentTooLarge, { try await f.patch(user, small, "s1", #"{"t":1}"#) }),
            ]
            for (code, call) in refused {
                await expectStoreError(code, kind, call)
            }
            #expect(try await f.store.document(userId: user, collection: "notes", id: "bad") == nil, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "habit_logs", id: "bad") == nil, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "small", id: "big") == nil, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "habit_logs", id: "keep") == keep.document, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "small", id: "s1") == fits.document, "[\(kind)]")
            #expect(try await f.currentVersion(user) == version, "[\(kind)] a refusal took a version")

            // At maxDocuments live documents: replacing one is fine, a new one is refused until one is deleted.
            try await f.put(user, small, "s3", "{}")
            version += 1
            await expectStoreError(.collectionFull, kind) { try await f.put(user, small, "s4", "{}") }
            #expect(try await f.store.document(userId: user, collection: "small", id: "s4") == nil, "[\(kind)]")
            #expect(try await f.put(user, small, "s2", #"{"n":2}"#).document.version == version + 1, "[\(kind)]")
            try await f.delete(user, small, "s1")
            #expect(try await f.put(user, small, "s4", "{}").created, "[\(kind)] a tombstone does not count")
            await expectStoreError(.collectionFull, kind) { try await f.put(user, small, "s1", "{}") }
            #expect(try await f.currentVersion(user) == version + 3, "[\(kind)]")
            // Other collections are not limited by it.
            #expect(try await f.put(user, notes, "n", "{}").created, "[\(kind)]")
        }
    }

    @Test("metered collection: each created document is charged once, quota first, then tokens; a refusal writes nothing", arguments: StoreKind.allCases)
    func metered(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser(tokens: 5)
            func message(_ id: String, _ second: Int) async throws -> DocumentWriteOutcome {
                try await f.put(user, chat, id, #"{"sentAt":"2027-01-15T08:00:0\#(second)Z","text":"hi"}"#)
            }
            let first = try await message("m1", 1)
            #expect(first.created && first.charged?.counters["messages"]?.used == 1 && first.charged?.wallet.balance == 5, "[\(kind)]")
            let second = try await message("m2", 2)
            #expect(second.charged?.counters["messages"]?.used == 2 && second.charged?.wallet.balance == 5, "[\(kind)]")
            let third = try await message("m3", 3)
            #expect(third.charged?.wallet.balance == 3 && third.charged?.counters["messages"]?.used == 2, "[\(kind)] paid in tokens")

            // Replacing, patching and deleting are free; creating again after a delete is charged again.
            #expect(try await message("m1", 4).charged == nil, "[\(kind)] a replace was charged")
            #expect(try await f.patch(user, chat, "m2", #"{"text":"edited"}"#).charged == nil, "[\(kind)]")
            #expect(try await f.delete(user, chat, "m1").charged == nil, "[\(kind)]")
            let recreated = try await message("m1", 5)
            #expect(recreated.created && recreated.charged?.wallet.balance == 1, "[\(kind)]")
            #expect(try await f.store.wallet(userId: user, now: f.now)?.balance == 1, "[\(kind)]")

            let version = try await f.currentVersion(user)
            let broke = await expectStoreError(.insufficientTokens, kind) { try await message("m4", 6) }
            #expect(broke?.state?.wallet.balance == 1 && broke?.state?.counters["messages"]?.used == 2, "[\(kind)] the state at the refusal")
            #expect(try await f.store.document(userId: user, collection: chat.name, id: "m4") == nil, "[\(kind)] a refused document was written")
            #expect(try await f.currentVersion(user) == version, "[\(kind)]")
            // A refused precondition is not charged either.
            await expectStoreError(.versionConflict, kind) { try await f.put(user, chat, "m5", #"{"sentAt":"x"}"#, ifVersion: 3) }
            await expectStoreError(.invalidDocument, kind) { try await f.put(user, chat, "m5", #"{"text":"no sentAt"}"#) }

            let entries = try await f.allEntries(user)
            #expect(entries.map(\.kind) == [.grant, .debit, .debit], "[\(kind)] \(entries.map(\.kind))")
            #expect(entries.dropFirst().allSatisfy { $0.amount == -2 && $0.reason == "chat.message" }, "[\(kind)]")
            try await f.checkInvariants([user])

            // A quota-only action: free uses, then quotaExhausted with nothing written.
            try await f.put(user, Collections.readings, "r1", "{}")
            try await f.put(user, Collections.readings, "r2", "{}")
            let exhausted = await expectStoreError(.quotaExhausted, kind) { try await f.put(user, Collections.readings, "r3", "{}") }
            #expect(exhausted?.state?.counters["readings"]?.used == 2, "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "readings", id: "r3") == nil, "[\(kind)]")
            try await f.checkInvariants([user])

            await expectStoreError(.userNotFound, kind) { try await f.put(randomId(), notes, "x", "{}") }
            await expectStoreError(.userNotFound, kind) { try await f.put(randomId(), chat, "x", #"{"sentAt":"x"}"#) }
        }
    }

    @Test("writeDocument: an idempotency key replays the stored response, refuses another request, and stores no refusal", arguments: StoreKind.allCases)
    func idempotency(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser(tokens: 10)
            let put = DocumentMutation(collection: chat, docId: "k1", operation: .put(try json(#"{"sentAt":"t1"}"#)))
            let key = IdempotencyKey(scope: user, key: randomId("key-"), fingerprint: "PUT /v1/collections/chat_messages/docs/k1 1")
            let write: @Sendable (DocumentMutation, IdempotencyKey) async throws -> Execution = { mutation, key in
                try await f.store.writeDocument(mutation, userId: user, idempotency: key, now: f.now) { try DocumentBody.render($0) }
            }
            let attempts = try await concurrently(20) { _ in try await write(put, key) }
            let original = try KeyedAttempts(attempts).expectOneCharge(of: 20, "[\(kind)]")
            #expect(original.status == 201, "[\(kind)]")
            f.clock.advance(by: 60)
            try await f.put(user, notes, "later", "{}")
            #expect(try await write(put, key) == .replayed(original), "[\(kind)] the stored bytes, not a new rendering")
            #expect(try await f.store.document(userId: user, collection: chat.name, id: "k1")?.version == 1, "[\(kind)] a replay wrote")
            #expect(try await f.store.accountState(userId: user, now: f.now)?.counters["messages"]?.used == 1, "[\(kind)] charged twice")
            await expectStoreError(.idempotencyMismatch, kind) {
                try await write(put, IdempotencyKey(scope: user, key: key.key, fingerprint: "PUT /v1/collections/chat_messages/docs/k2 1"))
            }

            // A refusal stores nothing under its key: the same request runs again once it can succeed.
            let createOnly = DocumentMutation(collection: notes, docId: "later", operation: .put(try json("{}")), ifVersion: 0)
            let refusedKey = IdempotencyKey(scope: user, key: randomId("key-"), fingerprint: "PUT /v1/collections/notes/docs/later 0")
            await expectStoreError(.versionConflict, kind) { try await write(createOnly, refusedKey) }
            try await f.delete(user, notes, "later")
            guard case .executed(let response) = try await write(createOnly, refusedKey) else {
                Issue.record("[\(kind)] a refusal was stored under its key")
                return
            }
            #expect(response.status == 201, "[\(kind)]")
            try await f.checkInvariants([user])
        }
    }

    @Test("documents(query:): ordered by range value and id, both ways, from inclusive, to exclusive, paged by keyset", arguments: StoreKind.allCases)
    func rangeQueries(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let other = try await f.newUser()
            var expected: [DocumentRecord] = []
            for day in [14, 11, 13, 10, 12, 13, 15, 13, 19, 16] {
                let id = "d\(expected.count)"
                expected.append(try await f.put(user, logs, id, #"{"date":"2027-01-\#(day)","n":\#(expected.count)}"#).document)
            }
            try await f.put(other, logs, "d0", #"{"date":"2027-01-12"}"#)
            try await f.delete(user, logs, "d9")
            expected.removeLast()
            let replaced = try await f.put(user, logs, "d1", #"{"date":"2027-01-17"}"#)
            expected[1] = replaced.document
            expected.sort { ($0.rangeValue!, $0.id) < ($1.rangeValue!, $1.id) }

            func query(from: String? = nil, to: String? = nil, descending: Bool = false, limit: Int = 100) async throws -> [DocumentRecord] {
                var range = DocumentRangeQuery(collection: logs.name, from: from, to: to, descending: descending, limit: limit)
                var all: [DocumentRecord] = []
                for _ in 0..<1_000 {
                    let page = try await f.store.documents(userId: user, query: range)
                    #expect(page.documents.count <= limit, "[\(kind)]")
                    #expect(!page.hasMore || page.documents.count == limit, "[\(kind)] a short page says more")
                    all += page.documents
                    guard page.hasMore, let last = page.documents.last else { return all }
                    range.after = (last.rangeValue, last.id)
                }
                throw HarnessError("[\(kind)] the pages never end")
            }
            #expect(try await query() == expected, "[\(kind)]")
            #expect(try await query(descending: true) == expected.reversed(), "[\(kind)]")
            let window = expected.filter { $0.rangeValue! >= "2027-01-12" && $0.rangeValue! < "2027-01-15" }
            #expect(window.map(\.id) == ["d4", "d2", "d5", "d7", "d0"], "[\(kind)] ties in date ordered by id")
            for limit in [1, 2, 3, 100] {
                #expect(try await query(from: "2027-01-12", to: "2027-01-15", limit: limit) == window, "[\(kind)] limit \(limit)")
                #expect(try await query(from: "2027-01-12", to: "2027-01-15", descending: true, limit: limit) == window.reversed(), "[\(kind)]")
                #expect(try await query(limit: limit) == expected, "[\(kind)] limit \(limit)")
            }
            #expect(try await query(from: "2027-01-16") == expected.filter { $0.rangeValue! >= "2027-01-16" }, "[\(kind)]")
            #expect(try await query(to: "2027-01-11", descending: true) == [expected[0]], "[\(kind)]")
            #expect(try await query(from: "2027-01-13", to: "2027-01-13").isEmpty, "[\(kind)]")
            #expect(try await f.store.documents(userId: user, query: DocumentRangeQuery(collection: logs.name, limit: 3)) == RangePage(documents: Array(expected.prefix(3)), hasMore: true), "[\(kind)]")
            // A position outside the bounds leaves the bounds in force.
            var outside = DocumentRangeQuery(collection: logs.name, from: "2027-01-13", limit: 100)
            outside.after = ("2027-01-10", "zzz")
            #expect(try await f.store.documents(userId: user, query: outside).documents == expected.filter { $0.rangeValue! >= "2027-01-13" }, "[\(kind)]")
            outside = DocumentRangeQuery(collection: logs.name, to: "2027-01-13", descending: true, limit: 100)
            outside.after = ("2027-01-19", "a")
            #expect(try await f.store.documents(userId: user, query: outside).documents == expected.filter { $0.rangeValue! < "2027-01-13" }.reversed(), "[\(kind)]")

            // Without a range key: by id.
            for id in ["b", "a", "d", "c", "e"] {
                try await f.put(user, notes, id, #"{"id":"\#(id)"}"#)
            }
            try await f.delete(user, notes, "c")
            #expect(try await f.allDocuments(user, notes.name, pageSize: 2).map(\.id) == ["a", "b", "d", "e"], "[\(kind)]")
            #expect(try await f.allDocuments(user, notes.name, descending: true, pageSize: 3).map(\.id) == ["e", "d", "b", "a"], "[\(kind)]")
            #expect(try await f.allDocuments(user, "nothing").isEmpty, "[\(kind)]")
        }
    }

    @Test("documents(query:): a page read again after any write of the user's documents shows the write (the stores keep pages read)", arguments: StoreKind.allCases)
    func pagesFollowWrites(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let month = DocumentRangeQuery(collection: logs.name, from: "2027-01-01", to: "2027-02-01", limit: 20)
            func ids() async throws -> [String] { try await f.store.documents(userId: user, query: month).documents.map(\.id) }
            try await f.put(user, logs, "a", #"{"date":"2027-01-10"}"#)
            #expect(try await ids() == ["a"], "[\(kind)]")
            #expect(try await ids() == ["a"], "[\(kind)]")
            try await f.put(user, logs, "b", #"{"date":"2027-01-05"}"#)
            #expect(try await ids() == ["b", "a"], "[\(kind)] after a create")
            try await f.patch(user, logs, "b", #"{"date":"2027-01-20"}"#)
            #expect(try await ids() == ["a", "b"], "[\(kind)] after a patch")
            try await f.delete(user, logs, "a")
            #expect(try await ids() == ["b"], "[\(kind)] after a delete")
            let pushed = ClientMutation(id: 1, mutation: DocumentMutation(
                collection: logs, docId: "c", operation: .put(.object(["date": .string("2027-01-01")]))))
            _ = try await f.store.push(userId: user, clientId: "pages-client-0001", mutations: [pushed], now: f.now)
            #expect(try await ids() == ["c", "b"], "[\(kind)] after a push")
            // Another user's write leaves this user's page as it is; their own page is theirs.
            let other = try await f.newUser()
            try await f.put(other, logs, "z", #"{"date":"2027-01-02"}"#)
            #expect(try await ids() == ["c", "b"], "[\(kind)]")
            #expect(try await f.store.documents(userId: other, query: month).documents.map(\.id) == ["z"], "[\(kind)]")
            #expect(try await f.store.deleteUser(id: user), "[\(kind)]")
            #expect(try await ids() == [], "[\(kind)] after the account's deletion")
        }
    }

    @Test("documents(query:): keyset paging while another task writes visits each existing document once", arguments: StoreKind.allCases)
    func pagingWhileWriting(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            var existing: [String: String] = [:]
            for index in 0..<40 {
                let date = "2027-02-\(10 + index % 13)"
                try await f.put(user, logs, "p\(index)", #"{"date":"\#(date)"}"#)
                existing["p\(index)"] = date
            }
            let dates = existing
            // New documents anywhere in the order, deleted again; existing ones replaced at the same place.
            @Sendable func churn() async throws {
                for index in 0..<60 {
                    try await f.put(user, logs, "n\(index)", #"{"date":"2027-02-\#(10 + index * 7 % 13)"}"#)
                    let replaced = "p\(index % 40)"
                    try await f.put(user, logs, replaced, #"{"date":"\#(dates[replaced]!)","edit":\#(index)}"#)
                    if index >= 3 { try await f.delete(user, logs, "n\(index - 3)") }
                }
                for index in 57..<60 { try await f.delete(user, logs, "n\(index)") }
            }
            for descending in [false, true] {
                async let writes: Void = churn()
                var seen: [DocumentRecord] = []
                var query = DocumentRangeQuery(collection: logs.name, descending: descending, limit: 3)
                for _ in 0..<1_000 {
                    let page = try await f.store.documents(userId: user, query: query)
                    seen += page.documents
                    guard page.hasMore, let last = page.documents.last else { break }
                    query.after = (last.rangeValue, last.id)
                    await Task.yield()
                }
                try await writes
                let positions = seen.map { ($0.rangeValue!, $0.id) }
                #expect(zip(positions, positions.dropFirst()).allSatisfy { descending ? $0 > $1 : $0 < $1 }, "[\(kind)] out of order")
                let visited = seen.map(\.id).filter { $0.hasPrefix("p") }
                #expect(visited.sorted() == dates.keys.sorted(), "[\(kind)] descending \(descending): \(visited.count) visits of 40")
                #expect(try await f.allDocuments(user, logs.name).map(\.id).sorted() == dates.keys.sorted(), "[\(kind)]")
            }
        }
    }

    @Test("deleteUser removes documents and sync clients; linking a guest keeps them", arguments: StoreKind.allCases)
    func accounts(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let user = try await f.newUser()
            let client = randomId("client-")
            let doc = try await f.put(user, notes, "x", #"{"n":1}"#)
            _ = try await f.store.push(userId: user, clientId: client, mutations: [mutation(1, notes, "y", .put(try json("{}")))], now: f.now)

            _ = try await f.store.linkCredentials(userId: user, email: "\(randomId())@example.com", passwordHash: "hash")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "x") == doc.document, "[\(kind)] linking lost a document")
            let linked = try await f.store.push(
                userId: user, clientId: client, mutations: [mutation(1, notes, "y", .delete), mutation(2, notes, "z", .put(try json("{}")))],
                now: f.now)
            #expect(linked.results.first == .duplicate && linked.results.last?.appliedVersion == 3, "[\(kind)] \(linked.results)")

            #expect(try await f.store.deleteUser(id: user), "[\(kind)]")
            #expect(try await f.store.document(userId: user, collection: "notes", id: "x") == nil, "[\(kind)]")
            #expect(try await f.store.documents(userId: user, query: DocumentRangeQuery(collection: "notes", limit: 10)).documents.isEmpty, "[\(kind)]")
            // The client id is free again, from mutation 1.
            let next = try await f.newUser()
            let reused = try await f.store.push(userId: next, clientId: client, mutations: [mutation(1, notes, "x", .put(try json("{}")))], now: f.now)
            #expect(reused.lastMutationId == 1 && reused.results.first?.appliedVersion == 1, "[\(kind)] \(reused.results)")
            #expect(try await f.store.changes(userId: next, after: nil, limit: 10).lastMutationIds == [client: 1], "[\(kind)]")
        }
    }

    @Test("isolation: another user's document ids, changes and clients are unreachable", arguments: StoreKind.allCases)
    func isolation(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let alice = try await f.newUser()
            let bob = try await f.newUser()
            let secret = try await f.put(alice, notes, "shared", #"{"owner":"alice"}"#)
            try await f.put(alice, logs, "l1", #"{"date":"2027-01-01"}"#)
            try await f.put(alice, notes, "more", "{}")
            let aliceClient = randomId("client-")
            _ = try await f.store.push(userId: alice, clientId: aliceClient, mutations: [mutation(4, notes, "p", .put(try json("{}")))], now: f.now)

            #expect(try await f.store.document(userId: bob, collection: "notes", id: "shared") == nil, "[\(kind)]")
            await expectStoreError(.documentNotFound, kind) { try await f.patch(bob, notes, "shared", #"{"owner":"bob"}"#) }
            await expectStoreError(.documentNotFound, kind) { try await f.delete(bob, notes, "shared") }
            let blind = await expectStoreError(.versionConflict, kind) { try await f.put(bob, notes, "shared", "{}", ifVersion: 1) }
            #expect(blind != nil && blind?.current == nil, "[\(kind)] bob saw alice's document in a conflict")
            let own = try await f.put(bob, notes, "shared", #"{"owner":"bob"}"#)
            #expect(own.created && own.document.version == 1, "[\(kind)] bob's counter is his own")
            #expect(try await f.store.document(userId: alice, collection: "notes", id: "shared") == secret.document, "[\(kind)]")

            let bobChanges = try await f.allChanges(bob, after: 0)
            #expect(bobChanges.changes == [own.document] && bobChanges.cursor == 1, "[\(kind)]")
            #expect(try await f.store.changes(userId: bob, after: nil, limit: 100).changes == [own.document], "[\(kind)]")
            #expect(try await f.allDocuments(bob, logs.name).isEmpty, "[\(kind)]")
            #expect(try await f.allDocuments(bob, notes.name) == [own.document], "[\(kind)]")
            // Alice's cursor means nothing for Bob: beyond his current version.
            await expectStoreError(.resyncRequired, kind) { try await f.store.changes(userId: bob, after: 4, limit: 100) }
            #expect(try await f.store.changes(userId: bob, after: nil, limit: 10).lastMutationIds.isEmpty, "[\(kind)]")
            #expect(try await f.store.changes(userId: alice, after: nil, limit: 10).lastMutationIds == [aliceClient: 4], "[\(kind)]")
        }
    }
}
