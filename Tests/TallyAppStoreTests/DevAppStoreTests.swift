import AsyncHTTPClient
import Foundation
import Logging
import TallyAppStore
import TallyDevAppStore
import TallyStore
import Testing

/// `tally-dev dev-appstore`'s stand-in: its HTTP API (every event, checked by the real verifier and a real receiver), its
/// deliveries and their retries on a manual clock, duplicates and reordering on request, and its CA directory.
@Suite("Dev App Store stand-in", .timeLimit(.minutes(2)))
struct DevAppStoreTests {
    // MARK: The retry schedule

    @Test("Apple's schedule: retries 1, 12, 24, 48 and 72 hours after the attempt before, then none; 200-206 deliver")
    func schedule() {
        let hour: TimeInterval = 3_600
        #expect((1...5).map { DevDeliverySchedule.delay(afterAttempt: $0, hour: hour) } == [1, 12, 24, 48, 72].map { $0 * hour })
        #expect(DevDeliverySchedule.delay(afterAttempt: 6, hour: hour) == nil)
        #expect(DevDeliverySchedule.delay(afterAttempt: 0, hour: hour) == nil)
        #expect(DevDeliverySchedule.delay(afterAttempt: 2, hour: 0.5) == 6)
        #expect((200...206).allSatisfy(DevDeliverySchedule.isDelivered(status:)))
        #expect(![199, 207, 301, 404, 500, 503].contains(where: DevDeliverySchedule.isDelivered(status:)))
    }

    // MARK: Deliveries on a manual clock

    @Test("A delivery answered 500 is retried one (compressed) hour later on the clock, not a moment before, and then delivered")
    func retryAfterFailure() async throws {
        try await WebhookReceiver.with(answering: [500]) { receiver in
            let fixture = try AppStoreFixture(webhook: receiver.url)
            let start = fixture.clock.now
            try await delivering(fixture.store) {
                let notification = try fixture.store.test()
                let first = try await fixture.store.waitForDeliveries { $0.first?.state == .retrying }
                #expect(first[0].attempts.map(\.status) == [500])
                #expect(first[0].nextAttemptAt == start.addingTimeInterval(1))
                try await fixture.clock.waitForSleepers(1)
                fixture.clock.advance(by: 0.999)
                #expect(fixture.clock.sleeperCount == 1, "the retry still waits: its hour is not over")
                #expect(fixture.store.deliveries[0].attempts.count == 1)
                fixture.clock.advance(by: 0.001)
                let done = try await fixture.store.waitForDeliveries { $0.first?.state == .delivered }
                #expect(done[0].attempts.map(\.status) == [500, 200])
                #expect(done[0].attempts.map(\.at) == [start, start.addingTimeInterval(1)])
                #expect(receiver.bodies == [notification.body, notification.body], "the same signed payload both times")
                #expect(fixture.clock.sleeperCount == 0)
            }
        }
    }

    @Test("A webhook that keeps failing gets six attempts on Apple's schedule (here 2 s to the hour), then the delivery fails")
    func wholeSchedule() async throws {
        try await WebhookReceiver.with(answering: Array(repeating: 503, count: 6)) { receiver in
            let fixture = try AppStoreFixture(webhook: receiver.url) { $0.hour = 2 }
            let start = fixture.clock.now
            try await delivering(fixture.store) {
                _ = try fixture.store.purchase(productId: "com.example.tokens.100")
                for (attempt, hours) in [1.0, 12, 24, 48, 72].enumerated() {
                    try await fixture.store.waitForDeliveries { $0.first?.attempts.count == attempt + 1 && $0.first?.state == .retrying }
                    try await fixture.clock.waitForSleepers(1)
                    fixture.clock.advance(by: hours * 2)
                }
                let failed = try await fixture.store.waitForDeliveries { $0.first?.state == .failed }
                #expect(failed[0].attempts.map(\.status) == Array(repeating: 503, count: 6))
                #expect(failed[0].attempts.map { $0.at.timeIntervalSince(start) } == [0, 2, 26, 74, 170, 314])
                #expect(failed[0].nextAttemptAt == nil && receiver.bodies.count == 6)
                #expect(fixture.clock.sleeperCount == 0, "nothing waits after the last attempt")
            }
        }
    }

