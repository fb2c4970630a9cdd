import Foundation
import HTTPTypes
import TallyAPI
import TallyAppStore
import TallyAppleID
import TallyDevAppStore
import TallyLoad
import TallyStore
import TallyTestKit
import Testing

/// A `tally serve` process for ``NumericInputTests``, with everything a number can reach configured: the App Store
/// (the local stand-in's root trusted), Sign in with Apple (the stand-in's keys), the AI gateway (a local model),
/// synced collections, a mail hook, and limits high enough that the numbers reach the handlers.
struct FuzzServer: Sendable {
    let process: ServerProcess
    let api: APIConnection
    let ports: (api: Int, admin: Int)
    let appStore: DevAppStore
    let appleID: DevAppleID
    let clock: ManualClock

    static let clientId = TestProducts.bundleId

    static func with(_ kind: StoreKind, _ body: @Sendable (FuzzServer) async throws -> Void) async throws {
        // The stand-ins sign at the real time: the server checks Apple's tokens against its own (real) clock.
        let clock = ManualClock(Date())
        let appStore = try TestProducts.appStore(clock: clock)
        let llmKey = "sk-fuzz-" + UUID().uuidString
        try await AppleIDStandIn.serving(clientId: clientId, clock: clock) { appleID, keysURL in
            try await LocalModel.with(apiKey: llmKey) { llmPort in
                try await TestProducts.withRootFile(appStore) { appStoreYAML in
                    let config = """
                        signupGrant: 1000000000
                        guestSignupsPerIPPerHour: 1000000
                        quotas: [{name: readings, daily: 3}]
                        actions: [{name: reading, quota: readings, tokens: 5}, {name: ai.query, tokens: 3}]
                        collections:
                          - {name: habit_logs, rangeKey: date}
                          - {name: notes, maxDocumentBytes: 512, maxDocuments: 50}
                        limits:
                          signInLockout: {failures: 1000000, seconds: 60, accountFailures: 1000000, maxDelaySeconds: 1}
                        \(Self.unlimited.map { "  \($0): {limit: 1000000, seconds: 60}" }.joined(separator: "\n"))
                        mail: {webhookURL: "http://127.0.0.1:9/tally-mail", secretEnv: FUZZ_MAIL_SECRET}
                        ai:
                          upstream: {baseURL: "http://127.0.0.1:\(llmPort)/v1", apiKeyEnv: FUZZ_LLM_KEY}
                          models: [{name: chat, upstreamModel: dev, promptTokensPerCredit: 1000, completionTokensPerCredit: 1000, maxCompletionTokens: 64}]
                          maxConcurrentPerUser: 64
                          dailyGenerations: [{name: todays_prediction, model: chat, prompt: "A prediction for {{date}}.", action: ai.query}]
                        signInWithApple: {audiences: [\(clientId)], keysURL: "\(keysURL)"}
                        \(appStoreYAML)
                        """
                    try await run(kind, config: config, environment: ["FUZZ_LLM_KEY": llmKey, "FUZZ_MAIL_SECRET": "fuzz-mail-secret-0123456789abcdefghijklmnop"]) { process, ports in
                        let api = APIConnection(port: ports.api, adminPort: ports.admin, adminKey: Self.adminKey)
                        defer { Task { await api.close() } }
                        try await body(FuzzServer(process: process, api: api, ports: ports, appStore: appStore, appleID: appleID, clock: clock))
                    }
                }
            }
        }
    }

    static let adminKey = "numeric-fuzz-admin-key-0123456789"

    /// The rate limits set far above what the fuzz sends, so that its numbers reach the handlers.
    static let unlimited = [
        "signInPerAddress", "linkPerUser", "linkPerAddress", "refreshPerSession", "refreshFailuresPerAddress", "guestSignInsPerDevice",
        "adminFailuresPerAddress", "passwordForgotPerEmail", "passwordForgotPerAddress", "codeAttemptsPerAddress", "verificationMailsPerUser",
        "purchasesPerUser", "appStoreNotificationsPerAddress",
    ]

