import Foundation
import HTTPTypes
import TallyAPI
import TallyStore
import Testing

@testable import TallyServer

/// What one user's sync may cost the server, through the real HTTP stack (issue 31): pulls in flight per user,
/// pages bounded by bytes, the push rate limit, the storage budget, idle client ids, sealed cursors, and JSON
/// object keys compared by code points.
@Suite("Sync limits over HTTP", .timeLimit(.minutes(3)))
struct SyncLimitsTests {
    /// Documents of 250,000 bytes of data in `drafts` (whose limit is 256 KiB), `count` of them, pushed 3 at a time.
    static func seedDrafts(_ api: APIConnection, _ user: TestUser, count: Int, client: String = "drafts-client-0001") async throws {
        let text = String(repeating: "d", count: 249_990)
        for start in stride(from: 0, to: count, by: 3) {
            let mutations = (start..<min(start + 3, count)).map {
                SyncMutation(id: Int64($0 + 1), op: .put, collection: "drafts", docId: "p\($0)", data: .object(["t": .string(text)]))
            }
            let pushed = try await api.push(user, clientId: client, mutations)
            try #require(pushed.status == .ok, "\(pushed.status) \(pushed.text.prefix(200))")
        }
    }

    /// Sends `path` until the answer has `status` (at most 20 s); the last answer.
    static func poll(_ api: APIConnection, _ user: TestUser, _ path: String, until status: HTTPResponse.Status) async throws -> APIResponse {
        let start = ContinuousClock.now
        while true {
            let response = try await api.send(.get, path, token: user.accessToken)
            if response.status == status || ContinuousClock.now - start > .seconds(20) { return response }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test("A user's fifth pull in flight is refused with 429 and Retry-After; another user's is not; a slot frees when its client goes", arguments: StoreKind.allCases)
    func pullsInFlightPerUser(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let other = try await api.newGuest()
            try await Self.seedDrafts(api, user, count: 6)
            try await Self.seedDrafts(api, other, count: 1, client: "drafts-client-0002")
            // Four connections each ask for 32 pages of 1 MiB and read none: each holds its pull's slot while its
            // answer waits (the request timeout, 30 s here, is not reached).
            let pull = "GET /v1/sync/pull?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(user.accessToken)\r\n\r\n"
            let stalled = try (0..<4).map { _ in
                let client = try UnreadConnection(port: server.port)
                try client.send(String(repeating: pull, count: 32))
                return client
            }
            // Nothing else pulls until the four are stalled: a pull answered meanwhile could take a slot one of them
            // needs for its next page, which it would then get refused.
            #expect(try await UnreadConnection.waitUntilStalled(stalled, serverPort: server.port, within: .seconds(60)), "the answers never stalled")
            let refused = try await Self.poll(api, user, "/v1/sync/pull", until: .tooManyRequests)
            #expect(refused.status == .tooManyRequests, "a fifth pull was answered: \(refused.status)")
            #expect(refused.errorCode == "rate_limited" && refused.headers[.retryAfter] == "1", "\(refused.text)")
            #expect(try await api.pull(other).status == .ok, "another user's pull was refused")
            // A client that goes away gives its slot back once the server's write to it fails.
            for client in stalled { client.reset() }
            let answered = try await Self.poll(api, user, "/v1/sync/pull", until: .ok)
            #expect(answered.status == .ok, "the slots stayed taken: \(answered.status)")
            await api.close()
        }
    }

    @Test("Pull pages over HTTP hold at most 1 MiB of data (or one document) and bring every document exactly once", arguments: StoreKind.allCases)
    func byteBoundedPulls(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            try await Self.seedDrafts(api, user, count: 14)  // 3.5 MB
            var mutationId: Int64 = 100
            for id in ["p2", "p7"] {
                mutationId += 1
                #expect(try await api.push(user, clientId: "drafts-client-0001", [SyncMutation(id: mutationId, op: .delete, collection: "drafts", docId: id)]).status == .ok)
            }
            for start in [nil, "from the first page"] as [String?] {
                var cursor: String?
                if start != nil {
                    cursor = try await api.pull(user, limit: 1).decode(SyncPullResponse.self).cursor
                }
                var replica: [String: Document] = [:]
                var seen: [String] = []
                var pages = 0
                while true {
                    let response = try await api.pull(user, cursor: cursor, limit: 1_000)
                    try #require(response.status == .ok, "\(response.status)")
                    let page = try response.decode(SyncPullResponse.self)
                    pages += 1
                    let bytes = page.changes.reduce(0) { $0 + $1.data.bytes.count }
                    #expect(bytes <= 1 << 20 || page.changes.count == 1, "a page of \(page.changes.count) documents, \(bytes) bytes")
                    #expect(response.body.count <= PageBoundLimit.pageBytes, "an answer of \(response.body.count) bytes")
                    for change in page.changes {
                        seen.append(change.id)
                        if change.deleted { replica[change.id] = nil } else { replica[change.id] = change }
                    }
                    cursor = page.cursor
                    if !page.hasMore { break }
                }
                #expect(pages > 1, "3.5 MB came in one page")
                #expect(Set(seen).count == seen.count, "a document came twice: \(seen)")
                if start == nil {
                    #expect(Set(replica.keys) == Set((0..<14).map { "p\($0)" }).subtracting(["p2", "p7"]))
                }
            }
            await api.close()
        }
    }

