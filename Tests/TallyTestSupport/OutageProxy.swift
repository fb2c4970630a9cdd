import NIOCore
import NIOPosix
import Synchronization

/// A TCP forwarder on a loopback port in front of a server that a test can cut — every connection closed, new ones
/// refused: what a client sees when the server stops — and restore, listening on the same port again: the server is
/// back. It stands in for a stopped PostgreSQL (the server's outage tests, without stopping the database other tests
/// share) and for a stopped `tally serve` (the SDK's sync tests). `onRequestBytes` sees every piece the connecting
/// side sends, in order per connection (a test counts the requests that reached the server).
public final class OutageProxy: Sendable {
    /// The port clients connect to instead of the server's.
    public let port: Int
    private let target: SocketAddress
    private let group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    private let channels = Channels()
    private let onRequestBytes: @Sendable (ByteBuffer) -> Void

    /// The listener, the forwarded connections, and how many cuts there were: a connection accepted before a cut but
    /// set up after it (its forward still connecting) is closed, never forwarded across the cut.
    private final class Channels: Sendable {
        let state = Mutex<(listener: (any Channel)?, open: [any Channel], cuts: Int)>((nil, [], 0))

        /// Keeps `channel` to be closed by the next cut, unless a cut came after the listener of `cuts` was bound.
        func keep(_ channel: any Channel, boundAfter cuts: Int) -> Bool {
            state.withLock { state in
                guard state.cuts == cuts else { return false }
                state.open.append(channel)
                return true
            }
        }
    }

    /// Listens on a free loopback port and forwards to `targetHost:targetPort`.
    public init(targetHost: String = "127.0.0.1", targetPort: Int, onRequestBytes: @escaping @Sendable (ByteBuffer) -> Void = { _ in }) async throws {
        target = try SocketAddress.makeAddressResolvingHost(targetHost, port: targetPort)
        self.onRequestBytes = onRequestBytes
        let listener = try await Self.bind(port: 0, cuts: 0, target: target, group: group, channels: channels, onRequestBytes: onRequestBytes)
        port = listener.localAddress?.port ?? 0
        channels.state.withLock { $0.listener = listener }
    }

    /// Closes every forwarded connection and stops listening: connects are refused until ``restore()``.
    public func cut() async {
        let (listener, open) = channels.state.withLock { state in
            defer { (state.listener, state.open, state.cuts) = (nil, [], state.cuts + 1) }
            return (state.listener, state.open)
        }
        try? await listener?.close()
        for channel in open { try? await channel.close() }
    }

    /// Listens on the same port again.
    public func restore() async throws {
        let cuts = channels.state.withLock { $0.cuts }
        let listener = try await Self.bind(port: port, cuts: cuts, target: target, group: group, channels: channels, onRequestBytes: onRequestBytes)
        channels.state.withLock { $0.listener = listener }
    }

    /// Stops it for good.
    public func stop() async { await cut() }

    private static func bind(
        port: Int, cuts: Int, target: SocketAddress, group: any EventLoopGroup, channels: Channels,
        onRequestBytes: @escaping @Sendable (ByteBuffer) -> Void
    ) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                guard channels.keep(inbound, boundAfter: cuts) else { return inbound.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
                let forward = Forward(to: nil, observe: onRequestBytes)
                return inbound.pipeline.addHandler(forward).flatMap {
                    ClientBootstrap(group: inbound.eventLoop)
                        .channelInitializer { outbound in outbound.pipeline.addHandler(Forward(to: inbound, observe: nil)) }
                        .connect(to: target)
                }.flatMap { outbound in
                    guard channels.keep(outbound, boundAfter: cuts) else {
                        outbound.close(promise: nil)
                        return inbound.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)  // closed just below
                    }
                    forward.partner = outbound
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
    let observe: (@Sendable (ByteBuffer) -> Void)?

    init(to partner: (any Channel)?, observe: (@Sendable (ByteBuffer) -> Void)?) {
        self.partner = partner
        self.observe = observe
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        observe?(bytes)
        partner?.writeAndFlush(bytes, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