    private static func run(
        _ kind: StoreKind, config: String, environment: [String: String], _ body: (ServerProcess, (api: Int, admin: Int)) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-numeric-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("tally.yaml")
        try Data(config.utf8).write(to: file)
        var environment = environment.merging(["TALLY_CONFIG": file.path, "TALLY_ADMIN_KEY": adminKey, "LOG_LEVEL": "warning"]) { $1 }
        func start() async throws {
            let process = try ServerProcess(name: "fuzz", directory: directory, environment: environment)
            defer { process.stop() }
            try await body(process, try await process.ports())
        }
        guard kind == .postgres else { return try await start() }
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            environment["DATABASE_URL"] = url
            try await start()
        }
    }

    /// Fails (throws) when the process is no longer running, with how it ended and the end of its log.
    func expectAlive(_ context: String) throws {
        guard !process.process.isRunning else { return }
        let log = process.log.split(separator: "\n").suffix(30).joined(separator: "\n")
        Issue.record("tally serve died \(context): \(process.process.waitUntilExit())\n\(log)")
        throw ServerDied()
    }

    struct ServerDied: Error {}

    /// Sends a request; a failure to get an answer is the server's death when the process is gone.
    func send(
        _ method: HTTPRequest.Method, _ path: String, token: String? = nil, admin: Bool = false, raw: String? = nil,
        headers: HTTPFields = [:], context: @autoclosure () -> String
    ) async throws -> APIResponse {
        do {
            return try await api.send(method, path, token: token, admin: admin, raw: raw, headers: headers)
        } catch {
            try await Task.sleep(for: .milliseconds(200))  // a trapping process takes a moment to be reaped
            try expectAlive(context())
            throw error
        }
    }

    /// What a refusal must leave as it was: the user's wallet (its balance and held tokens, or all of it), profile,
    /// documents and purchases.
    struct Snapshot: Equatable {
        var balance: Int64
        var held: Int64
        var version: Int64?
        var me: String
        var documents: String
        var purchases: String
    }

    func snapshot(_ user: TestUser, exact: Bool, context: @autoclosure () -> String) async throws -> Snapshot {
        let wallet: Wallet = try await send(.get, "/v1/wallet", token: user.accessToken, context: context()).decode()
        return Snapshot(
            balance: wallet.balance, held: wallet.held, version: exact ? wallet.version : nil,
            me: try await send(.get, "/v1/me", token: user.accessToken, context: context()).text,
            documents: try await send(.get, "/v1/sync/pull", token: user.accessToken, context: context()).text,
            purchases: try await send(.get, "/v1/purchases", token: user.accessToken, context: context()).text)
    }

    // MARK: Routes

    /// Runs one case as a new guest of its own: its prerequisites, the request, then the checks; the answer's status.
    @discardableResult
    func check(_ fuzzCase: FuzzCase, index: Int) async throws -> Int {
        let context = "at case \(index) (seed \(NumericInputTests.seed)): \(fuzzCase)"
        let user = try await api.newGuest()
        var values = [RouteFuzz.userId: user.userId, RouteFuzz.accessToken: user.accessToken, RouteFuzz.refreshToken: user.refreshToken]
        if fuzzCase.needs.contains(.hold) {
            let hold = try await send(
                .post, "/v1/wallet/holds", token: user.accessToken, raw: #"{"amount":5,"ttlSeconds":600}"#, context: context)
            values[RouteFuzz.holdId] = try hold.decode(Hold.self).holdId
        }
        if fuzzCase.needs.contains(.document) {
            let put = try await send(
                .put, "/v1/collections/habit_logs/docs/h1", token: user.accessToken, raw: #"{"data":{"date":"2027-01-15"}}"#, context: context)
            #expect(put.status == .created, "\(context): \(put.text)")
        }
        let text = [fuzzCase.path, fuzzCase.body ?? ""] + fuzzCase.headers.map(\.1)
        if text.contains(where: { $0.contains(RouteFuzz.signedTransaction) }) {
            values[RouteFuzz.signedTransaction] = try appStore.purchase(
                productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false
            ).signedTransaction
        }
        if text.contains(where: { $0.contains(RouteFuzz.signedNotification) }) {
            values[RouteFuzz.signedNotification] = try appStore.purchase(
                productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false
            ).notification.signedPayload
        }
        if text.contains(where: { $0.contains(RouteFuzz.identityToken) }) {
            let nonce = "fuzz-nonce-" + UUID().uuidString
            values[RouteFuzz.identityToken] = try await appleID.identityToken(nonce: nonce).identityToken
            values[RouteFuzz.appleNonce] = nonce
        }
        if text.contains(where: { $0.contains(RouteFuzz.appleNotification) }) {
            values[RouteFuzz.appleNotification] = try await appleID.notification(type: "email-enabled", sub: "000001.fuzz.0001").payload
        }
        func filled(_ text: String) -> String { values.reduce(text) { $0.replacingOccurrences(of: $1.key, with: $1.value) } }

        let exact = fuzzCase.operation != "POST /v1/ai/chat/completions"  // an upstream refusal holds and releases
        let before = try await snapshot(user, exact: exact, context: context)
        var headers: HTTPFields = [:]
        switch fuzzCase.caller {
        case .user: headers[.authorization] = "Bearer \(user.accessToken)"
        case .admin: headers[.authorization] = "Bearer \(Self.adminKey)"
        case .nobody: break
        }
        if fuzzCase.body != nil { headers[.contentType] = fuzzCase.contentType }
        for (name, value) in fuzzCase.headers { headers[HTTPField.Name(name)!] = filled(value) }
        let status: Int
        let answer: String
        if fuzzCase.operation == "GET /v1/sync/events" {
            let (stream, head) = try await EventStreamClient.open(
                port: ports.api, token: nil, path: filled(fuzzCase.path), headers: headers.map { ($0.name.rawName, $0.value) })
            await stream.close()
            (status, answer) = (head.status, "")
        } else {
            let response = try await send(
                HTTPRequest.Method(fuzzCase.operation.prefix { $0 != " " }.uppercased())!, filled(fuzzCase.path),
                raw: fuzzCase.body.map(filled), headers: headers, context: context)
            (status, answer) = (Int(response.status.code), response.text)
        }
        #expect(status < 500, "\(context): \(status) \(answer.prefix(300))")
        if (400..<500).contains(status) {
            let after = try await snapshot(user, exact: exact, context: context)
            #expect(after == before, "\(context): refused (\(status) \(answer.prefix(200))) but changed the user's state")
        }
        return status
    }

    /// The console's cursors (`after`, `before`), which openapi.yaml does not list: signed in with the admin key.
    func fuzzConsole(_ random: inout SplitMix64) async throws {
        let (_, signedIn) = try await ConsoleTests.signIn(api, key: Self.adminKey)
        let op = try #require(signedIn)
        let cookie = op.cookie
        let user = try await api.newGuest()
        for _ in 0..<60 {
            let value = NumberSpellings.cursor(&random).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            for path in ["/console/users?after=\(value)", "/console/users/\(user.userId)?before=\(value)", "/console/audit?before=\(value)"] {
                let page: APIResponse
                do {
                    page = try await ConsoleTests.get(api, path, cookie: cookie)
                } catch {
                    try await Task.sleep(for: .milliseconds(200))
                    try expectAlive("at \(path)")
                    throw error
                }
                #expect(page.status.code < 500, "\(path): \(page.status)")
            }
        }
        try await fuzzConsoleForms(&random, op: op)
    }

    /// The console's forms that take numbers: a grant's `amount` and premium's `until` day. A refusal changes nothing; a
    /// grant taken adds its amount; a day taken is written back as that day's end — so a day that is not on the
    /// calendar (`2027-02-30`), or whose end is past 9999, is refused.
    func fuzzConsoleForms(_ random: inout SplitMix64, op: ConsoleTests.Operator) async throws {
        let user = try await api.newGuest()
        let refusedDays = ["9999-12-31", "9999-99-99", "99999-1-01", "2027-02-30", "2027-13-01", "0000-00-00", "-001-01-01", "+2027-1-01", "2027-1-1  "]
        let days = refusedDays + ["9998-12-31", "2027-02-01"]
        let dayFormat = DateFormatter()
        (dayFormat.dateFormat, dayFormat.timeZone, dayFormat.isLenient) = ("yyyy-MM-dd", TimeZone(identifier: "UTC"), false)
        for round in 0..<(days.count + 30) {
            let until = round < days.count ? days[round] : NumberSpellings.any(&random)
            let context = "the console's premium until = \(until)"
            let before = try await snapshot(user, exact: true, context: context)
            let premium = try await postConsole(
                "/console/users/\(user.userId)/premium", ["csrf": op.csrf, "cookie": op.cookie, "confirm": "yes", "op": "set", "until": until], context: context)
            #expect(premium.status.code < 500, "\(context): \(premium.status)")
            if premium.status == .seeOther {
                #expect(!refusedDays.contains(until), "\(context): taken")
                let me = try await send(.get, "/v1/me", token: user.accessToken, context: context).decode(Me.self)
                let day = dayFormat.date(from: until)
                #expect(day != nil && me.premiumUntil == day?.addingTimeInterval(86_400), "\(context): written back as \(String(describing: me.premiumUntil))")
            } else {
                #expect(try await snapshot(user, exact: true, context: context) == before, "\(context): refused (\(premium.status)) but changed")
            }
        }
        for _ in 0..<30 {
            let amount = NumberSpellings.any(&random)
            let context = "the console's grant amount = \(amount)"
            let before = try await snapshot(user, exact: true, context: context)
            let grant = try await postConsole(
                "/console/users/\(user.userId)/grant",
                ["csrf": op.csrf, "cookie": op.cookie, "confirm": "yes", "amount": amount, "reason": "fuzz", "idempotency": "form-\(UUID().uuidString)"],
                context: context)
            #expect(grant.status.code < 500, "\(context): \(grant.status)")
            let after = try await snapshot(user, exact: true, context: context)
            if grant.status == .seeOther {
                let granted = try #require(Int64(amount), "\(context): taken")
                #expect((1...1_000_000_000).contains(granted) && after.balance == before.balance + granted, "\(context)")
            } else {
                #expect(after == before, "\(context): refused (\(grant.status)) but changed")
            }
        }
    }

    /// Posts a console form (`cookie` is the session's, sent as the header); a failure to answer is the server's death
    /// when the process is gone.
    private func postConsole(_ path: String, _ fields: [String: String], context: String) async throws -> APIResponse {
        var form = fields
        let cookie = form.removeValue(forKey: "cookie")
        do {
            return try await ConsoleTests.post(api, path, cookie: cookie, form)
        } catch {
            try await Task.sleep(for: .milliseconds(200))
            try expectAlive(context)
            throw error
        }
    }

    // MARK: App Store payloads

    /// The JSON of `jws`'s payload with `field` (a key path, `data.signedTransactionInfo` descending into a nested JWS)
    /// written as `value`, signed again by the stand-in's chain. A nested JWS is signed again too; a notification gets a
    /// new `notificationUUID` so that it is not taken for the one it was made from.
    func resigned(_ jws: String, field: [String], value: String) throws -> String {
        let payload = try #require(DevJWS.payloadJSON(of: jws))
        var object = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        if object["notificationUUID"] != nil { object["notificationUUID"] = UUID().uuidString.lowercased() }
        if field.count == 1 {
            object[field[0]] = RouteFuzz.marker
        } else {
            var data = try #require(object[field[0]] as? [String: Any])
            let nested = try #require(data[field[1]] as? String)
            data[field[1]] = try resigned(nested, field: Array(field.dropFirst(2)), value: value)
            object[field[0]] = data
        }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
            .replacingOccurrences(of: "\"\(RouteFuzz.marker)\"", with: value)
        return try DevJWS.sign(payloadJSON: Array(text.utf8), chain: try appStore.authority.chain())
    }

    /// Dates a signed payload may carry, as numbers: random ones, the bounds of what the server takes and beyond.
    static func dateValue(_ random: inout SplitMix64) -> String {
        let edges = [
            "946684799999", "946684800000", "253402300799999", "253402300800000", "9223372036854775807", "-9223372036854775808",
            "9223372036854775808", "1e300", "-1e15", "0", "-1", "1800000000000.5", "1e19", "-9.3e18", "18446744073709551616",
        ]
        return random.next() % 2 == 0 ? edges[Int(random.next() % UInt64(edges.count))] : NumberSpellings.any(&random)
    }

    /// Each round: a transaction submitted by the app, and notifications — a purchase, a refund, a renewal that
    /// failed into its grace period — each with one date of the transaction, the renewal information or the
    /// notification itself replaced by a number. The user's state is read before and after each: a refusal (4xx)
    /// changes nothing.
    func fuzzAppStoreDates(_ random: inout SplitMix64, rounds: Int) async throws {
        let transactionDates = ["purchaseDate", "originalPurchaseDate", "expiresDate", "revocationDate", "signedDate"]
        let renewalDates = ["gracePeriodExpiresDate", "renewalDate", "recentSubscriptionStartDate", "signedDate"]
        for round in 0..<rounds {
            let user = try await api.newGuest()
            let token = UUID(uuidString: user.userId)
            // A credited consumable and a subscription to refund and renew.
            let credited = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false)
            let subscribed = try appStore.purchase(productId: TestProducts.premiumMonthly, appAccountToken: token, send: false)
            for purchase in [credited, subscribed] {
                let redeemed = try await send(
                    .post, "/v1/purchases/apple", token: user.accessToken, raw: #"{"signedTransaction":"\#(purchase.signedTransaction)"}"#,
                    context: "redeeming round \(round)'s purchases")
                #expect(redeemed.status == .ok, "\(redeemed.text)")
            }
            clock.advance(by: 1)
            let refund = try appStore.refund(credited.transaction.transactionId, send: false)
            let failed = try appStore.failRenewal(subscribed.transaction.transactionId, send: false)
            for field in transactionDates {
                for product in [TestProducts.tokens100, TestProducts.premiumMonthly] {
                    let value = Self.dateValue(&random)
                    let fresh = try appStore.purchase(productId: product, appAccountToken: token, send: false)
                    let signed = try resigned(fresh.signedTransaction, field: [field], value: value)
                    try await expectNothingOrApplied(
                        user, "POST /v1/purchases/apple", token: user.accessToken, body: #"{"signedTransaction":"\#(signed)"}"#,
                        context: "round \(round): a \(product) transaction's \(field) = \(value)")
                }
                for (name, notification) in [("ONE_TIME_CHARGE", try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: token, send: false).notification), ("REFUND", refund), ("DID_FAIL_TO_RENEW", failed)] {
                    let value = Self.dateValue(&random)
                    let signed = try resigned(notification.signedPayload, field: ["data", "signedTransactionInfo", field], value: value)
                    try await expectNothingOrApplied(
                        user, "POST /v1/webhooks/appstore", body: #"{"signedPayload":"\#(signed)"}"#,
                        context: "round \(round): \(name)'s transaction \(field) = \(value)")
                }
            }
            for field in renewalDates {
                let value = Self.dateValue(&random)
                let signed = try resigned(failed.signedPayload, field: ["data", "signedRenewalInfo", field], value: value)
                try await expectNothingOrApplied(
                    user, "POST /v1/webhooks/appstore", body: #"{"signedPayload":"\#(signed)"}"#,
                    context: "round \(round): DID_FAIL_TO_RENEW's renewal \(field) = \(value)")
            }
            let value = Self.dateValue(&random)
            try await expectNothingOrApplied(
                user, "POST /v1/webhooks/appstore", body: #"{"signedPayload":"\#(try resigned(refund.signedPayload, field: ["signedDate"], value: value))"}"#,
                context: "round \(round): REFUND's own signedDate = \(value)")
            try await api.expectBooksBalance(user)
        }
    }

    /// Sends `body` to `operation`: no 5xx, the process alive, and a refusal leaves `user` as it was.
    private func expectNothingOrApplied(_ user: TestUser, _ operation: String, token: String? = nil, body: String, context: String) async throws {
        let before = try await snapshot(user, exact: true, context: context)
        let path = String(operation.split(separator: " ")[1])
        let answer = try await send(.post, path, token: token, raw: body, context: context)
        #expect(answer.status.code < 500, "\(context): \(answer.status) \(answer.text.prefix(300))")
        if (400..<500).contains(answer.status.code) {
            let after = try await snapshot(user, exact: true, context: context)
            #expect(after == before, "\(context): refused (\(answer.status) \(answer.text.prefix(200))) but changed the user's state")
        }
    }

    // MARK: Sign in with Apple

    /// Identity tokens whose `iat` or `exp`, and account notifications whose `iat` or `event_time`, are numbers: no 5xx.
    func fuzzAppleTimes(_ random: inout SplitMix64, rounds: Int) async throws {
        let now = Int64(clock.now.timeIntervalSince1970)
        for round in 0..<rounds {
            for field in ["iat", "exp"] {
                let value = NumberSpellings.any(&random)
                let nonce = "fuzz-nonce-" + UUID().uuidString
                var claims = [
                    "iss": "\"\(AppleIdentityVerifier.issuer)\"", "aud": "\"\(Self.clientId)\"", "iat": "\(now)", "exp": "\(now + 600)",
                    "sub": "\"000001.fuzz\(round).0001\"", "nonce": "\"\(AppleNonce.hash(nonce))\"", "nonce_supported": "true",
                ]
                claims[field] = value
                let token = try appleID.sign(claimsJSON: Array(Self.object(claims).utf8))
                let context = "round \(round): an identity token's \(field) = \(value)"
                let answer = try await send(.post, "/v1/auth/apple", raw: #"{"identityToken":"\#(token)","nonce":"\#(nonce)"}"#, context: context)
                #expect(answer.status.code < 500, "\(context): \(answer.status) \(answer.text.prefix(300))")
                if !Self.isAppleTime(value, millisToo: false) { #expect((400..<500).contains(answer.status.code), "\(context): \(answer.status)") }
            }
            for field in ["iat", "event_time"] {
                let value = NumberSpellings.any(&random)
                var events = ["type": "\"email-enabled\"", "sub": "\"000001.fuzz\(round).0001\"", "event_time": "\(now * 1000)"]
                var claims = [
                    "iss": "\"\(AppleIdentityVerifier.issuer)\"", "aud": "\"\(Self.clientId)\"", "iat": "\(now)", "jti": "\"\(UUID().uuidString)\"",
                ]
                if field == "event_time" { events[field] = value } else { claims[field] = value }
                claims["events"] = "\"" + Self.object(events).replacingOccurrences(of: "\"", with: "\\\"") + "\""
                let payload = try appleID.sign(claimsJSON: Array(Self.object(claims).utf8))
                let context = "round \(round): an account notification's \(field) = \(value)"
                let answer = try await send(.post, "/v1/webhooks/apple-id", raw: #"{"payload":"\#(payload)"}"#, context: context)
                #expect(answer.status.code < 500, "\(context): \(answer.status) \(answer.text.prefix(300))")
                if !Self.isAppleTime(value, millisToo: field == "event_time") {
                    #expect((400..<500).contains(answer.status.code), "\(context): \(answer.status)")
                }
            }
        }
    }

    /// Whether `value`, as JSON, is a time the server reads (seconds of the years 2000 to 9999; an `event_time` may be
    /// milliseconds): anything else must be refused.
    static func isAppleTime(_ value: String, millisToo: Bool) -> Bool {
        guard let number = try? JSONSerialization.jsonObject(with: Data(value.utf8), options: [.fragmentsAllowed]) as? NSNumber else { return false }
        let seconds = millisToo && number.doubleValue > 100_000_000_000 ? number.doubleValue / 1000 : number.doubleValue
        return (946_684_800...253_402_300_799.999).contains(seconds)
    }

    /// A JSON object of values written as they are.
    private static func object(_ members: [String: String]) -> String {
        "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }
}