    @Test("Pushes past the user's rate limit are refused with 429 and Retry-After; another user's go on; the limit refills on the clock", arguments: StoreKind.allCases)
    func pushRateLimit(kind: StoreKind) async throws {
        let limits = try TallyConfiguration(file: "limits: {syncPushesPerUser: {limit: 3, seconds: 60}}", environment: [:]).limits
        try await LiveServer.with(kind, catalog: SyncFixture.catalog, limits: limits, configure: { $0.sync = SyncFixture.sync }) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let other = try await api.newGuest()
            let note = { (id: Int64) in [SyncMutation(id: id, op: .put, collection: "profile", docId: "p", data: .object(["n": .int(id)]))] }
            for id: Int64 in 1...3 { #expect(try await api.push(user, clientId: "rate-client-00001", note(id)).status == .ok) }
            let refused = try await api.push(user, clientId: "rate-client-00001", note(4))
            #expect(refused.status == .tooManyRequests && refused.errorCode == "rate_limited", "\(refused.status) \(refused.text)")
            #expect(refused.headers[.retryAfter].flatMap { Int($0) }.map { (1...20).contains($0) } == true, "\(refused.headers)")
            #expect(try await api.push(other, clientId: "rate-client-00002", note(1)).status == .ok)
            server.clock.advance(by: 20)  // one push every 20 s
            let pushed = try await api.push(user, clientId: "rate-client-00001", note(4))
            #expect(pushed.status == .ok, "\(pushed.status)")
            #expect(try pushed.decode(SyncPushResponse.self).lastMutationId == 4)
            await api.close()
        }
    }

    @Test("A configured budget refuses the next document (409 over REST, rejected in a push) and the next client id (409); deletes pass", arguments: StoreKind.allCases)
    func storageBudget(kind: StoreKind) async throws {
        let sync = try TallyConfiguration(
            file: SyncFixture.yaml + "\nmaxStoredDocumentsPerUser: 3\nmaxStoredBytesPerUser: 100000\nmaxClientIdsPerUser: 2\n", catalog: SyncFixture.catalog
        ).sync
        try await LiveServer.with(kind, catalog: SyncFixture.catalog, configure: { $0.sync = sync }) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let day = { (n: Int) in JSONValue.object(["date": .string("2027-01-1\(n)")]) }
            for n in 0..<2 { #expect(try await api.putDocument(user, "habit_logs", "d\(n)", day(n)).status == .created) }
            #expect(try await api.deleteDocument(user, "habit_logs", "d0").status == .noContent)
            let pushed = try await api.push(user, clientId: "budget-client-01", [
                SyncMutation(id: 1, op: .put, collection: "habit_logs", docId: "d2", data: day(2)),
                SyncMutation(id: 2, op: .put, collection: "habit_logs", docId: "d3", data: day(3)),
                SyncMutation(id: 3, op: .put, collection: "habit_logs", docId: "d0", data: day(0)),
            ]).decode(SyncPushResponse.self)
            #expect(pushed.results.map(\.status) == [.applied, .rejected, .applied], "\(pushed.results)")
            #expect(pushed.results[1].error?.code.rawValue == "storage_full", "\(pushed.results[1])")
            let full = try await api.putDocument(user, "habit_logs", "d4", day(4))
            #expect(full.status == .conflict && full.errorCode == "storage_full", "\(full.status) \(full.text)")
            #expect(try await api.deleteDocument(user, "habit_logs", "d1").status == .noContent, "a delete was refused")
            #expect(try await api.putDocument(user, "habit_logs", "d1", day(1)).status == .created, "a tombstone's row is its own")
            // Bytes: a document as large as the rest of the budget.
            let large = JSONValue.object(["t": .string(String(repeating: "b", count: 99_990))])
            let tooLarge = try await api.putDocument(user, "drafts", "big", large)
            #expect(tooLarge.status == .conflict && tooLarge.errorCode == "storage_full", "\(tooLarge.status)")
            // Client ids: the user has one; a second is taken, a third refused whole.
            #expect(try await api.push(user, clientId: "budget-client-02", []).status == .ok)
            let third = try await api.push(user, clientId: "budget-client-03", [SyncMutation(id: 1, op: .delete, collection: "habit_logs", docId: "d1")])
            #expect(third.status == .conflict && third.errorCode == "storage_full", "\(third.status) \(third.text)")
            #expect(try await api.getDocument(user, "habit_logs", "d1").status == .ok, "the refused push applied its delete")
            await api.close()
        }
    }

