import Foundation
import Hummingbird
import Logging
import TallyDevAppStore
import TallyStore
import TallyTestKit

/// The products the purchase tests sell: 100 tokens, and a monthly premium plan.
public enum TestProducts {
    /// The bundle id of the app the stand-in signs for.
    public static let bundleId = "com.example.oracle"
    /// A consumable: 100 tokens.
    public static let tokens100 = "com.example.tokens.100"
    /// An auto-renewable subscription: premium.
    public static let premiumMonthly = "com.example.premium.monthly"

    /// A local App Store on `clock` signing with a CA of its own, for the Sandbox, that knows the products' types.
    public static func appStore(clock: ManualClock, configure: (inout DevAppStore.Configuration) -> Void = { _ in }) throws -> DevAppStore {
        var configuration = DevAppStore.Configuration()
        configuration.bundleId = bundleId
        configuration.environment = .sandbox
        configuration.productTypes = [premiumMonthly: .autoRenewableSubscription]
        configure(&configuration)
        return DevAppStore(configuration: configuration, authority: try DevCertificateAuthority.generate(now: clock.now), clock: clock)
    }

    /// Runs `body` with `appStore`'s root written to a scratch file (removed afterwards) and the `appStore:` section of
    /// a server's YAML configuration trusting it for `products` (YAML flow mappings; the default: 100 tokens and the
    /// premium plan), for tests that start `tally serve` processes. The stand-in signs in Sandbox, whose credits the
    /// section leaves unbounded: these tests buy more than `appStore.sandbox`'s default allows an account.
    public static func withRootFile<T>(
        _ appStore: DevAppStore,
        products: [String] = ["{productId: \(tokens100), tokens: 100}", "{productId: \(premiumMonthly), premium: true}"],
        _ body: (_ appStoreYAML: String) async throws -> T
    ) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-appstore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("root.der")
        try Data(appStore.authority.rootDER).write(to: root)
        let yaml = """
            appStore:
              bundleId: \(bundleId)
              appAppleId: 1234567890
              environments: [Sandbox]
              sandbox: {tokensPerAccount: 1000000000}
              rootCertificates: [\(root.path)]
              products:
            """ + products.map { "\n    - \($0)" }.joined()
        return try await body(yaml)
    }

    /// Runs `body` with `appStore`'s HTTP API (`tally-dev dev-appstore`'s routes, its App Store Server API included) served on
    /// a free loopback port, the port handed to `body`; stops serving when `body` returns.
    public static func serving<T: Sendable>(_ appStore: DevAppStore, _ body: (_ port: Int) async throws -> T) async throws -> T {
        var logger = Logger(label: "dev-appstore-in-test")
        logger.logLevel = .critical  // a cancelled Hummingbird server logs its channels' cancellation as errors
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildDevAppStoreApplication(store: appStore, port: 0, logger: logger) { continuation.yield($0) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(port)
        }
    }
}
