import Crypto
import Foundation
import HTTPTypes
import TallyAPI
import TallyAppAttest
import TallyAppStore
import TallyDevAppStore
import TallyDevLLM
@testable import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// App Attest and DeviceCheck through the real HTTP stack, on both stores, with attestations and assertions made by the
/// stand-in's App Attestation CA for simulated device keys (the server trusts its root, as it trusts Apple's in
/// production) and DeviceCheck's two bits kept by the stand-in, which the server calls over loopback HTTP.
@Suite("App Attest and DeviceCheck", .timeLimit(.minutes(3)))
struct AppAttestServerTests {
    static let teamId = "TEAM123456"
    static let bundleId = "com.example.oracle"
    /// Three free readings a day, then 5 tokens; 100 tokens for signing up.
    static let catalog = try! Catalog(signupGrant: 100, quotas: Catalog.standard.quotas, actions: Catalog.standard.actions)

    /// A server on `kind` verifying App Attest in `mode` against `appStore`'s App Attestation root (and, with
    /// `deviceCheck`, calling its DeviceCheck over HTTP), on the stand-in's clock.
    static func with(
        _ kind: StoreKind, mode: DeviceIntegrityMode = .enforce, deviceCheck: DeviceIntegrityMode? = nil,
        _ body: @Sendable (LiveServer, DevAppStore, APIConnection) async throws -> Void
    ) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        try await TestProducts.serving(appStore) { port in
            let appAttest = try AppAttestConfiguration(
                teamId: teamId, bundleId: bundleId, environment: .development, mode: mode,
                rootCertificates: [Data(appStore.appAttest.rootCertificateDER)])
            var deviceCheckConfiguration: DeviceCheckConfiguration?
            if let deviceCheck {
                let key = appStore.deviceCheck.key
                let settings = DeviceCheckClient.Configuration(
                    keyId: key.keyId, teamId: key.teamId, privateKey: key.privateKey, baseURL: "http://127.0.0.1:\(port)")
                deviceCheckConfiguration = DeviceCheckConfiguration(
                    client: DeviceCheckClient(configuration: settings, now: { clock.now }), mode: deviceCheck, privateKeyEnv: "TALLY_DEVICECHECK_KEY")
            }
            let purchases = try AppStoreConfiguration(
                bundleId: TestProducts.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox],
                rootCertificates: [Data(appStore.authority.rootDER)],
                products: [AppStoreProduct(productId: TestProducts.tokens100, grant: .tokens(100))])
            try await LiveServer.with(
                kind, catalog: catalog, clock: clock,
                configure: { [deviceCheckConfiguration] in
                    $0.appAttest = appAttest
                    $0.deviceCheck = deviceCheckConfiguration
                    $0.appStore = purchases
                }
            ) { server in
                let api = server.connection()
                try await body(server, appStore, api)
                await api.close()
            }
        }
    }

    /// A simulated device: its App Attest key at the stand-in.
    struct Device {
        let appStore: DevAppStore
        let keyId: String
        let deviceId = "device-" + UUID().uuidString

        init(_ appStore: DevAppStore, keyId: String? = nil) {
            self.appStore = appStore
            self.keyId = keyId ?? appStore.appAttest.generateKey()
        }

        /// An attestation of the key for a challenge the server issued (or `challenge`), made as the stand-in's
        /// `faults` say, for `teamId`/`environment`.
        func attestation(
            _ api: APIConnection, challenge given: String? = nil, signedChallenge: String? = nil, teamId: String = AppAttestServerTests.teamId,
            environment: DevAppAttest.Environment = .development, faults: DevAppAttest.AttestationFaults = .init(), keyId sentKeyId: String? = nil
        ) async throws -> AppAttestation {
            let challenge: String
            if let given { challenge = given } else { challenge = try await api.send(.post, "/v1/auth/attestation/challenge").decode(AttestationChallenge.self).challenge }
            let hash = Array(SHA256.hash(data: Array((signedChallenge ?? challenge).utf8)))
            let object = try appStore.appAttest.attestKey(
                keyId, clientDataHash: hash, teamId: teamId, bundleId: AppAttestServerTests.bundleId, environment: environment, faults: faults)
            return AppAttestation(keyId: sentKeyId ?? keyId, attestation: Data(object).base64EncodedString(), challenge: challenge)
        }

        /// Signs in as this device's guest with an attestation (or `attestation`).
        func signIn(_ api: APIConnection, attestation: AppAttestation?, deviceCheckToken: String? = nil) async throws -> APIResponse {
            try await api.send(
                .post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: deviceId, attestation: attestation, deviceCheckToken: deviceCheckToken))
        }

        /// The `X-Tally-Assertion` value for a request (`nonce`: its idempotency key or a challenge carried in it).
        func assertion(_ method: String, _ path: String, nonce: String, challenge: String? = nil, body: [UInt8] = [], counter: UInt32? = nil) throws -> String {
            let bodyHash = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
            let clientData = AssertionHeader.clientData(method: method, path: path, nonce: nonce, bodySHA256: bodyHash)
            let object = try appStore.appAttest.generateAssertion(keyId, clientDataHash: Array(SHA256.hash(data: clientData)), counter: counter)
            return AssertionHeader(keyId: keyId, assertion: Data(object).base64EncodedString(), challenge: challenge).value
        }

        /// A reading with an assertion (or `header`, or none with `asserted: false`).
        func reading(_ api: APIConnection, _ user: TestUser, asserted: Bool = true, key: String = UUID().uuidString, header: String? = nil) async throws -> APIResponse {
            var headers: HTTPFields = [.idempotencyKey: key]
            if let header {
                headers[.tallyAssertion] = header
            } else if asserted {
                headers[.tallyAssertion] = try assertion("POST", "/v1/actions/reading", nonce: key)
            }
            return try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: headers)
        }
    }

    static func user(_ response: APIResponse) throws -> TestUser {
        let tokens = try response.decode(SessionTokens.self)
        return TestUser(userId: tokens.userId, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
    }

    @Test("Each refused attestation stores nothing: no guest, no key", arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore, api in
            let other = DevAppAttest(clock: server.clock)
            var cases: [(String, Device, AppAttestation)] = []
            func add(_ name: String, _ make: (Device) async throws -> AppAttestation) async throws {
                let device = Device(appStore)
                cases.append((name, device, try await make(device)))
            }
            try await add("another root") { try await $0.attestation(api, faults: .init(untrustedCA: true)) }
            try await add("the nonce of another challenge") { try await $0.attestation(api, signedChallenge: "not-the-challenge") }
            try await add("another team") { try await $0.attestation(api, teamId: "OTHER12345") }
            try await add("counter 1") { try await $0.attestation(api, faults: .init(counter: 1)) }
            try await add("the production environment") { try await $0.attestation(api, environment: .production) }
            try await add("another key id") { try await $0.attestation(api, keyId: other.generateKey()) }
            try await add("an unknown challenge") { try await $0.attestation(api, challenge: "never-issued") }
            // A challenge used once (by an accepted attestation) is refused the second time.
            let first = Device(appStore)
            let accepted = try await first.attestation(api)
            #expect(try await first.signIn(api, attestation: accepted).status == .created)
            try await add("a used challenge") { try await $0.attestation(api, challenge: accepted.challenge) }
            // The challenge expires after five minutes.
            let late = Device(appStore)
            let stale = try await late.attestation(api)
            server.clock.advance(by: 301)
            cases.append(("an expired challenge", late, stale))

            for (name, device, attestation) in cases {
                let refused = try await device.signIn(api, attestation: attestation)
                #expect(refused.status == .forbidden && refused.errorCode == "installation_rejected", "\(name): \(refused.text)")
                #expect(try await server.services.store.attestedKey(keyId: attestation.keyId) == nil, "\(name)")
                // Nothing was created: the same installation without an attestation is a new guest.
                #expect(try await device.signIn(api, attestation: nil).status == .created, "\(name)")
            }
            // The accepted key was stored with its guest, counter 0, in the development environment.
            let stored = try #require(try await server.services.store.attestedKey(keyId: first.keyId))
            #expect(stored.counter == 0 && stored.environment == "development" && stored.publicKey.count == 65)
            // A key is attested once: its second attestation is refused, from another installation too, creating nothing.
            let again = try await first.signIn(api, attestation: try await first.attestation(api))
            #expect(again.status == .forbidden && again.errorCode == "installation_rejected", "\(again.text)")
            let elsewhere = AppAttestServerTests.Device(appStore, keyId: first.keyId)
            let reused = try await elsewhere.signIn(api, attestation: try await elsewhere.attestation(api))
            #expect(reused.status == .forbidden && reused.errorCode == "installation_rejected", "\(reused.text)")
            #expect(try await elsewhere.signIn(api, attestation: nil).status == .created, "the refusal created no guest")
        }
    }

    @Test("enforce: an unattested guest gets no grant and no free reading, yet can pay; an attested one gets both", arguments: StoreKind.allCases)
    func enforce(kind: StoreKind) async throws {
        try await Self.with(kind, mode: .enforce) { server, appStore, api in
            // Unattested (the simulator, an old device, a script): no grant, no free reading.
            let plain = Device(appStore)
            let unattested = try Self.user(try await plain.signIn(api, attestation: nil))
            #expect(try await api.wallet(unattested).balance == 0)
            let refused = try await plain.reading(api, unattested, asserted: false)
            #expect(refused.status == .forbidden && refused.errorCode == "attestation_required", "\(refused.text)")
            // It buys tokens at the App Store (no assertion needed), and its reading is paid with them.
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: unattested.userId), send: false)
            let bought = try await api.send(
                .post, "/v1/purchases/apple", token: unattested.accessToken, json: RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction))
            #expect(bought.status == .ok, "\(bought.text)")
            let paid = try await plain.reading(api, unattested, asserted: false).decode(ActionResult.self)
            #expect(paid.paidWith == .tokens && paid.tokensCharged == 5 && paid.wallet.balance == 95)

            // Attested: the grant, and free readings with assertions.
            let device = Device(appStore)
            let guest = try Self.user(try await device.signIn(api, attestation: try await device.attestation(api)))
            #expect(try await api.wallet(guest).balance == 100)
            let free = try await device.reading(api, guest).decode(ActionResult.self)
            #expect(free.paidWith == .quota && free.wallet.balance == 100)
            // Without an assertion it pays, as an unattested device does.
            let unasserted = try await device.reading(api, guest, asserted: false).decode(ActionResult.self)
            #expect(unasserted.paidWith == .tokens && unasserted.wallet.balance == 95)

            // Replays: the same assertion on another request, and a counter not above the last one, are refused.
            let key = UUID().uuidString
            let header = try device.assertion("POST", "/v1/actions/reading", nonce: key)
            #expect(try await device.reading(api, guest, key: key, header: header).decode(ActionResult.self).paidWith == .quota)
            let otherKey = try await device.reading(api, guest, key: UUID().uuidString, header: header).decode(ActionResult.self)
            #expect(otherKey.paidWith == .tokens, "an assertion over another request's key pays")
            let backwards = UUID().uuidString
            let old = try device.assertion("POST", "/v1/actions/reading", nonce: backwards, counter: 1)
            #expect(try await device.reading(api, guest, key: backwards, header: old).decode(ActionResult.self).paidWith == .tokens)
            // Another user's key asserts nothing for this one.
            let stranger = try await plain.reading(api, unattested, header: try device.assertion("POST", "/v1/actions/reading", nonce: "k1"))
            #expect(try stranger.decode(ActionResult.self).paidWith == .tokens)
            #expect(try await server.services.store.unattestedSpends(userId: guest.userId)?.count == 3)
            try await api.expectBooksBalance(guest)
        }
    }

    @Test("monitor: nothing is refused, each unattested spend is flagged on the user", arguments: StoreKind.allCases)
    func monitor(kind: StoreKind) async throws {
        try await Self.with(kind, mode: .monitor) { server, appStore, api in
            let device = Device(appStore)
            let guest = try Self.user(try await device.signIn(api, attestation: nil))
            #expect(try await api.wallet(guest).balance == 100)
            for _ in 0..<2 {
                #expect(try await device.reading(api, guest, asserted: false).decode(ActionResult.self).paidWith == .quota)
            }
            let flag = try #require(try await server.services.store.unattestedSpends(userId: guest.userId))
            #expect(flag.count == 2 && flag.lastReason == "missing")
            // A forged header is flagged by its rule, still free.
            let forged = try await device.reading(api, guest, header: "AAAA.AAAA")
            #expect(try forged.decode(ActionResult.self).paidWith == .quota)
            #expect(try await server.services.store.unattestedSpends(userId: guest.userId)?.lastReason == "unknown_key")
            // The console shows the flag on the user's page.
            let op = try #require(try await ConsoleTests.signIn(api, key: server.adminKey).1)
            let page = try await ConsoleTests.get(api, "/console/users/\(guest.userId)", cookie: op.cookie)
            #expect(page.text.contains("unattested spends") && page.text.contains("(unknown_key)") && page.text.contains("no attested key"))
        }
    }

    @Test("An attestation after sign-in, and a guest's merge that needs its device's assertion", arguments: StoreKind.allCases)
    func attestLaterAndMerge(kind: StoreKind) async throws {
        try await Self.with(kind, mode: .enforce) { server, appStore, api in
            let device = Device(appStore)
            let guest = try Self.user(try await device.signIn(api, attestation: nil))
            let attested = try await api.send(.post, "/v1/auth/attestation", token: guest.accessToken, json: try await device.attestation(api))
            #expect(try attested.decode(AttestationStatus.self) == AttestationStatus(keyId: device.keyId, environment: "development"))
            #expect(try await device.reading(api, guest).decode(ActionResult.self).paidWith == .quota)

            // An account with a password; the attested guest merges into it only with its assertion.
            let owner = try await api.newGuest()
            let email = "owner-\(UUID().uuidString.prefix(8))@example.com"
            #expect(try await api.send(.post, "/v1/auth/link", token: owner.accessToken, json: CredentialsRequest(email: email, password: "correct horse")).status == .ok)
            let request = CredentialsRequest(email: email, password: "correct horse", merge: true)
            let unasserted = try await api.send(.post, "/v1/auth/sign-in", token: guest.accessToken, json: request)
            #expect(unasserted.status == .forbidden && unasserted.errorCode == "attestation_required", "\(unasserted.text)")
            let challenge = try await api.send(.post, "/v1/auth/attestation/challenge").decode(AttestationChallenge.self).challenge
            let body = Array(try TallyJSON.encoder().encode(request))
            let header = try device.assertion("POST", "/v1/auth/sign-in", nonce: challenge, challenge: challenge, body: body)
            let merged = try await api.send(.post, "/v1/auth/sign-in", token: guest.accessToken, raw: String(decoding: body, as: UTF8.self), headers: [.tallyAssertion: header])
            #expect(merged.status == .ok, "\(merged.text)")
            #expect(try merged.decode(SessionTokens.self).merged != nil)
        }
    }

    @Test("DeviceCheck: a reinstall on the same device gets no second sign-up grant", arguments: StoreKind.allCases)
    func deviceCheckReinstall(kind: StoreKind) async throws {
        try await Self.with(kind, mode: .off, deviceCheck: .enforce) { server, appStore, api in
            let phone = try appStore.deviceCheck.deviceToken(for: "iphone-1")
            let first = try Self.user(try await Device(appStore).signIn(api, attestation: nil, deviceCheckToken: phone))
            #expect(try await api.wallet(first).balance == 100)
            #expect(appStore.deviceCheck.bits(of: "iphone-1")?.bit0 == true)
            // Deleted and installed again: a new installation secret, a new token of the same device.
            let reinstall = try appStore.deviceCheck.deviceToken(for: "iphone-1")
            #expect(reinstall != phone)
            let second = try Self.user(try await Device(appStore).signIn(api, attestation: nil, deviceCheckToken: reinstall))
            #expect(second.userId != first.userId)
            #expect(try await api.wallet(second).balance == 0)
            // Another device gets its grant; a sign-in without a token, in enforce, does not.
            let other = try Self.user(try await Device(appStore).signIn(api, attestation: nil, deviceCheckToken: try appStore.deviceCheck.deviceToken(for: "ipad-2")))
            #expect(try await api.wallet(other).balance == 100)
            let tokenless = try Self.user(try await Device(appStore).signIn(api, attestation: nil))
            #expect(try await api.wallet(tokenless).balance == 0)
        }
    }

    @Test("enforce: a free daily generation needs an assertion over a challenge; without one it is paid or refused", arguments: StoreKind.allCases)
    func dailyGeneration(kind: StoreKind) async throws {
        let catalog = try Catalog(
            signupGrant: 0, quotas: [QuotaSpec(name: "predictions", daily: 1)],
            actions: [ActionSpec(name: "ai.daily", quota: "predictions", tokens: 5)])
        let spec = DailyGenerationSpec(
            name: "todays_prediction", model: AIGatewayTests.model,
            prompt: try PromptTemplate("A prediction for {{date}}.", params: [], hasProfile: false, place: "test"),
            action: catalog.action(named: "ai.daily")!, quotaLimit: 1, params: [], profileDocument: nil)
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        let appAttest = try AppAttestConfiguration(
            teamId: Self.teamId, bundleId: Self.bundleId, environment: .development, mode: .enforce,
            rootCertificates: [Data(appStore.appAttest.rootCertificateDER)])
        try await DevLLMTests.with { upstream in
            try await LiveServer.with(kind, catalog: catalog, clock: clock, configure: { configuration in
                configuration.appAttest = appAttest
                configuration.ai = AIConfiguration(
                    upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: DevLLMTests.key),
                    models: [AIGatewayTests.model], dailyGenerations: [spec])
            }) { server in
                let api = server.connection()
                let path = "/v1/ai/daily/todays_prediction"
                // Unattested, no tokens: refused before the model is called.
                let plain = try await api.newGuest()
                let refused = try await api.send(.get, path, token: plain.accessToken)
                #expect(refused.status == .forbidden && refused.errorCode == "attestation_required", "\(refused.text)")
                #expect(try await upstream.stats().completions == 0)
                // Attested, with an assertion over a fresh challenge: the free generation.
                let device = Device(appStore)
                let guest = try Self.user(try await device.signIn(api, attestation: try await device.attestation(api)))
                let challenge = try await api.send(.post, "/v1/auth/attestation/challenge").decode(AttestationChallenge.self).challenge
                let header = try device.assertion("GET", path, nonce: challenge, challenge: challenge)
                let made = try await api.send(.get, path, token: guest.accessToken, headers: [.tallyAssertion: header])
                #expect(made.status == .ok, "\(made.text)")
                let quotas: QuotaList = try await api.send(.get, "/v1/quotas", token: guest.accessToken).decode()
                #expect(quotas.items.first { $0.name == "predictions" }?.used == 1)
                #expect(try await api.wallet(guest).balance == 0, "free: nothing charged")
                // The challenge is used: the same header again is no assertion (but the day's generation is served).
                let again = try await api.send(.get, path, token: guest.accessToken, headers: [.tallyAssertion: header])
                #expect(again.status == .ok && again.text == made.text)
                await api.close()
            }
        }
    }
}
