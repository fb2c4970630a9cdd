import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// One request as a simulated user sends it.
public struct LoadRequest: Sendable {
    /// `GET`, `POST`, `PUT`, `DELETE`.
    public var method: HTTPMethod
    /// Path and query.
    public var path: String
    /// Extra header fields (the connection adds `Host`, `Content-Length` and `Content-Type`).
    public var headers: [(String, String)]
    /// The JSON body, if any.
    public var body: [UInt8]?

    /// Creates a request.
    public init(_ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }
}

/// A whole response.
public struct LoadResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: [UInt8]
}

/// Why a request got no response.
public enum LoadTransportError: Error, Sendable, Hashable {
    /// The connection could not be opened.
    case connectFailed
    /// The connection closed before the response was complete: the server may or may not have acted.
    case connectionLost
    /// No response within the request timeout (the connection is closed).
    case timedOut
}

/// An HTTP/1.1 keep-alive connection owned by one simulated user: one request at a time, reopened
/// transparently when the server closed it. Not shared between tasks.
public final class LoadConnection {
    /// The server's host.
    let host: String
    /// The server's port.
    let port: Int
    private let group: any EventLoopGroup
    private let gate: ConnectGate?
    private let timeout: TimeAmount
    private var channel: (any Channel)?
    /// How many times the connection was (re)opened.
    public private(set) var connects = 0

    /// A connection to `host:port`, opened on first use (and only while `gate`, if any, is open).
    public init(host: String, port: Int, group: any EventLoopGroup, gate: ConnectGate? = nil, timeout: TimeAmount = .seconds(30)) {
        self.host = host
        self.port = port
        self.group = group
        self.gate = gate
        self.timeout = timeout
    }

    /// A client bootstrap for the harness's HTTP/1.1 connections (address reuse, no Nagle, a 10-s connect timeout) whose
    /// pipeline ends in the handler `makeHandler` gives each channel.
    static func bootstrap(group: any EventLoopGroup, _ makeHandler: @escaping @Sendable () -> some ChannelHandler) -> ClientBootstrap {
        ClientBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(makeHandler())
                }
            }
    }

    /// Opens the connection now (the load test connects every user before the measured phase).
    public func connect() async throws {
        if let channel, channel.isActive { return }
        let bootstrap = Self.bootstrap(group: group) { ResponseHandler() }
        do {
            let connecting = try gate.map { try $0.connect { bootstrap.connect(host: host, port: port) } }
                ?? bootstrap.connect(host: host, port: port)
            channel = try await connecting.get()
            connects += 1
        } catch {
            throw LoadTransportError.connectFailed
        }
    }

    /// Sends `request` and waits for its response, at most `timeout` (the connection's default when nil).
    public func send(_ request: LoadRequest, timeout: TimeAmount? = nil) async throws -> LoadResponse {
        try await connect()
        guard let channel else { throw LoadTransportError.connectFailed }
        let promise = channel.eventLoop.makePromise(of: LoadResponse.self)
        let timeout = timeout ?? self.timeout
        let timer = channel.eventLoop.scheduleTask(in: timeout) {
            promise.fail(LoadTransportError.timedOut)
            channel.close(promise: nil)
        }
        channel.writeAndFlush(Outbound(request: request, host: host, promise: promise), promise: nil)
        defer { timer.cancel() }
        do {
            return try await promise.futureResult.get()
        } catch let error as LoadTransportError {
            self.channel = nil
            throw error
        } catch {
            self.channel = nil
            throw LoadTransportError.connectionLost
        }
    }

    /// Sends `request` and closes the connection as soon as it is written, without reading the answer:
    /// a user who gave up mid-flight. The server may or may not act on it.
    public func abandon(_ request: LoadRequest) async throws {
        try await connect()
        guard let channel else { throw LoadTransportError.connectFailed }
        let promise = channel.eventLoop.makePromise(of: LoadResponse.self)
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(Outbound(request: request, host: host, promise: promise), promise: written)
        try? await written.futureResult.get()
        try? await channel.close()
        _ = try? await promise.futureResult.get()
        self.channel = nil
    }

    /// Closes the connection.
    public func close() async {
        if let channel { try? await channel.close() }
        channel = nil
    }
}

/// Lets connections open only while their event loops live. An SDK client's token refresh goes on after its caller was
/// cancelled (the SDK's rule), so one can ask for a connection after a load run shut its event loops down, which NIO
/// traps on ("leaking promise"): the run closes the gate first, and a connect after that fails as the network would.
public final class ConnectGate: Sendable {
    private let open = Mutex(true)

    /// An open gate.
    public init() {}

    /// No connection opens after this returns.
    public func close() { open.withLock { $0 = false } }

    /// Starts `connecting` while the gate is open (the start is under the gate's lock, so `close()` waits for it).
    func connect(_ connecting: () -> EventLoopFuture<any Channel>) throws -> EventLoopFuture<any Channel> {
        try open.withLock { open throws(LoadTransportError) in
            guard open else { throw .connectFailed }
            return connecting()
        }
    }
}

/// A request with the promise of its response, written into the pipeline.
struct Outbound: Sendable {
    let request: LoadRequest
    let host: String
    let promise: EventLoopPromise<LoadResponse>
}

/// Writes one request at a time and completes its promise with the aggregated response.
final class ResponseHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = Outbound
    typealias OutboundOut = HTTPClientRequestPart

    private var pending: EventLoopPromise<LoadResponse>?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let outbound = unwrapOutboundIn(data)
        guard context.channel.isActive else {
            // Closed by the server between requests: fail now instead of waiting for the timeout.
            outbound.promise.fail(LoadTransportError.connectionLost)
            promise?.fail(LoadTransportError.connectionLost)
            return
        }
        guard pending == nil else {
            // One request at a time: a second one is a caller bug; fail it without touching the first.
            outbound.promise.fail(LoadTransportError.connectionLost)
            promise?.fail(LoadTransportError.connectionLost)
            return
        }
        pending = outbound.promise
        let request = outbound.request
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: outbound.host)
        for (name, value) in request.headers { headers.add(name: name, value: value) }
        if let body = request.body {
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(body.count))
        } else if request.method == .POST || request.method == .PUT {
            headers.add(name: "Content-Length", value: "0")
        }
        let head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.path, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body = request.body {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.removeAll(keepingCapacity: true)
        case .body(var buffer):
            body.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? [])
        case .end:
            guard let head, let pending else { return }
            self.pending = nil
            self.head = nil
            pending.succeed(LoadResponse(status: Int(head.status.code), headers: head.headers, body: body))
            if !head.isKeepAlive { context.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        pending?.fail(LoadTransportError.connectionLost)
        pending = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        pending?.fail(LoadTransportError.connectionLost)
        pending = nil
        context.close(promise: nil)
    }
}
