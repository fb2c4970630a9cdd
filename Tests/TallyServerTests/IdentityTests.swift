import Foundation
import HTTPTypes
import TallyAPI
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

@Suite("Identity and sessions", .timeLimit(.minutes(5)))
struct IdentityTests {
    @Test("Guest upgrade in place, sign-in, refresh rotation and reuse detection", arguments: StoreKind.allCases)
    func sessionLifecycle(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let deviceId = "device-" + UUID().uuidString
            let guest = try await api.newGuest(deviceId: deviceId)
            let again = try await api.newGuest(deviceId: deviceId)
            #expect(again.userId == guest.userId)
            try await api.grant(42, to: guest)

            let email = "u\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let linked = try await api.send(.post, "/v1/auth/link", token: guest.accessToken, json: CredentialsRequest(email: email, password: "correct horse"))
            #expect(linked.status == .ok)
            let me = try linked.decode(Me.self)
            #expect(me.userId == guest.userId && !me.isGuest && me.email == email)
            #expect(try await api.wallet(guest).balance == 42)

            let other = try await api.newGuest()
            let taken = try await api.send(.post, "/v1/auth/link", token: other.accessToken, json: CredentialsRequest(email: email.uppercased(), password: "another one"))
            #expect(taken.status == .conflict && taken.errorCode == "credential_in_use")

            let wrong = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: "wrong password"))
            #expect(wrong.status == .unauthorized && wrong.errorCode == "invalid_credentials")
            let signedIn = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: "correct horse"))
            let session = try signedIn.decode(SessionTokens.self)
            #expect(session.userId == guest.userId && !session.isGuest)

            let rotated = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: session.refreshToken))
            #expect(rotated.status == .ok)
            let next = try rotated.decode(SessionTokens.self)
            // The old token again: the whole family is revoked, including the token just issued.
            let reuse = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: session.refreshToken))
            #expect(reuse.status == .unauthorized && reuse.errorCode == "refresh_token_reused")
            let afterReuse = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: next.refreshToken))
            #expect(afterReuse.status == .unauthorized)
            #expect(try await api.send(.get, "/v1/me", token: next.accessToken).status == .unauthorized)
            // The guest's own first session is unaffected.
            #expect(try await api.send(.get, "/v1/me", token: guest.accessToken).status == .ok)
            await api.close()
        }
    }

    @Test("Access tokens expire by the injected clock; sign-out and account deletion end them", arguments: StoreKind.allCases)
    func tokenEnd(kind: StoreKind) async throws {
        try await LiveServer.with(kind, accessTokenTTL: 900) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).status == .ok)
            server.clock.advance(by: 16 * 60)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).status == .unauthorized)
            let refreshed = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: user.refreshToken)).decode(SessionTokens.self)
            #expect(try await api.send(.get, "/v1/me", token: refreshed.accessToken).status == .ok)

            #expect(try await api.send(.post, "/v1/auth/sign-out", token: refreshed.accessToken).status == .noContent)
            #expect(try await api.send(.get, "/v1/me", token: refreshed.accessToken).status == .unauthorized)

            let doomed = try await api.newGuest()
            #expect(try await api.send(.delete, "/v1/me", token: doomed.accessToken).status == .ok)
            #expect(try await api.send(.get, "/v1/wallet", token: doomed.accessToken).status == .unauthorized)
            #expect(try await api.send(.get, "/admin/v1/users/\(doomed.userId)", admin: true).status == .notFound)
            await api.close()
        }
    }

    @Test("A refresh token revokes its session without an access token, long after the access token expired; unknown tokens tell nothing", arguments: StoreKind.allCases)
    func revokeByRefreshToken(kind: StoreKind) async throws {
        try await LiveServer.with(kind, accessTokenTTL: 900) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let other = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString))
                .decode(SessionTokens.self)
            server.clock.advance(by: 3 * 3600)  // the device signed out offline; its access token has long expired
            let revoked = try await api.send(.post, "/v1/auth/revoke", json: RefreshRequest(refreshToken: user.refreshToken))
            #expect(revoked.status == .noContent)
            let refresh = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: user.refreshToken))
            #expect(refresh.status == .unauthorized)
            // The same answer for a token already revoked and one never issued; bad input is a 400.
            #expect(try await api.send(.post, "/v1/auth/revoke", json: RefreshRequest(refreshToken: user.refreshToken)).status == .noContent)
            #expect(try await api.send(.post, "/v1/auth/revoke", json: RefreshRequest(refreshToken: "never-issued")).status == .noContent)
            let empty = try await api.send(.post, "/v1/auth/revoke", json: RefreshRequest(refreshToken: ""))
            #expect(empty.status == .badRequest && empty.errorCode == "invalid_field")
            // Another session is untouched.
            let fresh = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: other.refreshToken))
            #expect(fresh.status == .ok)
            await api.close()
        }
    }

    @Test("Guest creation is rate limited per IP, with Retry-After", arguments: StoreKind.allCases)
    func guestRateLimit(kind: StoreKind) async throws {
        // Years after every other test's sign-ups, which share the PostgreSQL database and the loopback address.
        try await LiveServer.with(kind, signupsPerHour: 3, start: Date(timeIntervalSince1970: 2_100_000_000)) { server in
            let api = server.connection()
            let first = "device-" + UUID().uuidString
            _ = try await api.newGuest(deviceId: first)
            _ = try await api.newGuest()
            _ = try await api.newGuest()
            let limited = try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString))
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 > 0)
            // An existing device is not a new sign-up.
            #expect(try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: first)).status == .ok)
            server.clock.advance(by: 3601)
            _ = try await api.newGuest()
            await api.close()
        }
    }

    @Test("No endpoint reaches another user's data", arguments: StoreKind.allCases)
    func crossUser(kind: StoreKind) async throws {
        // The AI routes too, with a real local model as their upstream and a daily generation named like the action.
        let daily = DailyGenerationSpec(
            name: "ai.query", model: AIGatewayTests.model,
            prompt: try PromptTemplate("A prediction for {{date}}.", params: [], hasProfile: false, place: "test"),
            action: SyncFixture.catalog.action(named: "ai.query")!, quotaLimit: nil, params: [], profileDocument: nil)
        // Purchases too, signed by the local App Store on the server's clock.
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        let purchases = try AppStoreConfiguration(
            bundleId: TestProducts.bundleId, environments: [.sandbox], rootCertificates: [Data(appStore.authority.rootDER)],
            products: [AppStoreProduct(productId: TestProducts.tokens100, grant: .tokens(100))])
        try await DevLLMTests.with { upstream in try await LiveServer.with(kind, catalog: SyncFixture.catalog, clock: clock, configure: { configuration in
            configuration.sync = SyncFixture.sync
            configuration.appStore = purchases
            configuration.ai = AIConfiguration(
                upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: DevLLMTests.key),
                models: [AIGatewayTests.model], dailyGenerations: [daily])
        }) { server in
            let api = server.connection()
            let alice = try await api.newGuest()
            let bob = try await api.newGuest()
            try await api.grant(50, to: alice)
            let hold = try await api.send(.post, "/v1/wallet/holds", token: alice.accessToken, json: CreateHoldRequest(amount: 10, ttlSeconds: 60))
            let holdId = try hold.decode(Hold.self).holdId
            #expect(try await api.send(.get, "/v1/wallet/holds/\(holdId)", token: bob.accessToken).status == .notFound)
            #expect(try await api.send(.post, "/v1/wallet/holds/\(holdId)/capture", token: bob.accessToken, json: CaptureHoldRequest(amount: 10)).status == .notFound)
            #expect(try await api.send(.delete, "/v1/wallet/holds/\(holdId)", token: bob.accessToken).status == .notFound)
            // A user id sent by the client is ignored: the token decides.
            let spoofed = try await api.send(.get, "/v1/wallet", token: bob.accessToken, headers: [.init("X-User-Id")!: alice.userId])
            #expect(try spoofed.decode(Wallet.self).balance == 0)
            #expect(try await api.send(.post, "/admin/v1/users/\(alice.userId)/grants", token: alice.accessToken, json: GrantRequest(amount: 5, reason: "x"), on: .admin).status == .unauthorized)
            let forged = alice.accessToken.dropLast(2) + "xx"
            #expect(try await api.send(.get, "/v1/wallet", token: String(forged)).status == .unauthorized)
            #expect(try await api.wallet(alice).held == 10)
            // Alice's purchase: Bob presenting her signed transaction is refused, and learns nothing of it.
            let bought = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: alice.userId), send: false)
            let redeemed = try await api.send(
                .post, "/v1/purchases/apple", token: alice.accessToken, json: RedeemPurchaseRequest(signedTransaction: bought.signedTransaction))
            #expect(redeemed.status == .ok, "\(redeemed.text)")
            try await Self.everyRouteKeepsToItsUser(
                api, alice: alice, holdId: holdId, purchase: bought, notification: try appStore.test(send: false))
            await api.close()
        } }
    }
}

