import Foundation
import Synchronization
import TallyAPI
import TallyClient

/// Wraps an event stream transport: records each request and every body byte delivered, applies the next
/// scripted fault to an open, and drops the open connections on demand (as a network change would).
final class FaultInjectingEventStreamTransport: EventStreamTransport {
    /// What to do with one open.
    enum Fault: Sendable, Hashable {
        /// Forward unchanged.
        case none
        /// Throw `.offline` without forwarding.
        case offline
        /// Answer with this status and a JSON error body, without forwarding.
        case status(Int)
    }

    private struct Connection {
        let continuation: AsyncThrowingStream<Data, any Error>.Continuation
        let pump: Task<Void, Never>
    }

    private struct State {
        var faults: [Fault] = []
        var requests: [TransportRequest] = []
        var received: [UInt8] = []
        var connections: [Int: Connection] = [:]
        var nextId = 0
        var bodiesReleased = 0
    }

    private let wrapped: any EventStreamTransport
    private let state = Mutex(State())

    init(wrapping wrapped: any EventStreamTransport) { self.wrapped = wrapped }

    /// Scripts `faults` for the next opens, in order.
    func enqueue(_ faults: [Fault]) { state.withLock { $0.faults += faults } }

    /// Every request seen, in order, including those answered by a fault.
    var requests: [TransportRequest] { state.withLock { $0.requests } }

    /// Every body byte of the server's 200 responses (event streams), over all connections.
    var received: [UInt8] { state.withLock { $0.received } }

    /// How many forwarded bodies their consumer stopped reading or saw end (each such real request is over).
    var bodiesReleased: Int { state.withLock { $0.bodiesReleased } }

    /// Fails every open body with `.connectionLost` and cancels its real request.
    func dropConnections() {
        let connections = state.withLock { state in
            defer { state.connections = [:] }
            return Array(state.connections.values)
        }
        for connection in connections {
            connection.pump.cancel()
            connection.continuation.finish(throwing: TransportError.connectionLost)
        }
    }

    func open(_ request: TransportRequest) async throws -> StreamingResponse {
        let fault = state.withLock { state in
            state.requests.append(request)
            return state.faults.isEmpty ? .none : state.faults.removeFirst()
        }
        switch fault {
        case .offline:
            throw TransportError.offline
        case .status(let status):
            let code: ErrorCode = status == 404 ? .notFound : status == 503 ? .unavailable : .internalError
            let json = try TallyJSON.encoder().encode(ErrorResponse(error: ErrorDetail(code: code, message: "injected fault \(status)")))
            let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
            continuation.yield(json)
            continuation.finish()
            return StreamingResponse(status: status, headers: ["Content-Type": "application/json"], body: body)
        case .none:
            let inner = try await wrapped.open(request)
            let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
            let id = state.withLock { state in
                state.nextId += 1
                return state.nextId
            }
            let pump = Task { [self] in
                do {
                    for try await chunk in inner.body {
                        if inner.status == 200 { state.withLock { $0.received += chunk } }
                        continuation.yield(chunk)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { [self] _ in
                pump.cancel()
                state.withLock { state in
                    state.connections[id] = nil
                    state.bodiesReleased += 1
                }
            }
            state.withLock { $0.connections[id] = Connection(continuation: continuation, pump: pump) }
            return StreamingResponse(status: inner.status, headers: inner.headers, body: body)
        }
    }
}
