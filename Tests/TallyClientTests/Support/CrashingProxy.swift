import NIOCore
import NIOPosix
import Synchronization

/// A TCP forwarder on a loopback port in front of the test server that crashes an app process at one point of
/// its first `POST /v1/sync/push`: it calls `crash` (which kills the process) and cuts the connection either
/// before any byte of the push reaches the server, right after the whole request has been forwarded, or once
/// the server has answered (the push applied) but before the answer reaches the app. Every other request,
/// the event stream included, passes through untouched.
final class CrashingProxy: Sendable {
    /// Where in the push the app dies.
    enum CrashPoint: String, Sendable, CaseIterable, CustomStringConvertible {
        /// Killed as the push starts: the server never sees it.
        case beforeSend
        /// Killed once the whole request is on its way to the server, which may or may not apply it.
        case afterSend
        /// Killed after the server applied the push and answered, before the answer reaches the app.
        case afterApplied

        var description: String { rawValue }
    }

    /// The port the app connects to instead of the server's.
    let port: Int
    private let listener: any Channel
    private let state: Shared

    final class Shared: Sendable {
        let point: CrashPoint
        let crash: @Sendable () -> Void
        /// Whether the crash happened (it happens once), and every channel, to close at the end.
        let status = Mutex<(crashed: Bool, open: [any Channel])>((false, []))

        init(point: CrashPoint, crash: @escaping @Sendable () -> Void) {
            self.point = point
            self.crash = crash
        }

        /// Crashes the app once; false if it already happened.
        func crashOnce() -> Bool {
            guard status.withLock({ status in
                defer { status.crashed = true }
                return !status.crashed
            }) else { return false }
            crash()
            return true
        }

        var crashed: Bool { status.withLock { $0.crashed } }
    }

    /// Listens on a free loopback port and forwards to the server on `targetPort`.
    init(targetPort: Int, crashAt point: CrashPoint, crash: @escaping @Sendable () -> Void) async throws {
        let target = try SocketAddress(ipAddress: "127.0.0.1", port: targetPort)
        let state = Shared(point: point, crash: crash)
        listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { app in
                let fromApp = FromApp(state: state)
                return app.pipeline.addHandler(fromApp).flatMap {
                    ClientBootstrap(group: app.eventLoop)
                        .channelInitializer { server in server.pipeline.addHandler(FromServer(app: app, state: state, request: fromApp)) }
                        .connect(to: target)
                }.flatMap { server in
                    fromApp.server = server
                    state.status.withLock { $0.open += [app, server] }
                    return app.setOption(.autoRead, value: true)
                }.flatMapError { error in
                    app.close(promise: nil)
                    return app.eventLoop.makeFailedFuture(error)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = listener.localAddress?.port ?? 0
        self.state = state
    }

    /// Whether the app was crashed.
    var crashed: Bool { state.crashed }

    /// Stops listening and closes every connection.
    func stop() async {
        try? await listener.close()
        for channel in state.status.withLock({ $0.open }) { try? await channel.close() }
    }
}

/// The app's side of one connection: forwards to the server, watching for the push.
private final class FromApp: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let state: CrashingProxy.Shared
    /// Set on the event loop before the app's side reads.
    var server: (any Channel)?
    /// Bytes of the push's body still to forward (after its head), while a push is on its way.
    private var pushBodyLeft: Int?
    /// Whether the server's next bytes answer the push (``CrashingProxy/CrashPoint/afterApplied``).
    var awaitingPushAnswer = false

    init(state: CrashingProxy.Shared) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        if !state.crashed, pushBodyLeft == nil, let head = Self.pushHead(bytes) {
            if state.point == .beforeSend {
                _ = state.crashOnce()
                context.close(promise: nil)
                server?.close(promise: nil)
                return
            }
            pushBodyLeft = head.contentLength - (bytes.readableBytes - head.headLength)
        } else if let left = pushBodyLeft {
            pushBodyLeft = left - bytes.readableBytes
        }
        let complete = pushBodyLeft.map { $0 <= 0 } ?? false
        if complete { pushBodyLeft = nil }
        let point = state.point
        server?.writeAndFlush(bytes).whenComplete { [state] _ in
            guard complete else { return }
            if point == .afterSend { _ = state.crashOnce() }
        }
        if complete, point == .afterApplied { awaitingPushAnswer = true }
    }

    func channelInactive(context: ChannelHandlerContext) {
        server?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    /// The length of a `POST /v1/sync/push` request's head and its Content-Length, if `bytes` starts one.
    static func pushHead(_ bytes: ByteBuffer) -> (headLength: Int, contentLength: Int)? {
        let text = String(buffer: bytes)
        guard text.hasPrefix("POST /v1/sync/push"), let end = text.range(of: "\r\n\r\n") else { return nil }
        let head = text[..<end.lowerBound]
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        return (head.utf8.count + 4, length)
    }
}

/// The server's side of one connection: forwards to the app, unless the answer to the push is to be lost.
private final class FromServer: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let app: any Channel
    let state: CrashingProxy.Shared
    let request: FromApp

    init(app: any Channel, state: CrashingProxy.Shared, request: FromApp) {
        (self.app, self.state, self.request) = (app, state, request)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Both sides of a connection share its event loop, so the app side's flag is read in order.
        if request.awaitingPushAnswer {
            request.awaitingPushAnswer = false
            if state.crashOnce() {
                context.close(promise: nil)
                app.close(promise: nil)
                return
            }
        }
        app.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        app.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}
