import Foundation
import HTTPTypes
import TallyAPI
import TallyStore
import Testing

@testable import TallyServer

/// Documents over plain REST, on the real HTTP stack: create, replace, merge-patch, delete, ETags and
/// preconditions, idempotency, range queries and their cursors, and metered collections.
@Suite("Collections over REST", .timeLimit(.minutes(3)))
struct CollectionsTests {
    @Test("GET /v1/collections lists the declared collections in order")
    func listsCollections() async throws {
        try await SyncFixture.server(.sqlite) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let list = try await api.send(.get, "/v1/collections", token: user.accessToken).decode(CollectionList.self)
            #expect(list.items == [
                CollectionInfo(name: "habit_logs", rangeKey: "date", maxDocumentBytes: 16_384, maxDocuments: 10_000),
                CollectionInfo(name: "chat_messages", rangeKey: "sentAt", maxDocumentBytes: 16_384, maxDocuments: 10_000, action: "chat.message"),
                CollectionInfo(name: "profile", maxDocumentBytes: 200, maxDocuments: 3),
                CollectionInfo(name: "drafts", maxDocumentBytes: 262_144, maxDocuments: 10_000),
            ])
            #expect(try await api.send(.get, "/v1/collections").status == .unauthorized)
            await api.close()
        }
    }

    @Test("Create, replace, get with ETag and 304, merge-patch, delete and re-create", arguments: StoreKind.allCases)
    func lifecycle(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let created = try await api.putDocument(user, "habit_logs", "run-1", jsonValue(#"{"date":"2027-01-15","habit":"run","done":false}"#))
            #expect(created.status == .created, "\(created.text)")
            let first = try created.decode(Document.self)
            #expect(first.id == "run-1" && first.collection == "habit_logs" && !first.deleted && first.version >= 1)
            #expect(first.data == jsonValue(#"{"date":"2027-01-15","habit":"run","done":false}"#))
            #expect(first.updatedAt == server.clock.now)

            // One counter per user across collections: every change gets a higher version.
            let profile = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#))
            #expect(profile.status == .created)
            let profileVersion = try profile.decode(Document.self).version
            #expect(profileVersion > first.version)
            let replaced = try await api.putDocument(user, "habit_logs", "run-1", jsonValue(#"{"date":"2027-01-15","habit":"run","done":true}"#))
            #expect(replaced.status == .ok)
            let second = try replaced.decode(Document.self)
            #expect(second.version > profileVersion && second.data["done"] == .bool(true))

            let fetched = try await api.getDocument(user, "habit_logs", "run-1")
            #expect(fetched.status == .ok && fetched.headers[.eTag] == "\"\(second.version)\"")
            #expect(try fetched.decode(Document.self) == second)
            let notModified = try await api.getDocument(user, "habit_logs", "run-1", headers: [.ifNoneMatch: "\"\(second.version)\""])
            #expect(notModified.status == .notModified && notModified.body.isEmpty)
            let stale = try await api.getDocument(user, "habit_logs", "run-1", headers: [.ifNoneMatch: "\"\(first.version)\""])
            #expect(stale.status == .ok)

            // Two devices patch different fields: both edits stay. null removes a field.
            let phone = try await api.patchDocument(user, "habit_logs", "run-1", jsonValue(#"{"minutes":30}"#))
            let watch = try await api.patchDocument(user, "habit_logs", "run-1", jsonValue(#"{"done":null,"heartRate":{"max":171}}"#))
            #expect(phone.status == .ok && watch.status == .ok, "\(phone.text) \(watch.text)")
            let merged = try watch.decode(Document.self)
            #expect(merged.data == jsonValue(#"{"date":"2027-01-15","habit":"run","minutes":30,"heartRate":{"max":171}}"#))
            #expect(try await api.getDocument(user, "habit_logs", "run-1").decode(Document.self) == merged)

            // A patch must say it is one; the document is unchanged.
            let plainJSON = try await api.send(.patch, "/v1/collections/habit_logs/docs/run-1", token: user.accessToken, raw: #"{"minutes":1}"#)
            #expect(plainJSON.status == .unsupportedMediaType && plainJSON.errorCode == "unsupported_media_type", "\(plainJSON.text)")
            #expect(try await api.patchDocument(user, "habit_logs", "absent", jsonValue(#"{"a":1}"#)).status == .notFound)

            let deleted = try await api.deleteDocument(user, "habit_logs", "run-1")
            #expect(deleted.status == .noContent && deleted.body.isEmpty)
            #expect(try await api.getDocument(user, "habit_logs", "run-1").status == .notFound)
            #expect(try await api.deleteDocument(user, "habit_logs", "run-1").status == .notFound)
            #expect(try await api.patchDocument(user, "habit_logs", "run-1", jsonValue(#"{"a":1}"#)).status == .notFound)
            let again = try await api.putDocument(user, "habit_logs", "run-1", jsonValue(#"{"date":"2027-01-16"}"#))
            #expect(again.status == .created)
            #expect(try again.decode(Document.self).version > merged.version + 1, "the delete took a version of its own")
            await api.close()
        }
    }

    @Test("If-Match and If-None-Match: * make writes conditional; a mismatch is 412 with the current document", arguments: StoreKind.allCases)
    func preconditions(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let absent = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#), headers: [.ifMatch: "\"3\""])
            #expect(absent.status == .preconditionFailed && absent.errorCode == "version_conflict")
            #expect(absent.text.contains(#""current":null"#), "\(absent.text)")
            let created = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#), headers: [.ifNoneMatch: "*"])
            #expect(created.status == .created)
            let document = try created.decode(Document.self)
            let exists = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Eve"}"#), headers: [.ifNoneMatch: "*"])
            #expect(exists.status == .preconditionFailed && exists.errorCode == "version_conflict")
            #expect(try exists.decode(ErrorResponse.self).error.current == document)

            let stale = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Eve"}"#), headers: [.ifMatch: "\"\(document.version + 1)\""])
            #expect(stale.status == .preconditionFailed)
            #expect(try stale.decode(ErrorResponse.self).error.current == document)
            let stalePatch = try await api.patchDocument(user, "profile", "me", jsonValue(#"{"name":"Eve"}"#), headers: [.ifMatch: "\"0\""])
            #expect(stalePatch.status == .preconditionFailed)
            let staleDelete = try await api.deleteDocument(user, "profile", "me", headers: [.ifMatch: "\"\(document.version - 1)\""])
            #expect(staleDelete.status == .preconditionFailed)
            #expect(try await api.getDocument(user, "profile", "me").decode(Document.self) == document, "nothing changed")

            let matching = try await api.patchDocument(user, "profile", "me", jsonValue(#"{"name":"Eve"}"#), headers: [.ifMatch: "\"\(document.version)\""])
            #expect(matching.status == .ok)
            let patched = try matching.decode(Document.self)
            let gone = try await api.deleteDocument(user, "profile", "me", headers: [.ifMatch: "\"\(patched.version)\""])
            #expect(gone.status == .noContent)
            await api.close()
        }
    }

    @Test("Idempotency-Key: a retried write replays, another body is 422, nothing is written twice", arguments: StoreKind.allCases)
    func idempotentWrites(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let key: HTTPFields = [.idempotencyKey: "put-me-1"]
            let first = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#), headers: key)
            #expect(first.status == .created && first.headers[.idempotentReplayed] == nil)
            // Meanwhile another device changes it; the retry still answers what the first call did.
            #expect(try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Bea"}"#)).status == .ok)
            let retry = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#), headers: key)
            #expect(retry.status == .created && retry.headers[.idempotentReplayed] == "true" && retry.body == first.body)
            #expect(try await api.getDocument(user, "profile", "me").decode(Document.self).data == jsonValue(#"{"name":"Bea"}"#))
            let other = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Cy"}"#), headers: key)
            #expect(other.status == .unprocessableContent && other.errorCode == "idempotency_mismatch")
            // The same body under another precondition is another request.
            let conditional = try await api.putDocument(user, "profile", "me", jsonValue(#"{"name":"Ada"}"#), headers: key.merging([.ifNoneMatch: "*"]))
            #expect(conditional.status == .unprocessableContent)

            let deleteKey: HTTPFields = [.idempotencyKey: "delete-me-1"]
            #expect(try await api.deleteDocument(user, "profile", "me", headers: deleteKey).status == .noContent)
            let replayedDelete = try await api.deleteDocument(user, "profile", "me", headers: deleteKey)
            #expect(replayedDelete.status == .noContent && replayedDelete.headers[.idempotentReplayed] == "true")
            #expect(try await api.state(user).isEmpty)
            // Three changes so far (create, replace, delete): the replays took no version.
            let next = try await api.putDocument(user, "profile", "x", jsonValue(#"{"n":1}"#)).decode(Document.self)
            let firstVersion = try first.decode(Document.self).version
            #expect(next.version == firstVersion + 3)
            await api.close()
        }
    }

    @Test("Range queries: from inclusive, to exclusive, both orders, fields, deleted left out", arguments: StoreKind.allCases)
    func rangeQueries(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let days = ["2027-01-10", "2027-01-11", "2027-01-12", "2027-01-13", "2027-01-14"]
            for (index, day) in days.enumerated() {
                for habit in ["read", "run"] {
                    let put = try await api.putDocument(
                        user, "habit_logs", "\(habit)-\(index)", .object(["date": .string(day), "habit": .string(habit), "note": .string("n\(index)")]))
                    #expect(put.status == .created)
                }
            }
            #expect(try await api.deleteDocument(user, "habit_logs", "run-2").status == .noContent)
            func page(_ query: String) async throws -> DocumentPage {
                let response = try await api.send(.get, "/v1/collections/habit_logs/docs?\(query)", token: user.accessToken)
                try #require(response.status == .ok, "\(query): \(response.text)")
                return try response.decode()
            }
            let range = try await page("from=2027-01-11&to=2027-01-13")
            #expect(range.items.map(\.id) == ["read-1", "run-1", "read-2"], "ordered by (date, id); run-2 is deleted")
            #expect(range.nextCursor == nil)
            let newest = try await page("order=desc&limit=3")
            #expect(newest.items.map(\.id) == ["run-4", "read-4", "run-3"])
            let nextCursor = try #require(newest.nextCursor)
            let older = try await page("order=desc&limit=3&cursor=\(nextCursor)")
            #expect(older.items.map(\.id) == ["read-3", "read-2", "run-1"])
            let narrow = try await page("fields=habit,missing&limit=1")
            let item = try #require(narrow.items.first)
            #expect(item.data == jsonValue(#"{"habit":"read"}"#) && item.id == "read-0" && item.version >= 1)
            let all = try await page("limit=100")
            #expect(all.items.count == 9 && all.items.allSatisfy { !$0.deleted })

            let profile = try await api.send(.get, "/v1/collections/profile/docs?from=a", token: user.accessToken)
            #expect(profile.status == .badRequest && profile.errorCode == "invalid_query")
            await api.close()
        }
    }

    @Test("Cursor pagination visits every document exactly once while writes continue", arguments: StoreKind.allCases)
    func paginationUnderWrites(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            var random = SplitMix64(seed: 19)
            func day(_ random: inout SplitMix64) -> String { "2027-02-\(10 + Int(random.next() % 18))" }
            var stable: [String: String] = [:]  // id → date: documents that exist throughout and keep their date
            for index in 0..<40 {
                let date = day(&random)
                #expect(try await api.putDocument(user, "habit_logs", "s\(index)", .object(["date": .string(date), "n": .int(index)])).status == .created)
                stable["s\(index)"] = date
            }
            for order in ["asc", "desc"] {
                var seen: [String] = []
                var positions: [(String, String)] = []
                var cursor: String?
                var step = 0
                repeat {
                    let path = "/v1/collections/habit_logs/docs?order=\(order)&limit=6" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let response = try await api.send(.get, path, token: user.accessToken)
                    try #require(response.status == .ok, "\(response.text)")
                    let page = try response.decode(DocumentPage.self)
                    seen += page.items.map(\.id)
                    positions += page.items.map { ($0.data["date"]?.stringValue ?? "", $0.id) }
                    cursor = page.nextCursor
                    // Between pages: new documents on both sides of the cursor, edits that keep the date,
                    // and deletes of documents added meanwhile.
                    step += 1
                    let added = "\(order)-new\(step)"
                    #expect(try await api.putDocument(user, "habit_logs", added, .object(["date": .string(day(&random))])).status == .created)
                    let edited = "s\(Int(random.next() % 40))"
                    #expect(try await api.patchDocument(user, "habit_logs", edited, .object(["edited": .int(step)])).status == .ok)
                    if step % 3 == 0 { #expect(try await api.deleteDocument(user, "habit_logs", "\(order)-new\(step - 1)").status == .noContent) }
                } while cursor != nil
                #expect(Set(seen).count == seen.count, "\(order): a document was listed twice: \(seen)")
                #expect(Set(stable.keys).isSubset(of: Set(seen)), "\(order): missed \(Set(stable.keys).subtracting(seen).sorted())")
                let sorted = positions.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
                #expect(positions.map(\.1) == (order == "asc" ? sorted : sorted.reversed()).map(\.1), "\(order): out of (date, id) order")
            }
            await api.close()
        }
    }

    @Test("A metered collection charges once per created document, in the same write; 402 writes nothing", arguments: StoreKind.allCases)
    func meteredCollection(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 5)
            func message(_ index: Int, _ text: String = "hello") -> JSONValue {
                .object(["sentAt": .string("2027-01-15T08:00:0\(index)Z"), "text": .string(text)])
            }
            // Two free messages a day, then 2 tokens each.
            for index in 1...4 {
                let put = try await api.putDocument(user, "chat_messages", "m\(index)", message(index), headers: [.idempotencyKey: "m\(index)"])
                #expect(put.status == .created, "\(put.text)")
            }
            #expect(try await api.wallet(user).balance == 1)
            // Replays, replacements and patches create nothing: no charge.
            #expect(try await api.putDocument(user, "chat_messages", "m4", message(4), headers: [.idempotencyKey: "m4"]).headers[.idempotentReplayed] == "true")
            #expect(try await api.putDocument(user, "chat_messages", "m1", message(1, "edited")).status == .ok)
            #expect(try await api.patchDocument(user, "chat_messages", "m2", jsonValue(#"{"text":"patched"}"#)).status == .ok)
            #expect(try await api.wallet(user).balance == 1)

            let before = try await api.pull(user).text
            let refused = try await api.putDocument(user, "chat_messages", "m5", message(5))
            #expect(refused.status == .paymentRequired && refused.errorCode == "insufficient_tokens", "\(refused.text)")
            let body = try refused.decode(ErrorResponse.self)
            #expect(body.wallet?.balance == 1 && body.quotas?.first { $0.name == "messages" }?.remaining == 0)
            #expect(try await api.getDocument(user, "chat_messages", "m5").status == .notFound)
            #expect(try await api.pull(user).text == before, "a refused write changes nothing")

            // A deleted message created again is created again: charged again.
            try await api.grant(2, to: user)
            #expect(try await api.deleteDocument(user, "chat_messages", "m1").status == .noContent)
            #expect(try await api.putDocument(user, "chat_messages", "m1", message(1)).status == .created)
            #expect(try await api.wallet(user).balance == 1)
            let debits = try await api.allEntries(user).filter { $0.kind == "debit" }
            #expect(debits.count == 3 && debits.allSatisfy { $0.amount == -2 && $0.reason == "chat.message" }, "\(debits)")
            let quotas = try await api.send(.get, "/v1/quotas", token: user.accessToken).decode(QuotaList.self)
            #expect(quotas.items.first { $0.name == "messages" }?.used == 2)
            try await api.expectBooksBalance(user)
            await api.close()
        }
    }

    @Test("The largest document a collection may declare gets through, one byte more is 413; so does a push of almost 1 MiB", arguments: StoreKind.allCases)
    func largestDocuments(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            // {"text":"…"} is 11 bytes around the text.
            let largest = JSONValue.object(["text": .string(String(repeating: "é", count: 131_066) + "x")])
            #expect(largest.bytes.count == 262_144)
            let put = try await api.putDocument(user, "drafts", "largest", largest)
            #expect(put.status == .created, "\(put.text.prefix(200))")
            #expect(try await api.getDocument(user, "drafts", "largest").decode(Document.self).data == largest)
            let over = JSONValue.object(["text": .string(String(repeating: "é", count: 131_067))])
            let refused = try await api.putDocument(user, "drafts", "over", over)
            #expect(refused.status == .contentTooLarge && refused.errorCode == "document_too_large", "\(refused.text.prefix(200))")

            let mutations = (1...4).map { index in
                SyncMutation(id: Int64(index), op: .put, collection: "drafts", docId: "d\(index)", data: .object(["text": .string(String(repeating: "\(index)", count: 260_000))]))
            }
            let body = try TallyJSON.encoder().encode(SyncPushRequest(clientId: "large-push-client-01", mutations: mutations))
            #expect((1_000_000...1_048_576).contains(body.count), "\(body.count)")
            let pushed = try await api.push(user, clientId: "large-push-client-01", mutations)
            #expect(pushed.status == .ok, "\(pushed.text.prefix(200))")
            #expect(try pushed.decode(SyncPushResponse.self).results.allSatisfy { $0.status == .applied })
            let state = try await api.state(user)
            #expect(state.count == 5 && mutations.allSatisfy { state["drafts/\($0.docId)"]?.data == $0.data })
            await api.close()
        }
    }

    @Test("Range cursors round-trip and anything else is refused: unsealed, edited, another user's or collection's")
    func rangeCursorEncoding() throws {
        let keys = CursorKeys()
        keys.install(try SigningKeys(parsing: Secrets.random(bytes: 32)))
        let record = DocumentRecord(
            collection: "c", id: "a_b-9", data: [], rangeValue: "2027-01-15T08:00:00Z:é", version: 4, updatedAt: Date(), deleted: false)
        let cursor = try RangeCursor.encode(after: record, userId: "u1", keys: keys)
        func decode(_ cursor: String, collection: String = "c", rangeKeyed: Bool = true, userId: String = "u1") throws
            -> (rangeValue: String?, id: String)
        {
            try RangeCursor.decode(cursor, collection: collection, rangeKeyed: rangeKeyed, userId: userId, keys: keys)
        }
        let decoded = try decode(cursor)
        #expect(decoded.rangeValue == "2027-01-15T08:00:00Z:é" && decoded.id == "a_b-9")
        #expect(throws: APIError.self) { try decode(cursor, rangeKeyed: false) }
        #expect(throws: APIError.self) { try decode(cursor, userId: "u2") }
        #expect(throws: APIError.self) { try decode(cursor, collection: "d") }
        var plain = record
        plain.rangeValue = nil
        let decodedPlain = try decode(try RangeCursor.encode(after: plain, userId: "u1", keys: keys), rangeKeyed: false)
        #expect(decodedPlain.rangeValue == nil && decodedPlain.id == "a_b-9")
        // A position written by hand (what the cursor used to be: base64url of the position), or a sealed one edited.
        var edited = try #require(Secrets.base64URLDecoded(cursor))
        edited[edited.count - CursorKeys.tagBytes - 1] ^= 1
        for garbage in [
            "", "!!", Secrets.base64URL(Data("r99:ab".utf8)), Secrets.base64URL(Data("r1:a".utf8)), Secrets.base64URL(Data("nbad id".utf8)),
            Secrets.base64URL(Data("x12".utf8)), Secrets.base64URL(Data("r4:2028a_b-9".utf8)), Secrets.base64URL(edited),
        ] {
            #expect(throws: APIError.self, "\(garbage)") { try decode(garbage) }
        }
    }
}
