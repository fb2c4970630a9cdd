import Foundation
import TallyAPI

/// Sends one logical request: adds the session's bearer token, enforces the timeout, retries what is
/// safe with jittered backoff on the injected clock, refreshes the session once on 401, records
/// metrics, and turns failures into ``ClientError``. Every response's status is handed to `onResponse` (the
/// client's sign that the server answers, which ends sync's wait after an outage).
final class RequestExecutor: Sendable {
    let transport: any HTTPTransport
    let clock: any TallyClock
    let retry: RetryPolicy
    let timeouts: Timeouts
    let metrics: ClientMetrics
    let random: @Sendable () -> Double
    let onResponse: @Sendable (_ status: Int) -> Void
    /// Adds App Attest's assertion to each attempt of a request that spends free value (``Attestor``); nil for none.
    let signer: (any RequestSigner)?

    init(
        transport: any HTTPTransport, clock: any TallyClock, retry: RetryPolicy, timeouts: Timeouts, metrics: ClientMetrics,
        random: @escaping @Sendable () -> Double, signer: (any RequestSigner)? = nil,
        onResponse: @escaping @Sendable (_ status: Int) -> Void = { _ in }
    ) {
        self.signer = signer
        self.transport = transport
        self.clock = clock
        self.retry = retry
        self.timeouts = timeouts
        self.metrics = metrics
        self.random = random
        self.onResponse = onResponse
    }

    /// Sends `endpoint`; `auth` supplies and refreshes the access token for authenticated endpoints; `retry`
    /// replaces the client's policy (`.none`: one attempt, for callers that pace their own retries).
    /// Returns 2xx and 304 responses; everything else throws.
    func send(
        _ endpoint: Endpoint, body: Data? = nil, headers: [String: String] = [:], auth: (any AccessTokenProvider)?,
        retry: RetryPolicy? = nil
    ) async throws -> TransportResponse {
        let retry = retry ?? self.retry
        let safe = RetryPolicy.isSafeToRetry(method: endpoint.method, hasIdempotencyKey: headers[TallyHeader.idempotencyKey] != nil)
        var attempt = 0
        var refreshed = false
        while true {
            attempt += 1
            try Task.checkCancellation()
            var request = TransportRequest(
                method: endpoint.method, path: endpoint.path, headers: headers, body: body, timeout: endpoint.timeout(timeouts))
            if body != nil { request.headers["Content-Type"] = "application/json" }
            var token: String?
            if endpoint.authenticated {
                guard let auth else { throw ClientError(.unauthorized) }
                token = try await auth.accessToken()
                request.headers["Authorization"] = "Bearer \(token!)"
            }
            var started = DispatchTime.now().uptimeNanoseconds
            let failure: AttemptFailure
            let mapped: ClientError
            do {
                let response = try await signed(request) { request in
                    started = DispatchTime.now().uptimeNanoseconds
                    return try await transport.send(request)
                }
                metrics.recordRequest(operation: endpoint.operation, status: response.status, duration: Self.seconds(since: started))
                onResponse(response.status)
                if (200..<300).contains(response.status) || response.status == 304 { return response }
                if response.status == 401, endpoint.authenticated, !refreshed, let auth, let token {
                    refreshed = true
                    try await auth.refresh(after: token)
                    attempt -= 1
                    continue
                }
                let detail = try? TallyJSON.decoder().decode(ErrorResponse.self, from: response.body)
                let retryAfter = response.header("Retry-After").flatMap(TimeInterval.init)
                failure = .status(response.status, code: detail?.error.code.rawValue, retryAfter: retryAfter)
                mapped = Self.error(status: response.status, detail: detail, retryAfter: retryAfter)
            } catch let error as TransportError {
                metrics.recordRequest(operation: endpoint.operation, status: nil, duration: Self.seconds(since: started))
                // A transport may report its cancelled request as a lost connection: the caller left, it is not offline.
                try Task.checkCancellation()
                failure = .transport(error)
                mapped = ClientError(error == .timedOut ? .timedOut : .offline)
            }
            guard let delay = retry.delay(afterAttempt: attempt, failure: failure, safeToRetry: safe, unitRandom: random()) else {
                throw mapped
            }
            metrics.recordRetry(operation: endpoint.operation)
            try await clock.sleep(for: delay)
        }
    }

    /// `send(request)`, through the signer when there is one: it adds App Attest's assertion, and makes an asserted
    /// attempt wait until the previous one got its answer (``Attestor/withSigned(_:_:)``).
    private func signed<T>(_ request: TransportRequest, _ send: (TransportRequest) async throws -> T) async throws -> T {
        guard let signer else { return try await send(request) }
        return try await signer.withSigned(request, send)
    }

    /// Seconds of monotonic time since `start` (`DispatchTime` nanoseconds: `ContinuousClock` needs iOS 16).
    static func seconds(since start: UInt64) -> TimeInterval {
        Double(DispatchTime.now().uptimeNanoseconds &- start) / 1e9
    }

    /// The typed error for an HTTP error status and the server's error body.
    static func error(status: Int, detail: ErrorResponse?, retryAfter: TimeInterval?) -> ClientError {
        let serverCode = detail?.error.code ?? ErrorCode(rawValue: "http_\(status)")
        let code: ClientError.Code =
            switch (status, serverCode) {
            case (402, .quotaExhausted): .quotaExhausted
            case (402, _): .insufficientTokens
            case (401, .invalidCredentials): .invalidCredentials
            case (401, _): .unauthorized
            case (429, _): .rateLimited
            case (409, .accountExists): .accountExists
            default: .server
            }
        return ClientError(
            code, status: status, serverCode: serverCode, message: detail?.error.message ?? "HTTP \(status)",
            wallet: detail?.wallet, quotas: detail?.quotas ?? [], retryAfter: retryAfter, guest: detail?.guest)
    }
}

/// Supplies access tokens and refreshes them; the session implements it.
protocol AccessTokenProvider: Sendable {
    /// A token valid now (refreshed first if it is about to expire).
    func accessToken() async throws -> String
    /// Called when `token` was refused with 401: refreshes once for all callers holding that token.
    func refresh(after token: String) async throws
}

/// Decodes a server answer; a body that does not match is ``ClientError/Code/invalidResponse``.
func decodeAnswer<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
    do { return try TallyJSON.decoder().decode(type, from: data) } catch {
        throw ClientError(.invalidResponse, message: "\(T.self) could not be decoded")
    }
}