extension IdentityTests {
    /// Opens `GET /v1/sync/events` as `user`: 200, and what comes up to its first `wallet` event (what a stream
    /// sends at once) contains none of `secrets`.
    static func expectEventStream(
        _ api: APIConnection, as user: TestUser, showsNoneOf secrets: [String], headers: [(String, String)] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let (stream, head) = try await EventStreamClient.open(port: api.port, token: user.accessToken, headers: headers)
        #expect(head.status == 200, "GET /v1/sync/events: \(head.status) \(stream.body)", sourceLocation: sourceLocation)
        if head.status == 200 {
            while true {
                let item = try await stream.next()
                if case .event("wallet", _, _) = item { break }
                if item == .end { break }
            }
        }
        let shown = stream.body + head.headers.map(\.1).joined(separator: "\n")
        let leaked = secrets.filter { shown.contains($0) }
        #expect(leaked.isEmpty, "GET /v1/sync/events carries \(leaked)", sourceLocation: sourceLocation)
        await stream.close()
    }

    /// Every route of both routers (as ``OpenAPITests/routerRoutes()`` lists them, so a route added later is
    /// called too) is called with the token of a fresh user, Bob, with Alice's ids in its path and her user id
    /// in a header: no answer carries anything of Alice's, and nothing Alice reads changes. A route whose
    /// path names something the test has no value of Alice's for, or that refuses Bob's request as bad input
    /// (so it never reached the data), fails until the test knows it.
    static func everyRouteKeepsToItsUser(
        _ api: APIConnection, alice: TestUser, holdId: String, purchase: DevAppStore.Purchase, notification: DevAppStore.Notification
    ) async throws {
        let email = "alice-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let reason = "alice's grant \(UUID().uuidString)"
        #expect(try await api.send(.post, "/v1/auth/link", token: alice.accessToken, json: CredentialsRequest(email: email, password: "alice's password")).status == .ok)
        #expect(try await api.send(.patch, "/v1/me", token: alice.accessToken, json: UpdateMeRequest(timezone: "Pacific/Kiritimati")).status == .ok)
        #expect(try await api.send(.post, "/admin/v1/users/\(alice.userId)/grants", admin: true, json: GrantRequest(amount: 1, reason: reason)).status == .created)
        #expect(try await api.send(.post, "/v1/actions/reading", token: alice.accessToken, headers: [.idempotencyKey: UUID().uuidString]).status == .ok)
        let note = "alice's note \(UUID().uuidString)"
        let clientId = "alice-client-\(UUID().uuidString)"
        #expect(try await api.putDocument(alice, "profile", "alice-doc", .object(["note": .string(note)])).status == .created)
        let pushed = try await api.push(alice, clientId: clientId, [
            SyncMutation(id: 1, op: .put, collection: "profile", docId: "alice-doc-2", data: .object(["note": .string(note)]))
        ])
        #expect(pushed.status == .ok, "\(pushed.text)")
        // What is Alice's alone; none of it may reach Bob. (Her time zone without its slash, which JSON may escape.)
        let alices = [
            alice.userId, alice.accessToken, alice.refreshToken, holdId, email, reason, "Kiritimati", note, clientId,
            purchase.transaction.transactionId,
        ]
        let parameters = ["holdId": holdId, "userId": alice.userId, "name": "ai.query", "collection": "profile", "docId": "alice-doc"]
        let reads = [
            "/v1/me", "/v1/wallet", "/v1/wallet/entries?limit=100", "/v1/wallet/holds/\(holdId)", "/v1/quotas",
            "/v1/collections/profile/docs/alice-doc", "/v1/collections/profile/docs", "/v1/sync/pull", "/v1/purchases",
        ]
        func aliceReads() async throws -> [String] {
            var texts: [String] = []
            for path in reads {
                let response = try await api.send(.get, path, token: alice.accessToken)
                #expect(response.status == .ok, "Alice's \(path): \(response.text)")
                texts.append(response.text)
            }
            return texts
        }
        // Alice's generation of the day exists before the routes are called: her own GET of it later is a replay.
        #expect(try await api.send(.get, "/v1/ai/daily/ai.query", token: alice.accessToken).status == .ok)
        var before = try await aliceReads()

        let routes = try OpenAPITests.routerRoutes()
        let all = routes.api.sorted().map { ($0, APIConnection.Listener.api) } + routes.admin.sorted().map { ($0, .admin) }
        #expect(all.count > 20, "\(all)")
        for (route, listener) in all {
            let parts = route.split(separator: " ", maxSplits: 1).map(String.init)
            let method = try #require(HTTPRequest.Method(parts[0]))
            var path = parts[1]
            for name in OpenAPITests.templateParameters(path) {
                guard let value = parameters[name] else {
                    Issue.record("\(route) names {\(name)}: give the test a value of Alice's for it")
                    continue
                }
                path = path.replacingOccurrences(of: "{\(name)}", with: value)
            }
            let bob = try await api.newGuest(granted: 20)
            let bodies: [String: any Encodable & Sendable] = [
                "POST /v1/auth/guest": GuestSignInRequest(deviceId: "device-" + UUID().uuidString),
                "POST /v1/auth/attestation": AppAttestation(keyId: Data(count: 32).base64EncodedString(), attestation: "AAAA", challenge: "c"),
                "POST /v1/auth/refresh": RefreshRequest(refreshToken: bob.refreshToken),
                "POST /v1/auth/revoke": RefreshRequest(refreshToken: bob.refreshToken),
                // Alice's transaction: 409 purchase_claimed, nothing of hers moved or shown.
                "POST /v1/purchases/apple": RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction),
                "POST /v1/webhooks/appstore": AppStoreNotificationRequest(signedPayload: notification.signedPayload),
                "POST /v1/auth/sign-in": CredentialsRequest(email: email, password: "bob's guess"),
                "POST /v1/auth/link": CredentialsRequest(email: email, password: "bob's password"),
                // Alice's email: Bob may ask for her reset mail (202, nothing revealed) but not use a code he does not have.
                "POST /v1/auth/password/forgot": ForgotPasswordRequest(email: email),
                "POST /v1/auth/password/reset": ResetPasswordRequest(email: email, code: "12345678", newPassword: "bob's password"),
                "POST /v1/auth/password": ChangePasswordRequest(currentPassword: "alice's password", newPassword: "bob's password"),
                "POST /v1/auth/email/verify": VerifyEmailRequest(code: "12345678"),
                "PATCH /v1/me": UpdateMeRequest(timezone: "Europe/Paris", language: "de"),
                "POST /v1/wallet/holds": CreateHoldRequest(amount: 5, ttlSeconds: 60),
                "POST /v1/wallet/holds/{holdId}/capture": CaptureHoldRequest(amount: 10),
                "POST /admin/v1/users/{userId}/grants": GrantRequest(amount: 5, reason: "bob's grant"),
                "POST /admin/v1/users/{userId}/purchases/reconcile": ReconcileRequest(),
                "POST /admin/v1/appstore/replay-notifications": ReplayNotificationsRequest(since: Date(timeIntervalSince1970: 1_799_000_000)),
                "POST /v1/purchases/consumption-consent": ConsumptionConsentRequest(consented: true),
                "POST /v1/purchases/apple/offers": OfferSignatureRequest(productId: "com.example.premium.monthly", offerIdentifier: "comeback50"),
                "PUT /admin/v1/users/{userId}/premium": PremiumRequest(until: Date(timeIntervalSince1970: 1_900_000_000)),
                "PUT /v1/collections/{collection}/docs/{docId}": PutDocumentRequest(data: .object(["note": .string("bob's")])),
                "PATCH /v1/collections/{collection}/docs/{docId}": JSONValue.object(["note": .string("bob's")]),
                // Alice's client id: refused (403), and nothing of hers deleted.
                "POST /v1/ai/chat/completions": ChatCompletionRequest(model: "chat", messages: [ChatMessage(role: "user", content: "hello")]),
                "POST /v1/sync/push": SyncPushRequest(
                    clientId: clientId, mutations: [SyncMutation(id: 2, op: .delete, collection: "profile", docId: "alice-doc")]),
            ]
            if route == "GET /v1/sync/events" {
                // A stream that never ends: Bob's starts with his own wallet and nothing of Alice's; Alice's opens.
                try await expectEventStream(api, as: bob, showsNoneOf: alices, headers: [("X-User-Id", alice.userId)])
                try await expectEventStream(api, as: alice, showsNoneOf: [])
                let after = try await aliceReads()
                #expect(after == before, "\(route) as Bob changed what Alice reads")
                before = after
                continue
            }
            var headers: HTTPFields = [.idempotencyKey: UUID().uuidString, .init("X-User-Id")!: alice.userId]
            if route == "PATCH /v1/collections/{collection}/docs/{docId}" { headers[.contentType] = "application/merge-patch+json" }
            let response = try await api.send(method, path, token: bob.accessToken, json: bodies[route], headers: headers, on: listener)
            let answer = "\(route) as Bob: \(response.status) \(response.text)"
            #expect(response.status.code < 500, "\(answer)")
            #expect(response.status != .tooManyRequests, "\(answer)")
            let badInput = response.status == .badRequest && ["invalid_json", "invalid_field", "invalid_query"].contains(response.errorCode)
            #expect(!badInput, "refused as bad input, so never reached the data: give the test a valid body for \(answer)")
            if path.hasPrefix("/admin/") {
                #expect(response.status == .unauthorized, "\(answer)")
            } else {
                #expect(response.errorCode != "unauthorized", "Bob's token was refused: \(answer)")
            }
            let shown = response.text + response.headers.map(\.value).joined(separator: "\n")
            let leaked = alices.filter { shown.contains($0) }
            #expect(leaked.isEmpty, "\(answer) carries Alice's \(leaked)")
            let after = try await aliceReads()
            #expect(after == before, "\(route) as Bob changed what Alice reads")
            before = after  // a change is reported once, by the route that made it
            if method == .get {
                // Alice herself (the admin key on the admin listener) reaches what Bob was refused: the path is right.
                let own = try await api.send(.get, path, token: listener == .admin ? nil : alice.accessToken, admin: listener == .admin, on: listener)
                #expect(own.status == .ok, "\(route) for its owner: \(own.status) \(own.text)")
            }
        }
    }
}
