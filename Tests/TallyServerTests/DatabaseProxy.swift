import NIOCore
import NIOPosix
import Synchronization

/// A TCP forwarder on a loopback port in front of the test PostgreSQL, that a test can cut (every
/// connection closed, new ones refused: what a server sees when PostgreSQL stops) and restore (listening
/// on the same port again: PostgreSQL is back), without stopping the PostgreSQL other tests share.
final class DatabaseProxy: Sendable {
    /// The port servers connect to instead of PostgreSQL's.
    let port: Int
    private let target: SocketAddress
    private let group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    private let channels = Channels()

    /// The listener and the forwarded connections.
    private final class Channels: Sendable {
        let state = Mutex<(listener: (any Channel)?, open: [any Channel])>((nil, []))
    }

    /// Listens on a free loopback port and forwards to `targetHost:targetPort`.
    init(targetHost: String, targetPort: Int) async throws {
        target = try SocketAddress.makeAddressResolvingHost(targetHost, port: targetPort)
        let listener = try await Self.bind(port: 0, target: target, group: group, channels: channels)
        port = listener.localAddress?.port ?? 0
        channels.state.withLock { $0.listener = listener }
    }

    /// Closes every forwarded connection and stops listening: connects are refused until ``restore()``.
    func cut() async {
        let (listener, open) = channels.state.withLock { channels in
            defer { channels = (nil, []) }
            return channels
        }
        try? await listener?.close()
        for channel in open { try? await channel.close() }
    }

    /// Listens on the same port again.
    func restore() async throws {
        let listener = try await Self.bind(port: port, target: target, group: group, channels: channels)
        channels.state.withLock { $0.listener = listener }
    }

    /// Stops it for good.
    func stop() async { await cut() }

    private static func bind(port: Int, target: SocketAddress, group: any EventLoopGroup, channels: Channels) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                let forward = Forward(to: nil)
                return inbound.pipeline.addHandler(forward).flatMap {
                    ClientBootstrap(group: inbound.eventLoop)
                        .channelInitializer { outbound in outbound.pipeline.addHandler(Forward(to: inbound)) }
                        .connect(to: target)
                }.flatMap { outbound in
                    forward.partner = outbound
                    channels.state.withLock { $0.open += [inbound, outbound] }
                    return inbound.setOption(.autoRead, value: true)
                }.flatMapError { error in
                    inbound.close(promise: nil)
                    return inbound.eventLoop.makeFailedFuture(error)
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
    }
}

/// Writes what one side reads to the other, and closes the other when one closes.
private final class Forward: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    /// Set on the channel's event loop before it reads (the inbound side reads only once it is set).
    var partner: (any Channel)?

    init(to partner: (any Channel)?) { self.partner = partner }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner?.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
