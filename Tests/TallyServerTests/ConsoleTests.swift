import Foundation
import HTTPTypes
import TallyAPI
import TallyStore
import Testing

@testable import TallyServer

/// The operator's console over real HTTP on both stores: served on the admin listener only, signed in with the key
/// (wrong keys refused, then rate limited with the admin API's limiter), every form guarded by its CSRF token, actions
/// audited; and `GET /admin/v1/audit`.
@Suite("Console", .timeLimit(.minutes(10)))
struct ConsoleTests {
    /// A signed-in console: its cookie and the CSRF token its pages carry.
    struct Operator {
        let cookie: String
        let csrf: String
    }

    static func form(_ fields: [String: String]) -> String {
        fields.sorted { $0.key < $1.key }.map { key, value in
            "\(key)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value)"
        }.joined(separator: "&")
    }

    static func post(_ api: APIConnection, _ path: String, cookie: String?, _ fields: [String: String]) async throws -> APIResponse {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let cookie { headers[.cookie] = cookie }
        return try await api.send(.post, path, raw: form(fields), headers: headers, on: .admin)
    }

    static func get(_ api: APIConnection, _ path: String, cookie: String?) async throws -> APIResponse {
        var headers: HTTPFields = [:]
        if let cookie { headers[.cookie] = cookie }
        return try await api.send(.get, path, headers: headers, on: .admin)
    }

    /// The value of `name="csrf"` in a page.
    static func csrf(_ page: String) throws -> String {
        let marker = #"name="csrf" value=""#
        let start = try #require(page.range(of: marker)).upperBound
        return String(page[start...].prefix { $0 != "\"" })
    }

    /// The `name=value` of a `Set-Cookie` named `name`.
    static func cookie(_ response: APIResponse, _ name: String) -> (pair: String, attributes: String)? {
        for field in response.headers where field.name == .setCookie && field.value.hasPrefix(name + "=") {
            let pair = String(field.value.prefix { $0 != ";" })
            return (pair, field.value)
        }
        return nil
    }

    static func signIn(_ api: APIConnection, key: String) async throws -> (APIResponse, Operator?) {
        let page = try await get(api, "/console/sign-in", cookie: nil)
        let signInCookie = try #require(cookie(page, ConsoleController.signInCookie)).pair
        let answer = try await post(api, "/console/sign-in", cookie: signInCookie, ["csrf": try csrf(page.text), "key": key])
        guard answer.status == .seeOther, let session = cookie(answer, ConsoleController.cookie) else { return (answer, nil) }
        let home = try await get(api, "/", cookie: session.pair)
        return (answer, Operator(cookie: session.pair, csrf: try csrf(home.text)))
    }

