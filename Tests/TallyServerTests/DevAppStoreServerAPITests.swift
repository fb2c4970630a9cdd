import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAppStore
import TallyDevAppStore
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// `tally-dev dev-appstore`'s App Store Server API through the real HTTP stack: bearer tokens signed with the key
/// `GET /server-api-key` hands out and checked as Apple checks them, Send Consumption Information, transaction,
/// refund and notification history, order lookup, consumption requests reaching a webhook, and injected faults.
@Suite("dev-appstore's App Store Server API", .timeLimit(.minutes(2)))
struct DevAppStoreServerAPITests {
    /// The stand-in served on a free port, its key as `GET /server-api-key` answers it, and a webhook beside it.
    struct Harness: Sendable {
        let store: DevAppStore
        let clock: ManualClock
        let base: String
        let webhook: Webhook
        let keyId: String
        let issuerId: String
        let key: P256.Signing.PrivateKey

        /// One HTTP exchange.
        struct Answer: Sendable {
            let status: Int
            let headers: HTTPHeaders
            let body: Data
            /// The body as a JSON object (empty when it is not one).
            var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:] }
            /// The body as text.
            var text: String { String(decoding: body, as: UTF8.self) }
        }

        /// `method path` with `json` as the body and `token` as the bearer.
        func call(_ method: String, _ path: String, json: String? = nil, token: String? = nil) async throws -> Answer {
            var request = HTTPClientRequest(url: base + path)
            request.method = HTTPMethod(rawValue: method)
            if let json {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: json))
            }
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 22)
            return Answer(status: Int(response.status.code), headers: response.headers, body: Data(body.readableBytesView))
        }

        /// An App Store Server API call with a good token.
        func apple(_ method: String, _ path: String, json: String? = nil) async throws -> Answer {
            try await call(method, path, json: json, token: try token())
        }

        /// A token as Apple's library makes one (5 minutes), with `header` and `claims` changed as given (nil drops one).
        func token(
            header changes: [String: Any?] = [:], claims claimChanges: [String: Any?] = [:], signingKey: P256.Signing.PrivateKey? = nil
        ) throws -> String {
            let now = Int(clock.now.timeIntervalSince1970)
            var header: [String: Any] = ["alg": "ES256", "kid": keyId, "typ": "JWT"]
            var claims: [String: Any] = [
                "iss": issuerId, "iat": now, "exp": now + 300, "aud": "appstoreconnect-v1", "bid": TestProducts.bundleId,
            ]
            for (name, value) in changes { header[name] = value }
            for (name, value) in claimChanges { claims[name] = value }
            let input = DevJWS.base64URL(try JSONSerialization.data(withJSONObject: header, options: .sortedKeys)) + "."
                + DevJWS.base64URL(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
            let signature = try (signingKey ?? key).signature(for: Data(input.utf8)).rawRepresentation
            return input + "." + DevJWS.base64URL(signature)
        }

        /// `POST /purchase`: the answer's `transactionId` and `orderId`.
        func purchase(
            _ productId: String = TestProducts.tokens100, account: UUID? = nil, send: Bool = true
        ) async throws -> (id: String, orderId: String) {
            let token = account.map { #","appAccountToken":"\#($0.uuidString)""# } ?? ""
            let answer = try await call("POST", "/purchase", json: #"{"productId":"\#(productId)","send":\#(send)\#(token)}"#)
            let json = answer.json
            guard answer.status == 200, let id = json["transactionId"] as? String, let orderId = json["orderId"] as? String else {
                throw Failure("purchase: \(answer.status) \(answer.text)")
            }
            return (id, orderId)
        }
    }

    /// A test's failure of its own.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// A loopback webhook answering each POST with the next status of its script (then 200), keeping every body.
    final class Webhook: Sendable {
        private let state: Mutex<(script: [Int], bodies: [Data])>

        init(script: [Int]) { state = Mutex((script, [])) }

        /// The `signedPayload` of every body received, in order.
        var signedPayloads: [String] {
            state.withLock { $0.bodies }.compactMap { (try? JSONDecoder().decode([String: String].self, from: $0))?["signedPayload"] }
        }

        /// Its router.
        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("appstore") { request, _ -> Response in
                let body = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
                let status = self.state.withLock { state -> Int in
                    state.bodies.append(body)
                    return state.script.isEmpty ? 200 : state.script.removeFirst()
                }
                return Response(status: .init(code: status))
            }
            return router
        }
    }

    /// Runs `body` against a stand-in on a manual clock whose webhook answers `script` (then 200), delivering.
    static func with<T: Sendable>(webhookAnswers script: [Int] = [], _ body: (Harness) async throws -> T) async throws -> T {
        var logger = Logger(label: "dev-appstore-server-api-tests")
        logger.logLevel = .critical  // a cancelled Hummingbird server logs its channels' cancellation as errors
        let clock = ManualClock()
        let webhook = Webhook(script: script)
        let (webhookPorts, webhookPort) = AsyncStream.makeStream(of: Int.self)
        let receiver = Application(
            router: webhook.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { webhookPort.yield($0.localAddress?.port ?? 0) }, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await receiver.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            var webhookIterator = webhookPorts.makeAsyncIterator()
            guard let port = await webhookIterator.next() else { throw CancellationError() }
            let store = try TestProducts.appStore(clock: clock) { $0.webhook = "http://127.0.0.1:\(port)/appstore" }
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let app = buildDevAppStoreApplication(store: store, port: 0, logger: logger) { continuation.yield($0) }
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            group.addTask { await store.run() }
            var iterator = ports.makeAsyncIterator()
            guard let appPort = await iterator.next() else { throw CancellationError() }
            let base = "http://127.0.0.1:\(appPort)"
            let keyAnswer = try await HTTPClient.shared.execute(HTTPClientRequest(url: base + "/server-api-key"), timeout: .seconds(30))
            let keyBody = try await keyAnswer.body.collect(upTo: 1 << 16)
            let keyJSON = try JSONDecoder().decode([String: String].self, from: Data(keyBody.readableBytesView))
            guard let keyId = keyJSON["keyId"], let issuerId = keyJSON["issuerId"], let pem = keyJSON["privateKeyPEM"] else {
                throw Failure("GET /server-api-key: \(keyJSON)")
            }
            let harness = Harness(
                store: store, clock: clock, base: base, webhook: webhook, keyId: keyId, issuerId: issuerId,
                key: try P256.Signing.PrivateKey(pemRepresentation: pem))
            return try await body(harness)
        }
    }

    /// The transaction ids of `signedTransactions` (decoded, unverified: the stand-in's own output).
    static func ids(_ signedTransactions: Any?) -> [String] {
        ((signedTransactions as? [String]) ?? []).compactMap { jws in
            DevJWS.payloadJSON(of: jws).flatMap { try? AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: $0) }?.transactionId
        }
    }

    /// The payload of a signed notification.
    static func payload(_ signedPayload: String) throws -> ResponseBodyV2DecodedPayload {
        guard let json = DevJWS.payloadJSON(of: signedPayload) else { throw Failure("not a JWS: \(signedPayload)") }
        return try AppStoreJSON.decoder().decode(ResponseBodyV2DecodedPayload.self, from: json)
    }

    @Test("A token signed with the key GET /server-api-key hands out is accepted; each thing Apple checks, got wrong, is a counted 401")
    func authentication() async throws {
        try await Self.with { harness in
            let (id, _) = try await harness.purchase()
            let path = "/inApps/v2/history/\(id)"
            let good = try await harness.call("GET", path, token: try harness.token())
            #expect(good.status == 200, "\(good.text)")
            #expect(harness.keyId.count == 10 && UUID(uuidString: harness.issuerId) != nil)

            let now = Int(harness.clock.now.timeIntervalSince1970)
            let bad: [(String, String?)] = [
                ("another key", try harness.token(signingKey: P256.Signing.PrivateKey())),
                ("wrong kid", try harness.token(header: ["kid": "ABCDEFGHIJ"])),
                ("wrong iss", try harness.token(claims: ["iss": UUID().uuidString.lowercased()])),
                ("wrong aud", try harness.token(claims: ["aud": "appstoreconnect-v2"])),
                ("wrong bid", try harness.token(claims: ["bid": "com.example.other"])),
                ("expired", try harness.token(claims: ["iat": now - 600, "exp": now - 1])),
                ("exp - iat > 3600", try harness.token(claims: ["iat": now, "exp": now + 3601])),
                ("no Authorization header", nil),
            ]
            for (why, token) in bad {
                let answer = try await harness.call("GET", path, token: token)
                #expect(answer.status == 401, "\(why): \(answer.status) \(answer.text)")
                #expect(answer.headers.first(name: "X-Dev-AppStore-Reason")?.isEmpty == false, "\(why)")
            }
            let rejections = try await harness.call("GET", "/server-api-rejections").json
            #expect(rejections["count"] as? Int == bad.count)
            #expect(harness.store.serverAPIRecords.rejections.count == bad.count)
            #expect(try await harness.call("GET", path, token: try harness.token()).status == 200, "a good token still is")
        }
    }

    @Test("Send Consumption Information: an answer is 202, recorded and listed; a wrong member is Apple's 400, an unknown transaction 404")
    func consumption() async throws {
        try await Self.with { harness in
            let (id, _) = try await harness.purchase()
            let good = #"{"customerConsented":true,"consumptionPercentage":25000,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"#
                + #""refundPreference":"GRANT_PRORATED"}"#
            let accepted = try await harness.apple("PUT", "/inApps/v2/transactions/consumption/\(id)", json: good)
            #expect(accepted.status == 202 && accepted.body.isEmpty, "\(accepted.status) \(accepted.text)")

            let bad: [(String, Int)] = [
                (#"{"customerConsented":false,"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 4000035),
                (#"{"customerConsented":1,"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#, 4000035),
                (#"{"customerConsented":true,"deliveryStatus":"LOST","sampleContentProvided":false}"#, 4000036),
                (#"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":"no"}"#, 4000041),
                (#"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"consumptionPercentage":100001}"#, 4000000),
                (#"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"refundPreference":"MAYBE"}"#, 4000000),
                (#"[1, 2]"#, 4000000),
            ]
            for (body, code) in bad {
                let answer = try await harness.apple("PUT", "/inApps/v2/transactions/consumption/\(id)", json: body)
                #expect(answer.status == 400 && answer.json["errorCode"] as? Int == code, "\(body): \(answer.status) \(answer.text)")
                #expect(answer.json["errorMessage"] is String)
            }
            let unknown = try await harness.apple("PUT", "/inApps/v2/transactions/consumption/1", json: good)
            #expect(unknown.status == 404 && unknown.json["errorCode"] as? Int == 4040010, "\(unknown.text)")
            let malformed = try await harness.apple("PUT", "/inApps/v2/transactions/consumption/abc", json: good)
            #expect(malformed.status == 400 && malformed.json["errorCode"] as? Int == 4000006, "\(malformed.text)")

            let answers = try await harness.call("GET", "/consumption-answers").json["answers"] as? [[String: Any]] ?? []
            #expect(answers.count == 1)
            #expect(answers.first?["transactionId"] as? String == id && answers.first?["receivedAt"] is String)
            let body = answers.first?["body"] as? [String: Any] ?? [:]
            #expect(body["consumptionPercentage"] as? Int == 25000 && body["refundPreference"] as? String == "GRANT_PRORATED")
            #expect(harness.store.serverAPIRecords.consumptionAnswers.first?.receivedAt == harness.clock.now)
        }
    }

    @Test("Transaction history pages a customer's 25 transactions 20 at a time by revision, and takes sort, productType and revoked")
    func historyPaging() async throws {
        try await Self.with { harness in
            let account = UUID()
            var mine: [String] = []
            for _ in 0..<25 { mine.append(try await harness.purchase(account: account, send: false).id) }
            _ = try await harness.purchase(account: UUID(), send: false)
            _ = try await harness.purchase(send: false)

            let first = try await harness.apple("GET", "/inApps/v2/history/\(mine[7])")
            #expect(first.status == 200, "\(first.text)")
            #expect(Self.ids(first.json["signedTransactions"]) == Array(mine[0..<20]))
            #expect(first.json["hasMore"] as? Bool == true && first.json["bundleId"] as? String == TestProducts.bundleId)
            #expect(first.json["environment"] as? String == "Sandbox")
            let revision = try #require(first.json["revision"] as? String)
            let second = try await harness.apple("GET", "/inApps/v2/history/\(mine[7])?revision=\(revision)")
            #expect(Self.ids(second.json["signedTransactions"]) == Array(mine[20..<25]))
            #expect(second.json["hasMore"] as? Bool == false && second.json["revision"] is String)

            let newest = try await harness.apple("GET", "/inApps/v2/history/\(mine[0])?sort=DESCENDING&productType=CONSUMABLE&revoked=false")
            #expect(Self.ids(newest.json["signedTransactions"]).first == mine[24], "\(newest.text)")
            let subscriptions = try await harness.apple("GET", "/inApps/v2/history/\(mine[0])?productType=AUTO_RENEWABLE")
            #expect(Self.ids(subscriptions.json["signedTransactions"]).isEmpty && subscriptions.json["hasMore"] as? Bool == false)
            let badSort = try await harness.apple("GET", "/inApps/v2/history/\(mine[0])?sort=SIDEWAYS")
            #expect(badSort.status == 400 && badSort.json["errorCode"] as? Int == 4000021)
            let badRevision = try await harness.apple("GET", "/inApps/v2/history/\(mine[0])?revision=nonsense")
            #expect(badRevision.status == 400 && badRevision.json["errorCode"] as? Int == 4000005)
            #expect(try await harness.apple("GET", "/inApps/v2/history/42").status == 404)
        }
    }

    @Test("Notification history answers each notification's send attempts; onlyFailures keeps those never delivered, held back ones too")
    func notificationHistory() async throws {
        try await Self.with(webhookAnswers: [200, 500]) { harness in
            let account = UUID()
            let delivered = try await harness.purchase(account: account)
            try await harness.store.waitForDeliveries { $0.count == 1 && $0.allSatisfy { $0.state == .delivered } }
            let failed = try await harness.purchase()
            try await harness.store.waitForDeliveries { $0.count == 2 && $0[1].state == .retrying }
            let heldBack = try await harness.purchase(account: account, send: false)
            let now = AppStoreJSON.milliseconds(harness.clock.now)
            let window = #""startDate":\#(now - 60_000),"endDate":\#(now + 60_000)"#

            let all = try await harness.apple("POST", "/inApps/v1/notifications/history", json: "{\(window)}")
            let items = all.json["notificationHistory"] as? [[String: Any]] ?? []
            #expect(all.status == 200 && items.count == 3 && all.json["hasMore"] as? Bool == false, "\(all.text)")
            let results = items.map { ($0["sendAttempts"] as? [[String: Any]] ?? []).compactMap { $0["sendAttemptResult"] as? String } }
            #expect(results == [["SUCCESS"], ["UNSUCCESSFUL_HTTP_RESPONSE_CODE"], []])
            #expect((items.first?["sendAttempts"] as? [[String: Any]])?.first?["attemptDate"] as? Int == Int(now))

            let failures = try await harness.apple("POST", "/inApps/v1/notifications/history", json: #"{\#(window),"onlyFailures":true}"#)
            let failedIds = try (failures.json["notificationHistory"] as? [[String: Any]] ?? []).map { item in
                try Self.payload(item["signedPayload"] as? String ?? "").data?.signedTransactionInfo.flatMap { Self.ids([$0]).first }
            }
            #expect(failedIds == [failed.id, heldBack.id], "\(failures.text)")

            let customer = try await harness.apple(
                "POST", "/inApps/v1/notifications/history", json: #"{\#(window),"transactionId":"\#(delivered.id)"}"#)
            #expect((customer.json["notificationHistory"] as? [Any])?.count == 2, "the account's purchase and the one held back")
            let noStart = try await harness.apple("POST", "/inApps/v1/notifications/history", json: #"{"endDate":\#(now)}"#)
            #expect(noStart.status == 400 && noStart.json["errorCode"] as? Int == 4000015)
        }
    }

    @Test("Every purchase has an order id that Look Up Order ID finds; an unknown one is status 1")
    func orderLookup() async throws {
        try await Self.with { harness in
            let purchase = try await harness.purchase(send: false)
            #expect(purchase.orderId.hasPrefix("MQ") && purchase.orderId.count == 10)
            let found = try await harness.apple("GET", "/inApps/v1/lookup/\(purchase.orderId)")
            #expect(found.status == 200 && found.json["status"] as? Int == 0, "\(found.text)")
            #expect(Self.ids(found.json["signedTransactions"]) == [purchase.id])
            let unknown = try await harness.apple("GET", "/inApps/v1/lookup/MQ00000000")
            #expect(unknown.json["status"] as? Int == 1 && Self.ids(unknown.json["signedTransactions"]).isEmpty, "\(unknown.text)")
        }
    }

    @Test("Refund history lists the customer's refunded transactions once …/refund is made")
    func refundHistory() async throws {
        try await Self.with { harness in
            let account = UUID()
            let kept = try await harness.purchase(account: account, send: false)
            let refunded = try await harness.purchase(account: account, send: false)
            let before = try await harness.apple("GET", "/inApps/v2/refund/lookup/\(kept.id)")
            #expect(before.status == 200 && Self.ids(before.json["signedTransactions"]).isEmpty, "\(before.text)")
            let refund = try await harness.call("POST", "/transactions/\(refunded.id)/refund", json: #"{"send":false}"#)
            #expect(refund.status == 200, "\(refund.text)")
            let after = try await harness.apple("GET", "/inApps/v2/refund/lookup/\(kept.id)")
            #expect(Self.ids(after.json["signedTransactions"]) == [refunded.id], "\(after.text)")
            #expect(after.json["hasMore"] as? Bool == false && after.json["revision"] is String)
        }
    }

    @Test("A consumption request and a declined refund are signed notifications that reach the webhook")
    func consumptionRequestReachesWebhook() async throws {
        try await Self.with { harness in
            let (id, _) = try await harness.purchase(send: false)
            let request = try await harness.call("POST", "/transactions/\(id)/consumption-request", json: #"{"reason":"UNSATISFIED_WITH_PURCHASE"}"#)
            #expect(request.status == 200, "\(request.text)")
            let declined = try await harness.call("POST", "/transactions/\(id)/refund-declined")
            #expect(declined.status == 200, "\(declined.text)")
            try await harness.store.waitForDeliveries { $0.count == 2 && $0.allSatisfy { $0.state == .delivered } }
            // Each notification is its own delivery, retried on its own: they may arrive in either order, as Apple's may.
            let payloads = try harness.webhook.signedPayloads.map(Self.payload)
            #expect(payloads.count == 2 && Set(payloads.map(\.notificationType)) == [.consumptionRequest, .refundDeclined])
            let consumption = payloads.first { $0.notificationType == .consumptionRequest }
            #expect(consumption?.data?.consumptionRequestReason == "UNSATISFIED_WITH_PURCHASE")
            #expect(payloads.compactMap { $0.data?.signedTransactionInfo }.flatMap { Self.ids([$0]) } == [id, id])
            let badReason = try await harness.call("POST", "/transactions/\(id)/consumption-request", json: #"{"reason":"BORED"}"#)
            #expect(badReason.status == 400)
        }
    }

    @Test("A fault answers 500 twice (Apple's error body), then the route serves; a 429 carries Retry-After")
    func faults() async throws {
        try await Self.with { harness in
            let purchase = try await harness.purchase(send: false)
            let path = "/inApps/v1/lookup/\(purchase.orderId)"
            let added = try await harness.call("POST", "/faults", json: #"{"path":"/inApps/v1/lookup/","status":500,"count":2}"#)
            #expect(added.status == 200, "\(added.text)")
            #expect((try await harness.call("GET", "/faults").json["faults"] as? [[String: Any]])?.first?["remaining"] as? Int == 2)
            for _ in 0..<2 {
                let faulted = try await harness.apple("GET", path)
                #expect(faulted.status == 500 && faulted.json["errorCode"] as? Int == 5000000, "\(faulted.text)")
            }
            let served = try await harness.apple("GET", path)
            #expect(served.status == 200 && served.json["status"] as? Int == 0, "\(served.text)")
            #expect((try await harness.call("GET", "/faults").json["faults"] as? [Any])?.isEmpty == true)

            _ = try await harness.call("POST", "/faults", json: #"{"path":"/inApps/","status":429,"retryAfter":7}"#)
            let limited = try await harness.apple("GET", path)
            #expect(limited.status == 429 && limited.headers.first(name: "Retry-After") == "7", "\(limited.text)")
            #expect(limited.json["errorCode"] as? Int == 4290000)
            #expect(try await harness.apple("GET", path).status == 200)
        }
    }
}
