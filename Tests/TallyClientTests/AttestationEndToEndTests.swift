import Foundation
import TallyAPI
import TallyAppAttest
@testable import TallyClient
import TallyDevAppStore
import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// The SDK's App Attest and DeviceCheck against the real server in `enforce`, with the device's services played by the
/// stand-in (its App Attestation CA signs real attestations and assertions; its DeviceCheck keeps the bits the server
/// reads over HTTP): what the SDK signs is what the server verifies, on both stores.
@Suite("Client attestation end to end", .timeLimit(.minutes(2)))
struct AttestationEndToEndTests {
    static let teamId = "TEAM123456"
    static let catalog = try! Catalog(signupGrant: 100, quotas: Catalog.standard.quotas, actions: Catalog.standard.actions)

    /// App Attest on a simulated device: the stand-in's keys, attested for the test app in development.
    struct StandInAppAttest: AppAttestService {
        let appAttest: DevAppAttest
        var isSupported: Bool { true }
        func generateKey() async throws -> String { appAttest.generateKey() }
        func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data {
            Data(try appAttest.attestKey(
                keyId, clientDataHash: Array(clientDataHash), teamId: AttestationEndToEndTests.teamId, bundleId: TestProducts.bundleId,
                environment: .development))
        }
        func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data {
            Data(try appAttest.generateAssertion(keyId, clientDataHash: Array(clientDataHash)))
        }
    }

    /// DeviceCheck on the simulated device `device`: a new token per call, as `DCDevice` makes.
    struct StandInDevice: DeviceTokenProvider {
        let deviceCheck: DevDeviceCheck
        let device: String
        var isSupported: Bool { true }
        func generateToken() async throws -> Data { Data(base64Encoded: try deviceCheck.deviceToken(for: device))! }
    }

    static func with(_ kind: StoreKind, _ body: @Sendable (TallyTestServer, DevAppStore) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let appStore = try TestProducts.appStore(clock: clock)
        try await TestProducts.serving(appStore) { port in
            let appAttest = try AppAttestConfiguration(
                teamId: teamId, bundleId: TestProducts.bundleId, environment: .development, mode: .enforce,
                rootCertificates: [Data(appStore.appAttest.rootCertificateDER)])
            let key = appStore.deviceCheck.key
            let deviceCheck = DeviceCheckConfiguration(
                client: DeviceCheckClient(
                    configuration: .init(keyId: key.keyId, teamId: key.teamId, privateKey: key.privateKey, baseURL: "http://127.0.0.1:\(port)"),
                    now: { clock.now }),
                mode: .enforce, privateKeyEnv: "TALLY_DEVICECHECK_KEY")
            try await TallyTestServer.with(kind, catalog: catalog, configure: {
                $0.appAttest = appAttest
                $0.deviceCheck = deviceCheck
            }) { server in try await body(server, appStore) }
        }
    }

    @Test("An attested install gets its grant and free readings; a reinstall on the same device no second grant", arguments: StoreKind.allCases)
    func attestedInstall(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appStore in
            let services = AttestationConfiguration(
                appAttest: StandInAppAttest(appAttest: appStore.appAttest), deviceCheck: StandInDevice(deviceCheck: appStore.deviceCheck, device: "iphone-1"))
            let (client, _) = server.client { $0.attestation = services }
            _ = try await client.signInAsGuest()
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 100)
            for _ in 0..<3 {
                let reading = try await client.perform("reading")
                #expect(reading.paidWith == .quota && reading.tokensCharged == 0)
            }
            #expect(try await client.perform("reading").paidWith == .tokens)

            // The app deleted and installed again: a new keychain, a new key, the same phone.
            let (reinstalled, _) = server.client { $0.attestation = services }
            _ = try await reinstalled.signInAsGuest()
            #expect(try await reinstalled.fetch(reinstalled.walletQuery, forceRefresh: true).balance == 0)
            #expect(try await reinstalled.perform("reading").paidWith == .quota, "attested: free uses of its own")
        }
    }

    @Test("Without App Attest (the simulator, an old device) the app can still pay, but gets nothing free", arguments: StoreKind.allCases)
    func unattestedInstall(kind: StoreKind) async throws {
        try await Self.with(kind) { server, _ in
            let (client, _) = server.client { $0.attestation = nil }
            let user = try await client.signInAsGuest()
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 0)
            await #expect(throws: ClientError.self) { try await client.perform("reading") }
            do {
                _ = try await client.perform("reading")
            } catch let error as ClientError {
                #expect(error.serverCode == .attestationRequired, "\(error)")
            }
            try await server.grant(10, to: user.userId)
            #expect(try await client.perform("reading").paidWith == .tokens)
        }
    }
}
