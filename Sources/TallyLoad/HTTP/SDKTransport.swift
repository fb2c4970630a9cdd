import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import TallyClient

/// The SDK's transport for simulated app users: a few keep-alive connections per app, like URLSession's
/// per-host pool, reused across requests. Counts what actually reached the server.
public final class SDKTransport: HTTPTransport {
    private let host: String
    private let port: Int
    private let group: any EventLoopGroup
    private let gate: ConnectGate?
    private let idle = Mutex<[ConnectionBox]>([])
    private let counts = Mutex(Counts())

    /// Requests sent by method, and connections opened.
    public struct Counts: Sendable {
        /// `GET` requests that reached the server.
        public var reads = 0
        /// Other requests that reached the server.
        public var writes = 0
        /// `GET` requests answered 304 Not Modified.
        public var notModified = 0
    }

    /// A transport to `host:port`, whose connections open only while `gate` (if any) is open.
    public init(host: String, port: Int, group: any EventLoopGroup, gate: ConnectGate? = nil) {
        self.host = host
        self.port = port
        self.group = group
        self.gate = gate
    }

    /// What reached the server so far.
    public var sent: Counts { counts.withLock { $0 } }

    /// Sends the request on an idle connection of this app (a new one when none is idle) and returns the answer.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let box = idle.withLock { $0.popLast() } ?? ConnectionBox(LoadConnection(host: host, port: port, group: group, gate: gate))
        let method = HTTPMethod(rawValue: request.method)
        let load = LoadRequest(method, request.path, headers: request.headers.map { ($0.key, $0.value) }, body: request.body.map(Array.init))
        let milliseconds = Int64((request.timeout * 1000).rounded())
        do {
            let response = try await box.connection.send(load, timeout: .milliseconds(max(1, milliseconds)))
            counts.withLock {
                if method == .GET { $0.reads += 1 } else { $0.writes += 1 }
                if response.status == 304 { $0.notModified += 1 }
            }
            idle.withLock { $0.append(box) }
            var headers: [String: String] = [:]
            for (name, value) in response.headers { headers[name.lowercased()] = value }
            return TransportResponse(status: response.status, headers: headers, body: Data(response.body))
        } catch LoadTransportError.connectFailed {
            throw TransportError.offline
        } catch LoadTransportError.timedOut {
            throw TransportError.timedOut
        } catch {
            throw TransportError.connectionLost
        }
    }

    /// Closes every idle connection.
    public func close() async {
        let boxes = idle.withLock { boxes in defer { boxes = [] }; return boxes }
        for box in boxes { await box.connection.close() }
    }
}

/// Hands a connection from one request to the next; only one task uses it at a time.
final class ConnectionBox: @unchecked Sendable {
    let connection: LoadConnection
    init(_ connection: LoadConnection) { self.connection = connection }
}
