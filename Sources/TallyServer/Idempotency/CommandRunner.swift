import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import Synchronization
import TallyAPI
import TallyStore

/// Runs a store command for an HTTP handler with Stripe-style `Idempotency-Key` semantics:
/// the same key and request replay the first response; the same key with another request is 422;
/// a duplicate arriving while the first is in flight is 409. Refusals (4xx) store nothing, so they
/// can be retried once the cause is fixed.
struct CommandRunner: Sendable {
    let store: any TallyStorage
    let clock: any TallyClock
    let inFlight: InFlightKeys
    let counters: LedgerCounters
    /// Told of every command that changed an account (its wallet or quotas): the event streams' `wallet`.
    let notifier: any ChangeNotifier

    init(
        store: any TallyStorage, clock: any TallyClock, inFlight: InFlightKeys, metrics: any MetricsFactory,
        notifier: any ChangeNotifier
    ) {
        (self.store, self.clock, self.inFlight, self.notifier) = (store, clock, inFlight, notifier)
        self.counters = LedgerCounters(factory: metrics)
    }

    /// Whether the endpoint insists on a key.
    enum KeyPolicy { case optional, required }

    /// Runs `command` and renders its outcome as the response body with `status`.
    /// - Parameters:
    ///   - scope: whose keys: the user id, or `admin`.
    ///   - requestFingerprint: a canonical form of the request (method, path, decoded body).
    func run<Body: Encodable & Sendable>(
        _ command: Command, request: Request, scope: String, requestFingerprint: @autoclosure () -> String, keyPolicy: KeyPolicy = .optional,
        status: HTTPResponse.Status = .ok, render: @escaping @Sendable (CommandOutcome) throws -> Body
    ) async throws -> Response {
        let execution = try await withIdempotency(
            request: request, scope: scope, requestFingerprint: requestFingerprint(), keyPolicy: keyPolicy
        ) { idempotency in
            do {
                return try await store.execute(command, idempotency: idempotency, now: clock.now) { outcome in
                    StoredResponse(status: Int(status.code), body: try JSONResponse.bytes(render(outcome)))
                }
            } catch let error as StoreError {
                count(command, result: "refused_\(error.code)")
                throw error
            }
        }
        count(command, result: execution.isReplay ? "replayed" : "executed")
        if !execution.isReplay { notifier.walletChanged(userId: command.userId) }
        return Self.response(execution)
    }

    /// Runs `work` under the request's `Idempotency-Key`, if any: the key validated, bound to `scope` and
    /// the request's fingerprint, and claimed in this process while `work` runs (409 on a concurrent
    /// duplicate). `work` hands the key to the store, which replays the stored response or stores its own.
    func withIdempotency<T>(
        request: Request, scope: String, requestFingerprint: @autoclosure () -> String, keyPolicy: KeyPolicy = .optional,
        _ work: (IdempotencyKey?) async throws -> T
    ) async throws -> T {
        let key = try Self.idempotencyKey(request, policy: keyPolicy)
        let idempotency = key.map {
            IdempotencyKey(scope: scope, key: $0, fingerprint: Secrets.sha256(requestFingerprint()))
        }
        let claim = idempotency.map { "\($0.scope)\u{0}\($0.key)" }
        if let claim, !inFlight.claim(claim) {
            throw StoreError(.idempotencyKeyInUse)
        }
        defer { if let claim { inFlight.release(claim) } }
        return try await work(idempotency)
    }

    /// The response of an execution: its stored status and body (none on 204), `Idempotent-Replayed: true`
    /// on a replay.
    static func response(_ execution: Execution) -> Response {
        var headers: HTTPFields = [:]
        if case .replayed = execution { headers[.idempotentReplayed] = "true" }
        let stored = execution.response
        if stored.status == 204 { return Response(status: .noContent, headers: headers) }
        return JSONResponse.make(status: HTTPResponse.Status(code: stored.status), bytes: stored.body, headers: headers)
    }

    /// Counts ledger operations by command and result (`executed`, `replayed`, `refused_<code>`).
    private func count(_ command: Command, result: String) {
        counters.counter(operation: command.name, result: result).increment()
    }

    /// The request's key: 1–255 printable ASCII characters.
    static func idempotencyKey(_ request: Request, policy: KeyPolicy) throws -> String? {
        guard let key = request.headers[.idempotencyKey] else {
            if policy == .required {
                throw APIError(.idempotencyKeyRequired, "This endpoint requires an Idempotency-Key header (one per user intent).")
            }
            return nil
        }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw APIError(.invalidField, "Idempotency-Key must be 1 to 255 printable ASCII characters.")
        }
        return key
    }

    /// A canonical description of a request: method, path and the decoded body re-encoded with sorted keys,
    /// so the same request with other whitespace or key order is still the same request.
    static func fingerprint(_ request: Request, body: (some Encodable)?) -> String {
        let encoded = body.flatMap { try? JSONResponse.encoder.encode($0) }.map { String(decoding: $0, as: UTF8.self) } ?? ""
        return fingerprint(request, canonicalBody: encoded)
    }

    /// The fingerprint of a request whose body is already in a canonical form.
    static func fingerprint(_ request: Request, canonicalBody: String) -> String {
        "\(request.method.rawValue) \(request.uri.path)\n\(canonicalBody)"
    }
}

/// `tally_ledger_operations_total` by operation and result, each counter made once (making one per
/// request goes through the metrics factory's registry).
final class LedgerCounters: Sendable {
    private let factory: any MetricsFactory
    private let counters = Mutex<[String: Counter]>([:])

    init(factory: any MetricsFactory) { self.factory = factory }

    func counter(operation: String, result: String) -> Counter {
        counters.withLock { counters in
            let key = operation + "\u{0}" + result
            if let existing = counters[key] { return existing }
            let made = Counter(
                label: "tally_ledger_operations_total", dimensions: [("operation", operation), ("result", result)], factory: factory)
            counters[key] = made
            return made
        }
    }
}

/// Keys being processed by this process, so a concurrent duplicate gets 409 at once. Across processes
/// the PostgreSQL store adds an advisory lock per key.
final class InFlightKeys: Sendable {
    private let keys = Mutex(Set<String>())

    /// Claims `key`; `false` if it is already claimed.
    func claim(_ key: String) -> Bool { keys.withLock { $0.insert(key).inserted } }

    /// Releases a claimed key.
    func release(_ key: String) { _ = keys.withLock { $0.remove(key) } }
}

extension Execution {
    var isReplay: Bool {
        if case .replayed = self { return true }
        return false
    }
}

extension Command {
    /// The operation's name in metrics.
    var name: String {
        switch self {
        case .grant: "grant"
        case .createHold: "hold"
        case .captureHold: "capture"
        case .releaseHold: "release"
        case .performAction: "action"
        case .setPremium: "premium"
        case .updateProfile: "profile"
        }
    }
}
