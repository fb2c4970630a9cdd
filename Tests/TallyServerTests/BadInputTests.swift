import Foundation
import HTTPTypes
import TallyAPI
import Testing

@Suite("Bad input gets a clear 4xx and changes nothing")
struct BadInputTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let method: HTTPRequest.Method
        let path: String
        let body: String?
        let status: Int
        let code: String
        /// Something the error message must say, such as the field at fault.
        var mentions: String? = nil
        var testDescription: String { "\(method) \(path) \(body ?? "")" }
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
            let user = try await api.newGuest()
            try await api.grant(50, to: user)
            // A profile unlike the defaults, so a bad PATCH that wrote either value it names would show.
            let profile = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Asia/Tokyo", language: "fr"))
            #expect(profile.status == .ok, "\(profile.text)")
            let before = try await api.allEntries(user)
            let meBefore = try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self)
            let response = try await api.send(
                testCase.method, testCase.path, token: user.accessToken, raw: testCase.body,
                headers: [.idempotencyKey: UUID().uuidString])
            #expect(Int(response.status.code) == testCase.status, "\(response.text)")
            #expect(response.errorCode == testCase.code, "\(response.text)")
            let error = try response.decode(ErrorResponse.self)
            #expect(!error.error.message.isEmpty)
            if let mentions = testCase.mentions { #expect(error.error.message.contains(mentions), "\(error.error.message)") }
            #expect(try await api.allEntries(user) == before)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self) == meBefore)
            await api.close()
        }
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
