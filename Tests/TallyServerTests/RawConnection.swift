import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A TCP connection that sends bytes exactly as given and keeps what comes back: for tests of how the
/// server treats connections (caps, slow or idle clients), below any HTTP client library. Like a client
/// that does not watch its socket, it does not close its side when the server closes its own.
final class RawConnection: Sendable {
    private let channel: any Channel
    private let bytes: Received

    private init(channel: any Channel, bytes: Received) {
        self.channel = channel
        self.bytes = bytes
    }

    /// Connects to `port` on 127.0.0.1, from the loopback address `source` when given.
    static func open(port: Int, from source: String? = nil) async throws -> RawConnection {
        let bytes = Received()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(10))
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(bytes)) }
            }
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
        return RawConnection(channel: channel, bytes: bytes)
    }

    /// Everything received so far, as text.
    var received: String { bytes.text }

    /// Sends `text` as is.
    func send(_ text: String) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(string: text))
    }

    /// Whether the server closed the connection (or its sending side) within `limit`.
    func closedByServer(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while channel.isActive, !bytes.serverClosed {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Waits (at most `limit`) for the next whole response (head and `Content-Length` body) after the
    /// ones this method returned before; returns it, or nil.
    func response(within limit: Duration) async throws -> String? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let next = bytes.takeResponse() { return next }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// Closes the connection from this side.
    func close() async { try? await channel.close() }

    /// Collects the received bytes, how many of them ``takeResponse()`` handed out, and whether the
    /// server closed its side.
    private final class Received: Sendable {
        private let data = Mutex<(bytes: [UInt8], taken: Int)>(([], 0))
        private let closed = Mutex(false)
        var serverClosed: Bool {
            get { closed.withLock { $0 } }
            set { closed.withLock { $0 = newValue } }
        }
        func append(_ buffer: ByteBuffer) { data.withLock { $0.bytes += buffer.readableBytesView } }
        var text: String { String(decoding: data.withLock { $0.bytes }, as: UTF8.self) }

        /// The next complete response after those taken before, if it has arrived.
        func takeResponse() -> String? {
            data.withLock { data in
                let text = String(decoding: data.bytes[data.taken...], as: UTF8.self)
                guard let end = text.range(of: "\r\n\r\n") else { return nil }
                let head = text[..<end.lowerBound].lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                let headBytes = text[..<end.upperBound].utf8.count
                guard data.bytes.count - data.taken >= headBytes + length else { return nil }
                let response = String(decoding: data.bytes[data.taken..<(data.taken + headBytes + length)], as: UTF8.self)
                data.taken += headBytes + length
                return response
            }
        }
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received: Received
        init(_ received: Received) { self.received = received }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { received.append(unwrapInboundIn(data)) }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event { received.serverClosed = true }
            context.fireUserInboundEventTriggered(event)
        }
    }
}