    @Test("Housekeeping forgets client ids idle longer than the tombstone retention; a client that pushed since stays", arguments: StoreKind.allCases)
    func idleClientIdsPurged(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let put = { (id: Int64) in [SyncMutation(id: id, op: .put, collection: "profile", docId: "p", data: .object(["n": .int(id)]))] }
            #expect(try await api.push(user, clientId: "idle-client-0001", put(1)).status == .ok)
            #expect(try await api.push(user, clientId: "busy-client-0001", put(1)).status == .ok)
            server.clock.advance(by: 86_400)
            #expect(try await api.push(user, clientId: "busy-client-0001", put(2)).status == .ok)
            server.clock.advance(by: 1.5 * 86_400)  // the idle client: 2.5 days, past the 2 days of retention
            try await server.sweep()
            let ids = try await api.pull(user).decode(SyncPullResponse.self).lastMutationIds
            #expect(ids == ["busy-client-0001": 2], "\(ids)")
            await api.close()
        }
    }

    @Test("A pull cursor made up, edited or of another user is 400 invalid_cursor, on pull and on the event stream", arguments: StoreKind.allCases)
    func forgedCursors(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let other = try await api.newGuest()
            #expect(try await api.putDocument(user, "habit_logs", "a", .object(["date": .string("2027-01-15")])).status == .created)
            let real = try await api.pull(user).decode(SyncPullResponse.self).cursor
            #expect(try await api.pull(user, cursor: real).status == .ok)
            // What the cursor used to be: base64url of `<version>.<first 12 hex digits of SHA-256(user id)>`, which
            // anyone can compute; and the same with `+1` as the version.
            let tag = Secrets.sha256(user.userId).prefix(12)
            var bytes = try #require(Secrets.base64URLDecoded(real))
            bytes[0] ^= 0x01  // one bit of the payload
            let others = try await api.pull(other).decode(SyncPullResponse.self).cursor
            let forged = [
                Secrets.base64URL(Data("1.\(tag)".utf8)), Secrets.base64URL(Data("+1.\(tag)".utf8)), Secrets.base64URL(Data("0.\(tag)".utf8)),
                Secrets.base64URL(bytes), others,
            ]
            for cursor in forged {
                let response = try await api.pull(user, cursor: cursor)
                #expect(response.status == .badRequest && response.errorCode == "invalid_cursor", "\(cursor): \(response.status)")
            }
            let (refused, head) = try await EventStreamClient.open(port: server.port, token: user.accessToken, path: "/v1/sync/events?cursor=\(forged[0])", headers: [])
            #expect(head.status == 400)
            await refused.close()
            await api.close()
        }
    }

    @Test("Document keys spelt in NFC and in NFD are two keys: stored, returned, pulled and merge-patched apart", arguments: StoreKind.allCases)
    func unicodeKeys(kind: StoreKind) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let (nfc, nfd) = ("caf\u{E9}", "cafe\u{301}")
            #expect(nfc == nfd, "Swift's String sees one")
            let body = #"{"data":{"date":"2027-01-15","\#(nfc)":1,"\#(nfd)":2}}"#
            let created = try await api.send(.put, "/v1/collections/habit_logs/docs/u", token: user.accessToken, raw: body)
            #expect(created.status == .created, "\(created.status) \(created.text)")
            let patch = try await api.send(
                .patch, "/v1/collections/habit_logs/docs/u", token: user.accessToken, raw: #"{"\#(nfd)":3}"#,
                headers: [.contentType: "application/merge-patch+json"])
            #expect(patch.status == .ok, "\(patch.status) \(patch.text)")
            let stored = try JSONValue.parse(try await api.getDocument(user, "habit_logs", "u").body)
            #expect(stored["data"]?[nfc] == .int(1) && stored["data"]?[nfd] == .int(3), "\(String(describing: stored["data"]))")
            let pulled = try JSONValue.parse(try await api.pull(user).body)
            guard case .array(let changes)? = pulled["changes"] else { throw HarnessError("no changes") }
            #expect(changes.first?["data"]?.objectValue?.count == 3, "\(changes)")
            // The same key written twice (once escaped) is still one key twice: refused.
            let twice = try await api.send(
                .put, "/v1/collections/habit_logs/docs/v", token: user.accessToken, raw: #"{"data":{"date":"x","\#(nfc)":1,"caf\u00e9":2}}"#)
            #expect(twice.status == .badRequest && twice.errorCode == "invalid_json", "\(twice.status) \(twice.text)")
            await api.close()
        }
    }
}
