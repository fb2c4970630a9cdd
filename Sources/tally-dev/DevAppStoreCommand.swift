import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TallyAppStore
import TallyDevAppStore
import UnixSignals

/// `tally-dev dev-appstore`: a local App Store for development and tests (``DevAppStore``, served by
/// ``buildDevAppStoreApplication(store:host:port:logger:onServerRunning:)``): signs purchases like StoreKit 2 and
/// sends signed notifications to the server's webhook, retrying on a compressed copy of Apple's schedule.
struct DevAppStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-appstore",
        abstract: "Run a local App Store that signs transactions and sends App Store Server Notifications V2 (development and tests).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks a free one).") var port = 8092
    @Option(help: "Directory of the test certificate authority (created with a new root on first use; the server trusts <DIR>/root.der).")
    var certs = "tally-dev-appstore"
    @Option(name: .customLong("bundle-id"), help: "Bundle id the payloads name.") var bundleId = "com.example.oracle"
    @Option(name: .customLong("app-apple-id"), help: "App Apple id written into notifications.") var appAppleId: Int64?
    @Option(help: "Where notifications are posted (the server's POST /v1/webhooks/appstore).") var webhook: String?
    @Option(help: "Environment the payloads name: Sandbox or Production.") var environment = "Sandbox"
    @Option(
        name: .customLong("subscription"),
        help: "A product id that is an auto-renewable subscription (repeatable; other products are consumables unless a purchase says its type).")
    var subscriptions: [String] = []
    @Option(name: .customLong("hour-seconds"), help: "Seconds that stand for one hour of Apple's retry schedule (1, 12, 24, 48, 72 h).")
    var hourSeconds: Double = 1
    @Option(name: .customLong("subscription-period-seconds"), help: "Length of a subscription period.") var subscriptionPeriod: Double = 30 * 24 * 3600
    @Option(
        name: .customLong("apple-client-id"),
        help: "Sign in with Apple: the client id identity tokens are issued for and /auth/token accepts (default: --bundle-id).")
    var appleClientId: String?
    @Option(name: .customLong("apple-team-id"), help: "Sign in with Apple: the team id a client secret must name as iss (default: any).")
    var appleTeamId: String?
    @Option(name: .customLong("apple-key-id"), help: "Sign in with Apple: the key id a client secret must name as kid (default: any).")
    var appleKeyId: String?
    @Option(
        name: .customLong("apple-client-key"),
        help: "PEM file of the app's Sign in with Apple key (its public key, or the .p8): client secrets are verified with it (else recorded as unverified).")
    var appleClientKey: String?
    @Option(
        name: .customLong("apple-id-webhook"), help: "Where Sign in with Apple account notifications are posted (the server's POST /v1/webhooks/apple-id).")
    var appleIDWebhook: String?
    @Option(
        name: .customLong("server-api-key-file"),
        help: "App Store Server API: PEM file (PKCS#8 .p8) of the P-256 In-App Purchase key requests must be signed with (default: a new key each start; GET /server-api-key answers it).")
    var serverAPIKeyFile: String?

    func validate() throws {
        guard AppStoreEnvironment(rawValue: environment) != nil else { throw ValidationError("--environment is Sandbox or Production") }
        guard hourSeconds > 0, subscriptionPeriod > 0 else { throw ValidationError("--hour-seconds and --subscription-period-seconds must be positive") }
        for (option, url) in [("--webhook", webhook), ("--apple-id-webhook", appleIDWebhook)] {
            if let url, URL(string: url)?.scheme.map({ ["http", "https"].contains($0) }) != true {
                throw ValidationError("\(option) must be an http(s) URL")
            }
        }
    }

    func run() async throws {
        var configuration = DevAppStore.Configuration()
        configuration.bundleId = bundleId
        configuration.appAppleId = appAppleId
        configuration.environment = AppStoreEnvironment(rawValue: environment) ?? .sandbox
        configuration.webhook = webhook
        configuration.hour = hourSeconds
        configuration.subscriptionPeriod = subscriptionPeriod
        for product in subscriptions { configuration.productTypes[product] = .autoRenewableSubscription }
        if let serverAPIKeyFile { configuration.serverAPIKey = try DevServerAPIKey.load(file: serverAPIKeyFile) }
        let directory = URL(fileURLWithPath: certs, isDirectory: true).standardizedFileURL
        let authority = try DevCertificateAuthority.loadOrGenerate(directory: directory, now: Date())
        var logger = Logger(label: "tally.dev-appstore")
        logger.logLevel = .warning
        let store = DevAppStore(configuration: configuration, authority: authority, logger: logger)
        let appleID = try makeAppleID(directory: directory, logger: logger)
        let host = host
        let rootPath = directory.appendingPathComponent(DevCertificateAuthority.File.root).path
        let app = buildDevAppStoreApplication(store: store, appleID: appleID, host: host, port: port, logger: logger) { port in
            FileHandle.standardOutput.write(
                Data(
                    """
                    tally dev-appstore listening on http://\(host):\(port) (POST /purchase, GET /deliveries)
                    root certificate: \(rootPath) (the server's appStore.rootCertificates)
                    bundle id: \(store.configuration.bundleId), environment: \(store.configuration.environment.rawValue)
                    webhook: \(store.configuration.webhook ?? "none (notifications are signed, not sent)")
                    App Store Server API: /inApps/, key id \(store.serverAPIKey.keyId), issuer id \(store.serverAPIKey.issuerId) (GET /server-api-key)
                    Sign in with Apple: client id \(appleID.configuration.clientId), keys \(appleID.configuration.keysDirectory?.path ?? "-")/\(DevAppleIDKeys.File.keys) (GET /auth/keys), client secrets \(appleID.configuration.clientPublicKey == nil ? "unverified (no --apple-client-key)" : "verified"), account notifications to \(appleID.webhook ?? "none")

                    """.utf8))
        }
        try await ServiceGroup(
            configuration: .init(services: [app, DeliveryService(store: store)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        ).run()
    }
}

extension DevAppStoreCommand {
    /// Sign in with Apple's stand-in: its keys kept in the --certs directory, its client as the options say.
    func makeAppleID(directory: URL, logger: Logger) throws -> DevAppleID {
        var configuration = DevAppleID.Configuration()
        configuration.clientId = appleClientId ?? bundleId
        configuration.teamId = appleTeamId
        configuration.keyId = appleKeyId
        configuration.webhook = appleIDWebhook
        configuration.keysDirectory = directory
        if let appleClientKey {
            configuration.clientPublicKey = try DevAppleID.clientPublicKey(pem: try String(contentsOfFile: appleClientKey, encoding: .utf8))
        }
        return DevAppleID(configuration: configuration, keys: try DevAppleIDKeys.loadOrGenerate(directory: directory), logger: logger)
    }
}

/// The stand-in's deliveries as a service beside its HTTP server.
private struct DeliveryService: Service {
    let store: DevAppStore

    func run() async throws {
        try await cancelWhenGracefulShutdown { await store.run() }
    }
}