    @Test("only on the admin listener; the key signs in (HttpOnly, SameSite=Strict cookie), security headers, no key in any page", arguments: StoreKind.allCases)
    func signIn(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            for path in ["/", "/console/sign-in", "/console/users", "/console/console.css"] {
                let public_ = try await api.send(.get, path, on: .api)
                #expect(public_.status == .notFound, "\(path) on the public listener: \(public_.status)")
            }
            let home = try await Self.get(api, "/", cookie: nil)
            #expect(home.status == .seeOther && home.headers[.location] == "/console/sign-in", "[\(kind)]")
            let page = try await Self.get(api, "/console/sign-in", cookie: nil)
            #expect(page.status == .ok && page.text.contains(#"type="password""#), "[\(kind)]")
            #expect(page.headers[.contentSecurityPolicy] == ConsoleHeadersMiddleware.policy, "[\(kind)]")
            #expect(page.headers[HTTPField.Name("X-Frame-Options")!] == "DENY", "[\(kind)]")
            #expect(!page.text.contains("<script") && !page.text.contains("style="), "[\(kind)] no script, no inline style")

            let (answer, signedIn) = try await Self.signIn(api, key: server.adminKey)
            let op = try #require(signedIn, "[\(kind)] \(answer.status) \(answer.text)")
            let attributes = try #require(Self.cookie(answer, ConsoleController.cookie)).attributes
            #expect(attributes.contains("HttpOnly") && attributes.contains("SameSite=Strict") && attributes.contains("Max-Age=43200"))
            #expect(!attributes.contains("Secure"), "plain HTTP without a trusted proxy saying https")
            #expect(!op.cookie.contains(server.adminKey) && answer.headers[.location] == "/", "[\(kind)]")

            let user = try await api.newGuest(granted: 5)
            for path in ["/", "/console/users", "/console/users/\(user.userId)", "/console/audit", "/console/console.css"] {
                let shown = try await Self.get(api, path, cookie: op.cookie)
                #expect(shown.status == .ok, "[\(kind)] \(path): \(shown.status) \(shown.text)")
                #expect(!shown.text.contains(server.adminKey), "[\(kind)] \(path) shows the key")
                #expect(shown.headers[.contentSecurityPolicy] != nil, "[\(kind)] \(path)")
            }
            let found = try await Self.post(api, "/console/find", cookie: op.cookie, ["csrf": op.csrf, "q": user.userId])
            #expect(found.status == .seeOther && found.headers[.location] == "/console/users/\(user.userId)", "[\(kind)]")

            let out = try await Self.post(api, "/console/sign-out", cookie: op.cookie, ["csrf": op.csrf])
            #expect(out.status == .seeOther, "[\(kind)]")
            #expect(try await Self.get(api, "/", cookie: op.cookie).status == .seeOther, "[\(kind)] signed out: back to the sign-in form")
        }
    }

    @Test("wrong keys are refused, then the address is rate limited with the admin API's limiter (even with the right key)")
    func wrongKeys() async throws {
        var limits = LimitsConfiguration()
        limits.adminFailuresPerAddress = RateLimit(3, per: 60)
        try await LiveServer.with(.sqlite, limits: limits) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            for attempt in 1...3 {
                let (answer, op) = try await Self.signIn(api, key: "wrong-\(attempt)")
                #expect(answer.status == .unauthorized && op == nil, "attempt \(attempt): \(answer.status)")
            }
            let (limited, _) = try await Self.signIn(api, key: server.adminKey)
            #expect(limited.status == .tooManyRequests && limited.headers[.retryAfter] != nil, "\(limited.status)")
            let apiCall = try await api.send(.get, "/admin/v1/audit", admin: true)
            #expect(apiCall.status == .tooManyRequests, "one limiter for the console and the API: \(apiCall.status)")
        }
    }

    @Test("a POST without the session's CSRF token is refused; a grant submitted twice grants once, audited once; revoking ends the user's token", arguments: StoreKind.allCases)
    func actions(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let op = try #require(try await Self.signIn(api, key: server.adminKey).1)
            let user = try await api.newGuest(granted: 10)
            let path = "/console/users/\(user.userId)/grant"
            let fields = ["amount": "25", "reason": "sorry about that", "confirm": "yes", "idempotency": "form-\(UUID().uuidString)"]
            for csrf in [nil, "forged"] {
                var sent = fields
                sent["csrf"] = csrf
                let refused = try await Self.post(api, path, cookie: op.cookie, sent)
                #expect(refused.status == .forbidden, "[\(kind)] csrf \(csrf ?? "missing"): \(refused.status)")
            }
            let noSession = try await Self.post(api, path, cookie: nil, fields.merging(["csrf": op.csrf]) { $1 })
            #expect(noSession.status == .unauthorized, "[\(kind)]")
            #expect(try await api.wallet(user).balance == 10, "[\(kind)] nothing granted by the refused posts")

            for expected in ["/console/users/\(user.userId)?done=grant", "/console/users/\(user.userId)?done=granted-before"] {
                let granted = try await Self.post(api, path, cookie: op.cookie, fields.merging(["csrf": op.csrf]) { $1 })
                #expect(granted.status == .seeOther && granted.headers[.location] == expected, "[\(kind)] \(granted.status) \(granted.text)")
            }
            #expect(try await api.wallet(user).balance == 35, "[\(kind)] one grant")

            let premium = try await Self.post(
                api, "/console/users/\(user.userId)/premium", cookie: op.cookie,
                ["csrf": op.csrf, "confirm": "yes", "op": "set", "until": "2027-02-01"])
            #expect(premium.status == .seeOther, "[\(kind)] \(premium.text)")
            let me = try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self)
            #expect(me.premiumUntil == Date(timeIntervalSince1970: 1_801_526_400), "[\(kind)] the end of 2027-02-01 UTC: \(me)")
            let ended = try await Self.post(
                api, "/console/users/\(user.userId)/premium", cookie: op.cookie, ["csrf": op.csrf, "confirm": "yes", "op": "end"])
            #expect(ended.status == .seeOther, "[\(kind)] \(ended.text)")
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self).premiumUntil == nil, "[\(kind)]")

            let revoked = try await Self.post(
                api, "/console/users/\(user.userId)/revoke-sessions", cookie: op.cookie, ["csrf": op.csrf, "confirm": "yes"])
            #expect(revoked.status == .seeOther, "[\(kind)]")
            #expect(try await api.send(.get, "/v1/wallet", token: user.accessToken).status == .unauthorized, "[\(kind)]")

            let other = try await api.newGuest(granted: 1)
            let wrongTyped = try await Self.post(
                api, "/console/users/\(other.userId)/delete", cookie: op.cookie, ["csrf": op.csrf, "typed": "yes"])
            #expect(wrongTyped.status == .badRequest, "[\(kind)] the id must be typed")
            let deleted = try await Self.post(
                api, "/console/users/\(other.userId)/delete", cookie: op.cookie, ["csrf": op.csrf, "typed": other.userId])
            #expect(deleted.status == .seeOther, "[\(kind)]")
            #expect(try await api.send(.get, "/admin/v1/users/\(other.userId)", admin: true).status == .notFound, "[\(kind)]")

            let page = try await api.send(.get, "/admin/v1/audit?limit=100", admin: true).decode(Page<AuditView>.self)
            let mine = page.items.filter { $0.userId == user.userId || $0.userId == other.userId }
            #expect(
                mine.map(\.action) == ["delete_user", "grant", "revoke_sessions", "premium", "premium", "grant", "grant"],
                "[\(kind)] \(mine.map(\.action))")
            let consoleGrant = try #require(mine.first { $0.action == "grant" && $0.userId == user.userId })
            #expect(consoleGrant.operatorSession.hasPrefix("console-") && consoleGrant.before == "balance=10", "[\(kind)] \(consoleGrant)")
            #expect(consoleGrant.after == "balance=35 (+25: sorry about that)", "[\(kind)] \(consoleGrant)")
            #expect(mine.last?.operatorSession == "admin-api" && mine.last?.after == "balance=10 (+10: test)", "[\(kind)]")
            #expect(!page.items.contains { $0.operatorSession.contains(op.cookie.split(separator: "=")[1]) }, "the cookie is not the label")
        }
    }

    @Test("200 admin grants from 25 connections at once: each audited exactly once, with its own before and after (the rows go in groups)", arguments: StoreKind.allCases)
    func concurrentGrantsAudited(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            var created: [TestUser] = []
            for _ in 0..<20 { created.append(try await api.newGuest(granted: 1)) }
            let users = created
            // 25 admin connections, eight grants each: the admin listener takes 64 connections (50 beside
            // 20 set-up connections met "I/O on closed channel" once in CI).
            let grants = try await concurrently(25, server: server) { worker, connection in
                var statuses: [HTTPResponse.Status] = []
                for index in (worker * 8)..<(worker * 8 + 8) {
                    let user = users[index % users.count]
                    statuses.append(
                        try await connection.send(
                            .post, "/admin/v1/users/\(user.userId)/grants", admin: true,
                            json: GrantRequest(amount: Int64(index + 1), reason: "g\(index)")
                        ).status)
                }
                return statuses
            }.flatMap { $0 }
            #expect(grants.allSatisfy { $0 == .created }, "[\(kind)] \(Dictionary(grouping: grants.map(\.code), by: { $0 }).mapValues(\.count))")
            var rows: [AuditView] = []
            var cursor: String?
            repeat {
                let page = try await api.send(.get, "/admin/v1/audit?limit=100" + (cursor.map { "&cursor=\($0)" } ?? ""), admin: true)
                    .decode(Page<AuditView>.self)
                rows += page.items
                cursor = page.nextCursor
            } while cursor != nil
            // Besides each user's first grant (reason "test"), every row here is one of the 200, each reason once.
            let mine = rows.filter { row in
                users.contains { $0.userId == row.userId } && row.action == "grant" && row.after?.contains(": g") == true
            }
            let reasons = mine.compactMap { $0.after?.split(separator: ": ").last.map { String($0.dropLast()) } }
            #expect(Set(reasons) == Set((0..<200).map { "g\($0)" }) && reasons.count == 200, "[\(kind)] \(mine.count) rows")
            // Each user's rows are its grants' steps (rows of concurrent grants may go in either order): distinct balances
            // after, the highest the wallet's.
            for user in users {
                let balance = try await api.wallet(user).balance
                let afters = mine.filter { $0.userId == user.userId }.compactMap { row in
                    row.after?.split(separator: " ").first.flatMap { Int64($0.dropFirst("balance=".count)) }
                }
                #expect(afters.count == 10 && Set(afters).count == 10 && afters.max() == balance, "[\(kind)] \(user.userId): \(afters)")
            }
        }
    }
}
