import Foundation
import HTTPTypes
import TallyAPI
import Testing

@Suite("Bad input gets a clear 4xx and changes nothing", .timeLimit(.minutes(10)))
struct BadInputTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let method: HTTPRequest.Method
        let path: String
        let body: String?
        let status: Int
        let code: String
        /// Something the error message must say, such as the field at fault.
        var mentions: String? = nil
        /// Headers to send besides the token and an idempotency key.
        var headers: HTTPFields = [:]
        var testDescription: String { "\(method) \(path) \(body.map { $0.count > 200 ? $0.prefix(200) + "…" : $0 } ?? "")" }
    }

    static let holdId = "3f0e0a53-7bb1-4c50-9d39-2a5c1e7b0001"
    static let cases: [Case] = [
        Case(method: .post, path: "/v1/wallet/holds", body: "{", status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds", body: "[]", status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":"5","ttlSeconds":10}"#, status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"ttlSeconds":10}"#, status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":0,"ttlSeconds":10}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":-5,"ttlSeconds":10}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":1e30,"ttlSeconds":10}"#, status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":99999999999999,"ttlSeconds":10}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":1.5,"ttlSeconds":10}"#, status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":0}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":86401}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":null,"ttlSeconds":5}"#, status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/wallet/holds/\(holdId)/capture", body: #"{"amount":1}"#, status: 404, code: "not_found"),
        Case(method: .post, path: "/v1/wallet/holds/not-a-uuid/capture", body: #"{"amount":1}"#, status: 404, code: "not_found"),
        Case(method: .delete, path: "/v1/wallet/holds/\(holdId)", body: nil, status: 404, code: "not_found"),
        Case(method: .get, path: "/v1/wallet/entries?limit=0", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "/v1/wallet/entries?limit=101", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "/v1/wallet/entries?limit=abc", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "/v1/wallet/entries?cursor=garbage!", body: nil, status: 400, code: "invalid_cursor"),
        Case(method: .get, path: "/v1/wallet/entries?cursor=ZTEy_", body: nil, status: 400, code: "invalid_cursor"),
        Case(method: .post, path: "/v1/actions/no.such.action", body: nil, status: 404, code: "not_found"),
        Case(method: .patch, path: "/v1/me", body: #"{"timezone":"Mars/Olympus"}"#, status: 400, code: "invalid_field"),
        Case(method: .patch, path: "/v1/me", body: #"{"timezone":"GMT+5"}"#, status: 400, code: "invalid_field"),
        Case(method: .patch, path: "/v1/me", body: #"{"language":"a language with spaces"}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/auth/link", body: #"{"email":"not-an-email","password":"long enough"}"#, status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/auth/link", body: #"{"email":"a@b.co","password":"short"}"#, status: 400, code: "invalid_field"),
        Case(method: .get, path: "/v1/nothing-here", body: nil, status: 404, code: "not_found"),
        // Repeated keys: JSONDecoder would keep the first, another parser the last.
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":10,"amount":50}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":10,"\u0061mount":50}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":10,"x":[{"k":1,"k":2}]}"#, status: 400, code: "invalid_json", mentions: "'k'"),
        Case(method: .patch, path: "/v1/me", body: #"{"timezone":"UTC","timezone":"Europe/Paris"}"#, status: 400, code: "invalid_json", mentions: "'timezone'"),
        Case(method: .post, path: "/v1/auth/link", body: #"{"email":"a@b.co","password":"long enough","email":"c@d.co"}"#, status: 400, code: "invalid_json", mentions: "'email'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":10,}"#, status: 400, code: "invalid_json"),
        // Integer fields take integers only, not whole numbers spelt otherwise.
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5.0,"ttlSeconds":10}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5,"ttlSeconds":1e1}"#, status: 400, code: "invalid_json", mentions: "'ttlSeconds'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":5E0,"ttlSeconds":10}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":1E-400,"ttlSeconds":10}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":-0.0,"ttlSeconds":10}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds", body: #"{"amount":99999999999999999999,"ttlSeconds":10}"#, status: 400, code: "invalid_field", mentions: "'amount'"),
        Case(method: .post, path: "/v1/wallet/holds/\(holdId)/capture", body: #"{"amount":1.0}"#, status: 400, code: "invalid_json", mentions: "'amount'"),
        // bcrypt reads 72 bytes and would ignore the rest.
        Case(method: .post, path: "/v1/auth/link", body: #"{"email":"a@b.co","password":"\#(String(repeating: "A", count: 73))"}"#, status: 400, code: "invalid_field", mentions: "72 bytes"),
    ]

    /// One case at a time: 41 servers at once, each with its own PostgreSQL database and pool, outran the
    /// pool's 3-s connect timeout on a loaded machine.
    @Test("Each malformed request gets its code", arguments: StoreKind.allCases, cases)
    func rejected(kind: StoreKind, _ testCase: Case) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 50)
            // A profile unlike the defaults, so a bad PATCH that wrote either value it names would show.
            let profile = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Asia/Tokyo", language: "fr"))
            #expect(profile.status == .ok, "\(profile.text)")
            let before = try await api.allEntries(user)
            let meBefore = try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self)
            try await Self.expectRefused(testCase, api: api, user: user)
            #expect(try await api.allEntries(user) == before)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self) == meBefore)
            await api.close()
        }
    }

    /// Sends the case's request as `user` and checks its status, code and message.
    static func expectRefused(_ testCase: Case, api: APIConnection, user: TestUser) async throws {
        let response = try await api.send(
            testCase.method, testCase.path, token: user.accessToken, raw: testCase.body,
            headers: testCase.headers.merging([.idempotencyKey: UUID().uuidString]))
        #expect(Int(response.status.code) == testCase.status, "\(response.text)")
        #expect(response.errorCode == testCase.code, "\(response.text)")
        let error = try response.decode(ErrorResponse.self)
        #expect(!error.error.message.isEmpty)
        if let mentions = testCase.mentions { #expect(error.error.message.contains(mentions), "\(error.error.message)") }
    }

    @Test("Public and admin endpoints reject bad input too")
    func publicEndpoints() async throws {
        try await LiveServer.with(.sqlite) { server in
            let api = server.connection()
            let shortDevice = try await api.send(.post, "/v1/auth/guest", raw: #"{"deviceId":"short"}"#)
            #expect(shortDevice.status == .badRequest && shortDevice.errorCode == "invalid_field")
            let noBody = try await api.send(.post, "/v1/auth/guest")
            #expect(noBody.status == .badRequest && noBody.errorCode == "invalid_json")
            let badRefresh = try await api.send(.post, "/v1/auth/refresh", raw: #"{"refreshToken":"nope"}"#)
            #expect(badRefresh.status == .unauthorized && badRefresh.errorCode == "invalid_refresh_token")
            let huge = String(repeating: "x", count: 100_000)
            let tooLarge = try await api.send(.post, "/v1/auth/guest", raw: #"{"deviceId":"\#(huge)"}"#)
            #expect(tooLarge.status == .contentTooLarge && tooLarge.errorCode == "body_too_large")
            let user = try await api.newGuest()
            let unknownUser = try await api.send(.post, "/admin/v1/users/3f0e0a53-7bb1-4c50-9d39-2a5c1e7b0002/grants", admin: true, json: GrantRequest(amount: 5, reason: "x"))
            #expect(unknownUser.status == .notFound)
            let zero = try await api.send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: 0, reason: "x"))
            #expect(zero.status == .badRequest && zero.errorCode == "invalid_field")
            let nul = try await api.send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: 5, reason: "a\u{0}b"))
            #expect(nul.status == .badRequest && nul.errorCode == "invalid_field")
            let nulEmail = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: "a\u{0}@b.co", password: "long enough"))
            #expect(nulEmail.status == .badRequest && nulEmail.errorCode == "invalid_field")
            let noReason = try await api.send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, raw: #"{"amount":5}"#)
            #expect(noReason.status == .badRequest)
            let badKey = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: String(repeating: "k", count: 256)])
            #expect(badKey.status == .badRequest)
            let noToken = try await api.send(.get, "/v1/wallet")
            #expect(noToken.status == .unauthorized && noToken.errorCode == "unauthorized")
            #expect(try await api.wallet(user).version == 0)
            await api.close()
        }
    }
}

