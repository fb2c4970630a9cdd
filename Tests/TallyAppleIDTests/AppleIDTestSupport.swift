import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAppleID
import TallyAppleJWS
import TallyDevAppStore
import TallyTestKit

/// Counts the fetches a real HTTP fetcher makes; fails them while ``failing`` is set.
final class CountingFetcher: AppleKeyFetching {
    private let fetcher: AppleKeyFetcher
    private let state = Mutex((count: 0, failing: false))

    /// A fetcher of `url`; AsyncHTTPClient keeps trying a refused connection until the deadline, so tests of an
    /// unreachable one pass a short `timeout`.
    init(url: String, timeout: TimeAmount = .seconds(5)) { fetcher = AppleKeyFetcher(url: url, timeout: timeout) }

    var count: Int { state.withLock { $0.count } }

    var failing: Bool {
        get { state.withLock { $0.failing } }
        set { state.withLock { $0.failing = newValue } }
    }

    func fetchKeys() async throws -> AppleJSONWebKeySet {
        let failing = state.withLock { state in
            state.count += 1
            return state.failing
        }
        if failing { throw AppleKeyFetchError("failing on purpose") }
        return try await fetcher.fetchKeys()
    }
}

/// The stand-in (App Store and Sign in with Apple) served on 127.0.0.1 at a free port, on a test clock, and a verifier
/// whose keys come from it over HTTP.
struct AppleIDFixture {
    static let clientId = "com.example.oracle"
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    /// One key set per test process: RSA-2048 generation is slow in a debug build, and each stand-in rotates its own copy.
    static let initialKeys: DevAppleIDKeys = {
        do { return try DevAppleIDKeys.generate() } catch { fatalError("RSA key generation failed: \(error)") }
    }()

    let clock: ManualClock
    let appleID: DevAppleID
    let base: String
    let fetcher: CountingFetcher
    let keys: AppleKeyCache
    let verifier: AppleIdentityVerifier

    var now: Date { clock.now }

    /// Runs `body` with a stand-in configured by `configure`, served for its duration.
    static func with<T: Sendable>(
        configure: (inout DevAppleID.Configuration) -> Void = { _ in }, minimumRefetchInterval: TimeInterval = 10,
        _ body: (AppleIDFixture) async throws -> T
    ) async throws -> T {
        let clock = ManualClock(start)
        var configuration = DevAppleID.Configuration()
        configuration.clientId = clientId
        configure(&configuration)
        let appleID = DevAppleID(configuration: configuration, keys: initialKeys, clock: clock)
        let store = DevAppStore(authority: try DevCertificateAuthority.generate(now: start), clock: clock)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildDevAppStoreApplication(store: store, appleID: appleID, port: 0, logger: quietLogger) { port in continuation.yield(port) }
        return try await serving(app, ports: ports) { port in
            let base = "http://127.0.0.1:\(port)"
            let fetcher = CountingFetcher(url: base + "/auth/keys")
            let keys = AppleKeyCache(fetcher: fetcher, minimumRefetchInterval: minimumRefetchInterval, logger: quietLogger)
            let verifier = try AppleIdentityVerifier(audiences: [clientId], keys: keys)
            return try await body(
                AppleIDFixture(clock: clock, appleID: appleID, base: base, fetcher: fetcher, keys: keys, verifier: verifier))
        }
    }

    /// Verifies `token` at the clock's now (or `at`) with the raw `nonce`.
    func verify(_ token: String, nonce: String?, at: Date? = nil) async throws(AppleIDVerificationError) -> AppleIdentity {
        try await verifier.verify(identityToken: token, rawNonce: nonce, now: at ?? now)
    }
}

/// Servers in tests log at critical: a cancelled Hummingbird server logs its channels' cancellation as errors.
let quietLogger: Logger = {
    var logger = Logger(label: "appleid-tests")
    logger.logLevel = .critical
    return logger
}()

/// Runs `app` (which yields its port to `ports`) while `body` runs, then cancels it.
func serving<T: Sendable>(_ app: some ApplicationProtocol, ports: AsyncStream<Int>, _ body: (Int) async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService(gracefulShutdownSignals: []) }
        defer { group.cancelAll() }
        for await port in ports { return try await body(port) }
        throw CancellationError()
    }
}

/// What a verification ended in, for `#expect(... == ...)`.
enum Outcome: Equatable, CustomStringConvertible {
    case accepted
    case refused(AppleIDVerificationError.Code)
    case otherError(String)

    static func of(_ body: () async throws -> Void) async -> Outcome {
        do {
            try await body()
            return .accepted
        } catch let error as AppleIDVerificationError {
            return .refused(error.code)
        } catch {
            return .otherError("\(error)")
        }
    }

    var description: String {
        switch self {
        case .accepted: "accepted"
        case .refused(let code): code.rawValue
        case .otherError(let error): "not a verification error: \(error)"
        }
    }
}

/// A webhook on loopback that records the bodies it gets and answers 200.
final class WebhookRecorder: Sendable {
    private let received = Mutex<[[UInt8]]>([])

    /// The `payload` of each body received, in order.
    var payloads: [String] {
        received.withLock { $0 }.compactMap { try? JSONDecoder().decode([String: String].self, from: Data($0))["payload"] }
    }

    /// Runs a recorder at `http://127.0.0.1:<port>/apple-id` while `body` runs.
    static func with<T: Sendable>(_ body: (WebhookRecorder, String) async throws -> T) async throws -> T {
        let recorder = WebhookRecorder()
        let router = Router()
        router.post("apple-id") { request, _ -> HTTPResponse.Status in
            let bytes = Array(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            recorder.received.withLock { $0.append(bytes) }
            return .ok
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: quietLogger)
        return try await serving(app, ports: ports) { port in try await body(recorder, "http://127.0.0.1:\(port)/apple-id") }
    }
}

/// One request to the stand-in: the status and the body.
func call(_ method: HTTPMethod, _ url: String, json: String? = nil, form: String? = nil) async throws -> (status: Int, body: Data) {
    var request = HTTPClientRequest(url: url)
    request.method = method
    if let json {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: json))
    } else if let form {
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: form))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 1 << 22)
    return (Int(response.status.code), Data(body.readableBytesView))
}

/// The JSON object of `data`.
func object(_ data: Data) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
}

/// The decoded JSON of a JWT's part `index` (0 header, 1 payload), unverified.
func jwtPart(_ token: String, _ index: Int) throws -> [String: Any] {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let data = Base64URL.decode(parts[index]) else { return [:] }
    return try object(data)
}

/// `token` with its header replaced by `header` (the payload and signature kept).
func withHeader(_ token: String, _ header: String) -> String {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    return Base64URL.encode(Data(header.utf8)) + "." + parts[1] + "." + parts[2]
}
