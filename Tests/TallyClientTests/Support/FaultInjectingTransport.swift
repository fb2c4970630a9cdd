import Foundation
import Synchronization
import TallyAPI
import TallyClient
import TallyTestKit
import Testing

/// Wraps a transport and, per request, applies the next scripted fault: latency, a stale (delayed) answer,
/// a dropped request or response, an error status, or no route. Requests without a scripted fault pass through.
final class FaultInjectingTransport: HTTPTransport {
    /// What to do with one request.
    enum Fault: Sendable, Hashable {
        /// Forward unchanged.
        case none
        /// Sleep on the clock, then forward.
        case latency(TimeInterval)
        /// Forward at once, then sleep on the clock before answering: the answer is the server's state at
        /// the moment it was sent, however the server changes meanwhile (a truly stale answer).
        case delayResponse(TimeInterval)
        /// Throw `.connectionLost` without forwarding: the server never saw it.
        case dropRequest
        /// Forward, then throw `.connectionLost`: the server acted but the answer was lost.
        case dropResponse
        /// Answer with this status and a JSON error body, without forwarding.
        case status(Int, retryAfter: Int?)
        /// Throw `.offline` without forwarding.
        case offline
    }

    private struct Script {
        let pathPrefix: String?
        var faults: [Fault]
    }

    private struct State {
        var scripts: [Script] = []
        var requests: [TransportRequest] = []
    }

    private let wrapped: any HTTPTransport
    private let clock: any TallyClock
    private let state = Mutex(State())

    init(wrapping wrapped: any HTTPTransport, clock: any TallyClock) {
        self.wrapped = wrapped
        self.clock = clock
    }

    /// Scripts `faults` for the next requests whose path starts with `pathPrefix` (every request when nil), in order.
    func enqueue(_ faults: [Fault], forPathPrefix pathPrefix: String? = nil) {
        state.withLock { $0.scripts.append(Script(pathPrefix: pathPrefix, faults: faults)) }
    }

    /// Drops the faults not yet applied (the network is back).
    func clearFaults() { state.withLock { $0.scripts = [] } }

    /// Every request seen, in order, including those answered by a fault.
    var requests: [TransportRequest] { state.withLock { $0.requests } }

    /// How many requests had this path (the query, if any, is ignored).
    func count(path: String) -> Int {
        requests.count { $0.path == path || $0.path.split(separator: "?", maxSplits: 1).first.map(String.init) == path }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let fault = state.withLock { state -> Fault in
            state.requests.append(request)
            guard let index = state.scripts.firstIndex(where: { script in
                !script.faults.isEmpty && script.pathPrefix.map { request.path.hasPrefix($0) } ?? true
            }) else { return .none }
            return state.scripts[index].faults.removeFirst()
        }
        switch fault {
        case .none:
            return try await wrapped.send(request)
        case .latency(let duration):
            try await clock.sleep(for: duration)
            return try await wrapped.send(request)
        case .delayResponse(let duration):
            let response = try await wrapped.send(request)
            try await clock.sleep(for: duration)
            return response
        case .dropRequest:
            throw TransportError.connectionLost
        case .dropResponse:
            _ = try await wrapped.send(request)
            throw TransportError.connectionLost
        case .status(let status, let retryAfter):
            return Self.errorResponse(status: status, retryAfter: retryAfter)
        case .offline:
            throw TransportError.offline
        }
    }

    /// A response shaped like the server's: `{"error":{"code","message"}}`.
    private static func errorResponse(status: Int, retryAfter: Int?) -> TransportResponse {
        let code: ErrorCode =
            switch status {
            case 401: .unauthorized
            case 404: .notFound
            case 409: .idempotencyKeyInUse
            case 429: .rateLimited
            case 503: .unavailable
            default: .internalError
            }
        let body = ErrorResponse(error: ErrorDetail(code: code, message: "injected fault \(status)"))
        var headers = ["Content-Type": "application/json"]
        if let retryAfter { headers["Retry-After"] = String(retryAfter) }
        return TransportResponse(status: status, headers: headers, body: (try? TallyJSON.encoder().encode(body)) ?? Data())
    }
}

/// The helper's own checks, against an in-memory transport that answers 200 "ok".
@Suite(.timeLimit(.minutes(1))) struct FaultInjectingTransportTests {
    private final class OK: HTTPTransport {
        let served = Mutex(0)
        func send(_ request: TransportRequest) async throws -> TransportResponse {
            served.withLock { $0 += 1 }
            return TransportResponse(status: 200, body: Data("ok".utf8))
        }
    }

    private func get(_ path: String) -> TransportRequest { TransportRequest(method: "GET", path: path, timeout: 5) }

    @Test func faultsAreConsumedInOrderThenRequestsPassThrough() async throws {
        let inner = OK()
        let transport = FaultInjectingTransport(wrapping: inner, clock: ManualClock())
        transport.enqueue([.offline, .dropRequest, .status(429, retryAfter: 3), .dropResponse, .none])
        await #expect(throws: TransportError.offline) { try await transport.send(get("/v1/wallet")) }
        await #expect(throws: TransportError.connectionLost) { try await transport.send(get("/v1/wallet")) }
        let limited = try await transport.send(get("/v1/wallet"))
        #expect(limited.status == 429 && limited.header("Retry-After") == "3")
        let error = try TallyJSON.decoder().decode(ErrorResponse.self, from: limited.body)
        #expect(error.error.code == .rateLimited)
        #expect(inner.served.withLock { $0 } == 0)
        await #expect(throws: TransportError.connectionLost) { try await transport.send(get("/v1/wallet")) }
        #expect(inner.served.withLock { $0 } == 1)  // the dropped response was served
        #expect(try await transport.send(get("/v1/wallet?x=1")).status == 200)
        #expect(try await transport.send(get("/v1/wallet")).status == 200)
        #expect(transport.count(path: "/v1/wallet") == 6)
        #expect(transport.requests.count == 6)
    }

    @Test func prefixesAndLatencyOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let transport = FaultInjectingTransport(wrapping: OK(), clock: clock)
        transport.enqueue([.status(503, retryAfter: nil)], forPathPrefix: "/v1/actions")
        transport.enqueue([.latency(2)], forPathPrefix: "/v1/wallet")
        #expect(try await transport.send(get("/v1/quotas")).status == 200)
        let slow = Task { try await transport.send(get("/v1/wallet")) }
        try await clock.waitForSleepers(1)
        #expect(try await transport.send(get("/v1/actions/ai.query")).status == 503)
        clock.advance(by: 2)
        #expect(try await slow.value.status == 200)
        #expect(transport.requests.map(\.path) == ["/v1/quotas", "/v1/wallet", "/v1/actions/ai.query"])
    }

    @Test func aDelayedResponseIsServedBeforeTheDelay() async throws {
        let clock = ManualClock()
        let inner = OK()
        let transport = FaultInjectingTransport(wrapping: inner, clock: clock)
        transport.enqueue([.delayResponse(2)])
        let stale = Task { try await transport.send(get("/v1/wallet")) }
        try await clock.waitForSleepers(1)
        #expect(inner.served.withLock { $0 } == 1)  // the server answered before the delay began
        clock.advance(by: 1.9)
        #expect(clock.sleeperCount == 1)
        clock.advance(by: 0.1)
        #expect(try await stale.value.status == 200)
        #expect(inner.served.withLock { $0 } == 1)
    }
}
