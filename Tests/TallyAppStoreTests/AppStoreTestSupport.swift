import AsyncHTTPClient
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

/// A stand-in with its own CA on a manual clock, and a verifier that trusts that CA's root only.
struct AppStoreFixture {
    static let bundleId = "com.example.oracle"
    static let appAppleId: Int64 = 1_234_567_890

    let clock: ManualClock
    let authority: DevCertificateAuthority
    let store: DevAppStore
    let verifier: AppStoreVerifier

    /// The clock at `start` (2027-01-15 by default), the stand-in signing for `environment`.
    init(
        start: Date = Date(timeIntervalSince1970: 1_800_000_000), environment: AppStoreEnvironment = .sandbox,
        storeAppAppleId: Int64? = AppStoreFixture.appAppleId, webhook: String? = nil,
        configure: (inout DevAppStore.Configuration) -> Void = { _ in }
    ) throws {
        clock = ManualClock(start)
        authority = try DevCertificateAuthority.generate(now: clock.now)
        var configuration = DevAppStore.Configuration()
        configuration.bundleId = Self.bundleId
        configuration.appAppleId = storeAppAppleId
        configuration.environment = environment
        configuration.webhook = webhook
        configuration.productTypes = ["com.example.premium.monthly": .autoRenewableSubscription]
        configure(&configuration)
        store = DevAppStore(configuration: configuration, authority: authority, clock: clock)
        verifier = try AppStoreVerifier(
            rootCertificates: [authority.rootDER], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environments: [.production, .sandbox])
    }

    /// A verifier of the same root with other settings.
    func verifier(
        bundleId: String = AppStoreFixture.bundleId, appAppleId: Int64? = AppStoreFixture.appAppleId,
        environments: Set<AppStoreEnvironment> = [.production, .sandbox]
    ) throws -> AppStoreVerifier {
        try AppStoreVerifier(rootCertificates: [authority.rootDER], bundleId: bundleId, appAppleId: appAppleId, environments: environments)
    }
}

/// What a verification ended in, for `#expect(... == ...)`.
enum Outcome: Equatable, CustomStringConvertible {
    case accepted
    case refused(AppStoreVerificationError.Code, AppStoreVerificationError.ChainReason?)
    /// Anything but a verification error (a test's own setup failing): never what a test expects.
    case otherError(String)

    static func of(_ body: () async throws -> Void) async -> Outcome {
        do {
            try await body()
            return .accepted
        } catch let error as AppStoreVerificationError {
            return .refused(error.code, error.reason)
        } catch {
            return .otherError("\(error)")
        }
    }

    var description: String {
        switch self {
        case .accepted: "accepted"
        case .refused(let code, let reason?): "\(code.rawValue) (\(reason.rawValue))"
        case .refused(let code, nil): code.rawValue
        case .otherError(let error): "not a verification error: \(error)"
        }
    }
}

/// A webhook on loopback for the stand-in's deliveries: records every body, answers each request with the next status
/// of its script (then 200).
final class WebhookReceiver: Sendable {
    private struct State {
        var script: [Int]
        var bodies: [[UInt8]] = []
    }

    private final class Recorder: Sendable {
        let state: Mutex<State>
        init(script: [Int]) { state = Mutex(State(script: script)) }
    }

    private let recorder: Recorder
    /// Its port.
    let port: Int

    private init(port: Int, recorder: Recorder) {
        self.port = port
        self.recorder = recorder
    }

    /// The webhook's URL.
    var url: String { "http://127.0.0.1:\(port)/appstore" }
    /// The bodies received, in order.
    var bodies: [[UInt8]] { recorder.state.withLock { $0.bodies } }
    /// The `signedPayload` of each body received, in order.
    var signedPayloads: [String] {
        bodies.compactMap { body in
            (try? JSONDecoder().decode([String: String].self, from: Data(body)))?["signedPayload"]
        }
    }

    /// Runs a receiver answering `script` (then 200) for the duration of `body`.
    static func with<T: Sendable>(answering script: [Int] = [], _ body: (WebhookReceiver) async throws -> T) async throws -> T {
        let recorder = Recorder(script: script)
        let router = Router()
        router.post("appstore") { request, _ -> Response in
            let bytes = Array(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            let status = recorder.state.withLock { state -> Int in
                state.bodies.append(bytes)
                return state.script.isEmpty ? 200 : state.script.removeFirst()
            }
            return Response(status: HTTPResponse.Status(code: status))
        }
        return try await serve(router) { port in try await body(WebhookReceiver(port: port, recorder: recorder)) }
    }
}

/// Runs `router` on 127.0.0.1 (a free port) for the duration of `body`.
func serve<T: Sendable>(_ router: Router<BasicRequestContext>, _ body: (Int) async throws -> T) async throws -> T {
    var logger = Logger(label: "appstore-tests")
    // Cancelling a Hummingbird server logs its channels' cancellation as errors: nothing a test needs to see.
    logger.logLevel = .critical
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
    return try await serve(app, ports: ports, body)
}

/// Runs `app` (which yields its port to `ports`) for the duration of `body`, then stops it.
func serve<T: Sendable>(
    _ app: some ApplicationProtocol, ports: AsyncStream<Int>, _ body: (Int) async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        defer { group.cancelAll() }
        return try await body(port)
    }
}

/// Runs the stand-in's deliveries for the duration of `body`.
func delivering<T: Sendable>(_ store: DevAppStore, _ body: () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await store.run() }
        defer { group.cancelAll() }
        return try await body()
    }
}

/// One JSON request to the stand-in's HTTP API: the status and the decoded answer.
func call(_ method: HTTPMethod, _ url: String, _ json: String? = nil) async throws -> (status: Int, body: [String: Any]) {
    var request = HTTPClientRequest(url: url)
    request.method = method
    if let json {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: json))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
    let bytes = try await response.body.collect(upTo: 1 << 22)
    let object = try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any] ?? [:]
    return (Int(response.status.code), object)
}