/// The documents and sync routes: each malformed request gets its 4xx and changes nothing of the user's
/// documents, client ids or ledger.
extension BadInputTests {
    static let mergePatch: HTTPFields = [.contentType: "application/merge-patch+json"]
    static let docs = "/v1/collections/habit_logs/docs"
    static let client = "bad-input-client-0001"

    /// A push body with `mutations` (JSON text of the array).
    static func push(_ mutations: String, clientId: String = client) -> String {
        #"{"clientId":"\#(clientId)","mutations":\#(mutations)}"#
    }

    static let putOK = #"{"id":1,"op":"put","collection":"habit_logs","docId":"h9","data":{"date":"2027-01-20"}}"#

    static let syncCases: [Case] = [
        Case(method: .put, path: "/v1/collections/nope/docs/a", body: #"{"data":{}}"#, status: 404, code: "unknown_collection", mentions: "nope"),
        Case(method: .get, path: "/v1/collections/nope/docs", body: nil, status: 404, code: "unknown_collection"),
        Case(method: .get, path: "/v1/collections/nope/docs/a", body: nil, status: 404, code: "unknown_collection"),
        Case(method: .put, path: "\(docs)/bad.id", body: #"{"data":{"date":"2027-01-20"}}"#, status: 400, code: "invalid_field", mentions: "'docId'"),
        Case(method: .put, path: "\(docs)/\(String(repeating: "a", count: 129))", body: #"{"data":{"date":"2027-01-20"}}"#, status: 400, code: "invalid_field"),
        Case(method: .get, path: "\(docs)/bad.id", body: nil, status: 400, code: "invalid_field"),
        Case(method: .delete, path: "\(docs)/bad.id", body: nil, status: 400, code: "invalid_field"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":[1]}"#, status: 400, code: "invalid_document"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":"text"}"#, status: 400, code: "invalid_document"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"note":"no date"}}"#, status: 400, code: "invalid_document"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"date":5}}"#, status: 400, code: "invalid_document"),
        Case(method: .put, path: "\(docs)/h1", body: #"{"data":{"note":"replaced without its date"}}"#, status: 400, code: "invalid_document"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"date":"2027-01-15\u0000"}}"#, status: 400, code: "invalid_document"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"date":"\#(String(repeating: "9", count: 1025))"}}"#, status: 400, code: "invalid_document"),
        Case(method: .get, path: "\(docs)?from=2027%00", body: nil, status: 400, code: "invalid_query", mentions: "NUL"),
        Case(method: .put, path: "\(docs)/h2", body: "{", status: 400, code: "invalid_json"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"date":"a","date":"b"}}"#, status: 400, code: "invalid_json", mentions: "duplicate key"),
        Case(method: .put, path: "\(docs)/h2", body: "{}", status: 400, code: "invalid_json", mentions: "'data'"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"date":"2027-01-20",}}"#, status: 400, code: "invalid_json"),
        Case(method: .put, path: "\(docs)/h2", body: #"{"data":{"date":"\#(String(repeating: "x", count: 100_000))"}}"#, status: 413, code: "body_too_large"),
        Case(method: .put, path: "/v1/collections/profile/docs/p1", body: #"{"data":{"name":"\#(String(repeating: "x", count: 300))"}}"#, status: 413, code: "document_too_large"),
        Case(method: .put, path: "/v1/collections/profile/docs/p4", body: #"{"data":{"name":"one too many"}}"#, status: 409, code: "collection_full"),
        Case(method: .put, path: "\(docs)/h1", body: #"{"data":{"date":"2027-01-21"}}"#, status: 400, code: "invalid_field", mentions: "If-Match", headers: [.ifMatch: "abc"]),
        Case(method: .put, path: "\(docs)/h1", body: #"{"data":{"date":"2027-01-21"}}"#, status: 400, code: "invalid_field", mentions: "If-None-Match", headers: [.ifNoneMatch: "\"1\""]),
        Case(method: .put, path: "\(docs)/h1", body: #"{"data":{"date":"2027-01-21"}}"#, status: 400, code: "invalid_field", headers: [.ifMatch: "\"1\"", .ifNoneMatch: "*"]),
        // Bad data is a 4xx of its own even when the precondition would fail too (schemathesis found a 412 here).
        Case(method: .put, path: "\(docs)/h1", body: #"{"data":-1.9}"#, status: 400, code: "invalid_document", headers: [.ifMatch: "\"12\""]),
        Case(method: .patch, path: "\(docs)/h1", body: #"{"note":"x"}"#, status: 415, code: "unsupported_media_type", mentions: "application/merge-patch+json"),
        Case(method: .patch, path: "\(docs)/h1", body: "[1]", status: 400, code: "invalid_document", headers: mergePatch),
        Case(method: .patch, path: "\(docs)/h1", body: #"{"date":null}"#, status: 400, code: "invalid_document", headers: mergePatch),
        Case(method: .patch, path: "\(docs)/h1", body: #"{"a":1,"a":2}"#, status: 400, code: "invalid_json", headers: mergePatch),
        Case(method: .patch, path: "\(docs)/nope", body: #"{"note":"x"}"#, status: 404, code: "not_found", headers: mergePatch),
        Case(method: .delete, path: "\(docs)/nope", body: nil, status: 404, code: "not_found"),
        Case(method: .get, path: "\(docs)/nope", body: nil, status: 404, code: "not_found"),
        Case(method: .get, path: "\(docs)?order=sideways", body: nil, status: 400, code: "invalid_query", mentions: "'order'"),
        Case(method: .get, path: "\(docs)?limit=0", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "\(docs)?limit=101", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "/v1/collections/profile/docs?to=b", body: nil, status: 400, code: "invalid_query", mentions: "'profile'"),
        Case(method: .get, path: "\(docs)?cursor=garbage!", body: nil, status: 400, code: "invalid_cursor"),
        Case(method: .get, path: "\(docs)?cursor=bmgx", body: nil, status: 400, code: "invalid_cursor"),
        Case(method: .get, path: "\(docs)?fields=", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "\(docs)?fields=a,,b", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "/v1/sync/pull?cursor=garbage", body: nil, status: 400, code: "invalid_cursor"),
        Case(method: .get, path: "/v1/sync/pull?limit=0", body: nil, status: 400, code: "invalid_query"),
        Case(method: .get, path: "/v1/sync/pull?limit=1001", body: nil, status: 400, code: "invalid_query"),
        Case(method: .post, path: "/v1/sync/push", body: push("[]", clientId: "short"), status: 400, code: "invalid_field", mentions: "'clientId'"),
        Case(method: .post, path: "/v1/sync/push", body: push("[]", clientId: "has spaces in it, 0123"), status: 400, code: "invalid_field", mentions: "'clientId'"),
        Case(method: .post, path: "/v1/sync/push", body: #"{"clientId":"\#(client)"}"#, status: 400, code: "invalid_json", mentions: "'mutations'"),
        Case(method: .post, path: "/v1/sync/push", body: #"{"clientId":"\#(client)","mutations":{}}"#, status: 400, code: "invalid_json", mentions: "'mutations'"),
        Case(method: .post, path: "/v1/sync/push", body: "[]", status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/sync/push", body: push("[" + (1...101).map { #"{"id":\#($0),"op":"delete","collection":"habit_logs","docId":"h1"}"# }.joined(separator: ",") + "]"), status: 400, code: "invalid_field", mentions: "100"),
        Case(method: .post, path: "/v1/sync/push", body: push("[\(putOK),\(putOK)]"), status: 400, code: "invalid_field", mentions: "'mutations[1].id'"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":0,"op":"delete","collection":"habit_logs","docId":"h1"}]"#), status: 400, code: "invalid_field", mentions: "'mutations[0].id'"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":1.5,"op":"delete","collection":"habit_logs","docId":"h1"}]"#), status: 400, code: "invalid_json", mentions: "'mutations[0].id'"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":"1","op":"delete","collection":"habit_logs","docId":"h1"}]"#), status: 400, code: "invalid_json"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":99999999999999999999,"op":"delete","collection":"habit_logs","docId":"h1"}]"#), status: 400, code: "invalid_field"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[\#(putOK),{"id":2,"op":"upsert","collection":"habit_logs","docId":"h1"}]"#), status: 400, code: "invalid_field", mentions: "'mutations[1].op'"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[\#(putOK),{"id":2,"op":"delete","collection":"nope","docId":"h1"}]"#), status: 404, code: "unknown_collection"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":1,"op":"delete","collection":"habit_logs","docId":"bad id"}]"#), status: 400, code: "invalid_field", mentions: "docId"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":1,"op":"put","collection":"habit_logs","docId":"h1"}]"#), status: 400, code: "invalid_json", mentions: "data"),
        Case(method: .post, path: "/v1/sync/push", body: push(#"[{"id":1,"op":"delete","collection":"habit_logs","docId":"h1","ifVersion":-1}]"#), status: 400, code: "invalid_field", mentions: "ifVersion"),
        Case(method: .post, path: "/v1/sync/push", body: #"{"clientId":"\#(client)","clientId":"\#(client)x","mutations":[]}"#, status: 400, code: "invalid_json", mentions: "duplicate key"),
        Case(method: .post, path: "/v1/sync/push", body: String(push("[]").dropLast()) + #","pad":"\#(String(repeating: "x", count: 1 << 20))"}"#, status: 413, code: "body_too_large"),
    ]

    @Test("Each malformed document or sync request gets its code and changes nothing", arguments: StoreKind.allCases, syncCases)
    func syncRejected(kind: StoreKind, _ testCase: Case) async throws {
        try await SyncFixture.server(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 10)
            #expect(try await api.putDocument(user, "habit_logs", "h1", jsonValue(#"{"date":"2027-01-15"}"#)).status == .created)
            for id in ["p1", "p2", "p3"] {  // profile is full (maxDocuments: 3)
                #expect(try await api.putDocument(user, "profile", id, jsonValue(#"{"name":"x"}"#)).status == .created)
            }
            let seeded = try await api.push(user, clientId: Self.client, [
                SyncMutation(id: 7, op: .put, collection: "chat_messages", docId: "m1", data: jsonValue(#"{"sentAt":"2027-01-15T08:00:00Z"}"#))
            ])
            #expect(seeded.status == .ok, "\(seeded.text)")
            let state = try await api.pull(user).text
            let entries = try await api.allEntries(user)
            try await Self.expectRefused(testCase, api: api, user: user)
            #expect(try await api.pull(user).text == state, "documents, versions or client ids changed")
            #expect(try await api.allEntries(user) == entries)
            await api.close()
        }
    }
}