    @Test("A refused connection is an attempt without a status, retried like a failure")
    func refusedConnection() async throws {
        // Port 1 on loopback: nothing listens there.
        // AsyncHTTPClient keeps trying to connect until the attempt's deadline: a short one keeps the test short.
        let fixture = try AppStoreFixture(webhook: "http://127.0.0.1:1/appstore") { $0.attemptTimeout = .milliseconds(200) }
        try await delivering(fixture.store) {
            _ = try fixture.store.test()
            let deliveries = try await fixture.store.waitForDeliveries { $0.first?.state == .retrying }
            try #require(deliveries[0].attempts.count == 1)
            #expect(deliveries[0].attempts[0].status == nil)
            #expect(deliveries[0].attempts[0].error == "connection refused", "\(deliveries[0].attempts)")
            try await fixture.clock.waitForSleepers(1)
        }
    }

    @Test("Notifications held back are sent on request, out of order and twice, each with its own notificationUUID")
    func duplicatesAndReordering() async throws {
        try await WebhookReceiver.with { receiver in
            let fixture = try AppStoreFixture(webhook: receiver.url)
            try await delivering(fixture.store) {
                let purchase = try fixture.store.purchase(productId: "com.example.tokens.100", send: false)
                fixture.clock.advance(by: 60)
                let refund = try fixture.store.refund(purchase.transaction.transactionId, send: false)
                #expect(fixture.store.deliveries.isEmpty, "nothing is sent while held")
                for notification in [refund, purchase.notification, purchase.notification] {
                    let count = fixture.store.deliveries.count + 1
                    fixture.store.deliver(notification)
                    try await fixture.store.waitForDeliveries { $0.count == count && $0.allSatisfy { $0.state == .delivered } }
                }
                let received = try await receiver.signedPayloads.asyncMap { try await fixture.verifier.verifyNotification($0) }
                #expect(received.map(\.payload.notificationType) == [.refund, .oneTimeCharge, .oneTimeCharge])
                #expect(received.map(\.payload.notificationUUID)
                    == [refund.notificationUUID, purchase.notification.notificationUUID, purchase.notification.notificationUUID])
                #expect(received[0].payload.signedDate > received[1].payload.signedDate, "the later event arrived first")
            }
        }
    }

    // MARK: The HTTP API

    @Test("The HTTP API: every event answers its signed notification, which the receiver gets and the real verifier accepts", .timeLimit(.minutes(2)))
    func httpAPI() async throws {
        try await WebhookReceiver.with { receiver in
            let fixture = try AppStoreFixture(webhook: receiver.url)
            try await delivering(fixture.store) {
                try await serveStandIn(fixture.store) { base in
                    var sent = 0
                    /// Posts an event, checks its answer against what the receiver got and what the verifier reads.
                    func event(
                        _ path: String, _ body: String? = nil, _ type: AppStoreNotificationType, _ subtype: AppStoreNotificationSubtype? = nil
                    ) async throws -> AppStoreNotification {
                        let (status, answer) = try await call(.POST, base + path, body)
                        #expect(status == 200, "\(path): \(answer)")
                        let notification = try #require(answer["notification"] as? [String: Any], "\(path): \(answer)")
                        let signed = try #require(notification["signedPayload"] as? String)
                        #expect(notification["notificationType"] as? String == type.rawValue, "\(path)")
                        sent += 1
                        let count = sent
                        try await fixture.store.waitForDeliveries { $0.count == count && $0.allSatisfy { $0.state == .delivered } }
                        #expect(receiver.signedPayloads.last == signed, "\(path): the receiver got what the answer says")
                        let verified = try await fixture.verifier.verifyNotification(signed)
                        #expect(verified.payload.notificationType == type && verified.payload.subtype == subtype, "\(path)")
                        fixture.clock.advance(by: 60)
                        return verified
                    }

                    // A consumable: bought, refunded in part, the refund reversed, revoked.
                    let (status, bought) = try await call(
                        .POST, base + "/purchase", #"{"productId":"com.example.tokens.100","quantity":2,"appAccountToken":"7e3fb20b-4cdb-47cc-936d-99d65f608138"}"#)
                    #expect(status == 200)
                    let consumable = try #require(bought["transactionId"] as? String)
                    #expect(bought["originalTransactionId"] as? String == consumable)
                    let transaction = try await fixture.verifier.verifyTransaction(try #require(bought["signedTransaction"] as? String))
                    #expect(transaction.quantity == 2 && transaction.type == .consumable)
                    #expect(transaction.appAccountToken == UUID(uuidString: "7e3fb20b-4cdb-47cc-936d-99d65f608138"))
                    sent += 1
                    try await fixture.store.waitForDeliveries { $0.count == 1 && $0[0].state == .delivered }
                    let charge = try await fixture.verifier.verifyNotification(try #require(receiver.signedPayloads.first))
                    #expect(charge.payload.notificationType == .oneTimeCharge && charge.transaction == transaction)
                    fixture.clock.advance(by: 60)

                    let refund = try await event("/transactions/\(consumable)/refund", #"{"revocationPercentage":50000}"#, .refund)
                    #expect(refund.transaction?.revocationType == .refundProrated && refund.transaction?.revocationPercentage == 50_000)
                    #expect(refund.transaction?.revocationDate != nil && refund.transaction?.transactionId == consumable)
                    let reversed = try await event("/transactions/\(consumable)/refund-reversed", nil, .refundReversed)
                    #expect(reversed.transaction?.revocationDate == nil && reversed.transaction?.revocationType == nil)
                    let revoked = try await event("/transactions/\(consumable)/revoke", nil, .revoke)
                    #expect(revoked.transaction?.revocationType == .familyRevoke)

                    // A subscription through its life.
                    let (_, subscribed) = try await call(.POST, base + "/purchase", #"{"productId":"com.example.premium.monthly"}"#)
                    let original = try #require(subscribed["transactionId"] as? String)
                    sent += 1
                    try await fixture.store.waitForDeliveries { $0.count == 5 && $0.allSatisfy { $0.state == .delivered } }
                    let initial = try await fixture.verifier.verifyNotification(try #require(receiver.signedPayloads.last))
                    #expect(initial.payload.notificationType == .subscribed && initial.payload.subtype == .initialBuy)
                    #expect(initial.payload.data?.status == 1 && initial.renewalInfo?.autoRenews == true)
                    let firstExpiry = try #require(initial.transaction?.expiresDate)
                    fixture.clock.advance(by: 60)

                    let renewed = try await event("/transactions/\(original)/renew", nil, .didRenew)
                    #expect(renewed.transaction?.originalTransactionId == original && renewed.transaction?.transactionId != original)
                    #expect(renewed.transaction?.purchaseDate == firstExpiry && renewed.transaction?.transactionReason == .renewal)
                    let latest = try #require(renewed.transaction)
                    let off = try await event("/transactions/\(original)/auto-renew", #"{"enabled":false}"#, .didChangeRenewalStatus, .autoRenewDisabled)
                    #expect(off.renewalInfo?.autoRenewStatus == 0 && off.transaction == latest.withSignedDate(off.payload.signedDate))
                    _ = try await event("/transactions/\(original)/auto-renew", #"{"enabled":true}"#, .didChangeRenewalStatus, .autoRenewEnabled)
                    let failed = try await event(
                        "/transactions/\(latest.transactionId)/billing-failure", #"{"gracePeriodSeconds":86400}"#, .didFailToRenew, .gracePeriod)
                    #expect(failed.renewalInfo?.gracePeriodExpiresDate == latest.expiresDate?.addingTimeInterval(86_400))
                    #expect(failed.renewalInfo?.isInBillingRetryPeriod == true && failed.payload.data?.status == 4)
                    let graceOver = try await event("/transactions/\(original)/grace-period-expired", nil, .gracePeriodExpired)
                    #expect(graceOver.payload.data?.status == 3)
                    let expired = try await event("/transactions/\(original)/expire", nil, .expired, .billingRetry)
                    #expect(expired.payload.data?.status == 2 && expired.renewalInfo?.expirationIntent == 2)
                    let back = try await event("/transactions/\(original)/renew", nil, .subscribed, .resubscribe)
                    #expect(back.payload.data?.status == 1 && back.transaction?.originalTransactionId == original)
                    let subscriptionRefund = try await event("/transactions/\(try #require(back.transaction?.transactionId))/refund", nil, .refund)
                    #expect(subscriptionRefund.payload.data?.status == 5 && subscriptionRefund.transaction?.revocationType == .refundFull)
                    _ = try await event("/transactions/\(try #require(back.transaction?.transactionId))/refund-reversed", nil, .refundReversed)
                    _ = try await event("/test", nil, .test)

                    // Held back, then sent twice on request.
                    let (_, held) = try await call(.POST, base + "/transactions/\(original)/auto-renew", #"{"enabled":false,"send":false}"#)
                    let heldUUID = try #require((held["notification"] as? [String: Any])?["notificationUUID"] as? String)
                    #expect(fixture.store.deliveries.count == sent)
                    for _ in 0..<2 {
                        #expect(try await call(.POST, base + "/notifications/\(heldUUID)/send").status == 200)
                        sent += 1
                        let count = sent
                        try await fixture.store.waitForDeliveries { $0.count == count && $0.allSatisfy { $0.state == .delivered } }
                    }
                    let lastTwo = try await receiver.signedPayloads.suffix(2).asyncMap { try await fixture.verifier.verifyNotification($0).payload.notificationUUID }
                    #expect(lastTwo == [heldUUID, heldUUID])

                    // What was sent, as GET /deliveries says.
                    let (_, listed) = try await call(.GET, base + "/deliveries")
                    let deliveries = try #require(listed["deliveries"] as? [[String: Any]])
                    #expect(deliveries.count == sent && sent == receiver.bodies.count)
                    #expect(deliveries.allSatisfy { $0["state"] as? String == "delivered" && ($0["attempts"] as? [Any])?.count == 1 })

                    // Refusals.
                    let refusals: [(String, String?, Int, String)] = [
                        ("/transactions/999/refund", nil, 404, "unknown_transaction"),
                        ("/transactions/\(consumable)/renew", nil, 409, "not_a_subscription"),
                        ("/transactions/\(consumable)/refund", nil, 409, "already_revoked"),
                        ("/transactions/\(original)/auto-renew", "{}", 400, "bad_request"),
                        ("/transactions/\(original)/refund", #"{"revocationPercentage":0}"#, 400, "bad_request"),
                        ("/transactions/\(original)/fly", nil, 404, "not_found"),
                        ("/purchase", "{not json", 400, "bad_request"),
                        ("/purchase", #"{"productId":""}"#, 400, "bad_request"),
                        ("/notifications/nope/send", nil, 404, "unknown_notification"),
                    ]
                    for (path, body, expected, code) in refusals {
                        let (status, answer) = try await call(.POST, base + path, body)
                        #expect(status == expected && (answer["error"] as? [String: Any])?["code"] as? String == code, "\(path): \(status) \(answer)")
                    }
                    #expect(fixture.store.deliveries.count == sent, "refusals send nothing")
                }
            }
        }
    }

    @Test("GET /root.der serves the root the server must trust, byte for byte")
    func rootCertificate() async throws {
        let fixture = try AppStoreFixture()
        try await serveStandIn(fixture.store) { base in
            var request = HTTPClientRequest(url: base + "/root.der")
            request.method = .GET
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: 1 << 16)
            #expect(response.status.code == 200 && Array(bytes.readableBytesView) == fixture.authority.rootDER)
        }
    }

    // MARK: The CA directory

    @Test("The CA directory: generated once with private keys readable by the owner only, the same root on every load, a stale leaf replaced")
    func certificateDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dev-appstore-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let made = try DevCertificateAuthority.loadOrGenerate(directory: directory, now: now)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(files == ["intermediate-key.pem", "intermediate.der", "leaf-key.pem", "leaf.der", "root-key.pem", "root.der"])
        for key in files where key.hasSuffix("-key.pem") {
            let mode = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(key).path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(key)")
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("root.der")) == Data(made.rootDER))
        let loaded = try DevCertificateAuthority.loadOrGenerate(directory: directory, now: now.addingTimeInterval(86_400))
        #expect(loaded.root == made.root && loaded.intermediate == made.intermediate && loaded.leaf == made.leaf)
        // Three years on, the leaf has expired: a new one from the same intermediate, the root unchanged.
        let later = now.addingTimeInterval(3 * 365 * 86_400)
        let renewed = try DevCertificateAuthority.loadOrGenerate(directory: directory, now: later)
        #expect(renewed.root == made.root && renewed.leaf != made.leaf && AppStoreChainRules.isValid(renewed.leaf, at: later))
        #expect(try DevCertificateAuthority.loadOrGenerate(directory: directory, now: later).leaf == renewed.leaf, "and it was written")
        // Part of a CA is an error, never a silently new root.
        try FileManager.default.removeItem(at: directory.appendingPathComponent("leaf-key.pem"))
        #expect(throws: (any Error).self) { try DevCertificateAuthority.loadOrGenerate(directory: directory, now: later) }
    }
}

/// Runs the stand-in's HTTP API on a free loopback port for the duration of `body` (given its base URL).
func serveStandIn<T: Sendable>(_ store: DevAppStore, _ body: (String) async throws -> T) async throws -> T {
    var logger = Logger(label: "dev-appstore-tests")
    // Cancelling a Hummingbird server logs its channels' cancellation as errors: nothing a test needs to see.
    logger.logLevel = .critical
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = buildDevAppStoreApplication(store: store, port: 0, logger: logger) { port in continuation.yield(port) }
    return try await serve(app, ports: ports) { port in try await body("http://127.0.0.1:\(port)") }
}

extension JWSTransactionDecodedPayload {
    /// The same transaction as signed at `date` (a notification re-signs its transaction when it is made).
    func withSignedDate(_ date: Date) -> Self {
        var copy = self
        copy.signedDate = date
        return copy
    }
}

extension Sequence where Element: Sendable {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
