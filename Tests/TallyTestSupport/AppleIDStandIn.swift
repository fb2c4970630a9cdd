import Foundation
import Hummingbird
import Logging
import TallyDevAppStore
import TallyStore
import TallyTestKit

/// The local Sign in with Apple stand-in (`tally-dev dev-appstore`'s), served on 127.0.0.1 at a free port on a test's
/// clock, so a server under test fetches its keys over real HTTP and verifies the tokens it mints.
public enum AppleIDStandIn {
    /// One key set per test process: RSA-2048 generation is slow in a debug build.
    public static let keys: DevAppleIDKeys = {
        do { return try DevAppleIDKeys.generate() } catch { fatalError("RSA key generation failed: \(error)") }
    }()

    /// Runs `body` with a stand-in minting tokens for `clientId` on `clock` (its configuration changed by `configure`),
    /// and the URL of its key set (its other endpoints beside it), while it is served.
    public static func serving<T: Sendable>(
        clientId: String, clock: ManualClock, configure: (inout DevAppleID.Configuration) -> Void = { _ in },
        _ body: (DevAppleID, _ keysURL: String) async throws -> T
    ) async throws -> T {
        var configuration = DevAppleID.Configuration()
        configuration.clientId = clientId
        configure(&configuration)
        let appleID = DevAppleID(configuration: configuration, keys: keys, clock: clock)
        let store = DevAppStore(authority: try DevCertificateAuthority.generate(now: clock.now), clock: clock)
        var logger = Logger(label: "apple-id-stand-in")
        logger.logLevel = .critical  // a cancelled Hummingbird server logs its channels' cancellation as errors
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildDevAppStoreApplication(store: store, appleID: appleID, port: 0, logger: logger) { continuation.yield($0) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(appleID, "http://127.0.0.1:\(port)/auth/keys")
        }
    }
}
