import NIOCore
import TallyAPI

/// The first handler of every connection, before HTTP parsing: admits the connection through the
/// listener's ``ConnectionLimiter`` (or refuses it with a complete `503` and closes it), releases it on
/// close, and tells the ``RequestDeadlineHandler`` when the bytes of a new request start arriving.
///
/// A refused connection gets `HTTP/1.1 503` with `Retry-After` and the API's JSON error body, written
/// as raw bytes (it never reaches the HTTP handlers); then its output is shut, whatever it sends is
/// discarded, and it is closed when the client closes or after ``refusalLinger``. Reading until the
/// client is done keeps its request from arriving at a closed socket, which would make the kernel answer
/// with a reset that can destroy the 503 before the client reads it.
final class ConnectionGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case new
        case admitted(address: String)
        case refused
        case closed
    }

    /// How long a refused connection may linger before it is closed regardless.
    static let refusalLinger = TimeAmount.seconds(1)

    private let limiter: ConnectionLimiter
    private var state = State.new
    /// Set by ``GuardedHTTP1Channel`` once the HTTP handlers are in place.
    var deadlines: RequestDeadlineHandler?

    init(limiter: ConnectionLimiter) {
        self.limiter = limiter
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .admitted = state else { return }  // a refused connection's bytes are dropped
        deadlines?.bytesArrived()
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .refused = state, case ChannelEvent.inputClosed = event {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .admitted(let address) = state { limiter.release(address) }
        state = .closed
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if case .admitted(let address) = state { limiter.release(address) }
        state = .closed
        deadlines = nil
    }

    private func admit(context: ChannelHandlerContext) {
        guard case .new = state else { return }
        let address = context.channel.remoteAddress?.ipAddress ?? "unknown"
        guard let refusal = limiter.admit(address) else {
            state = .admitted(address: address)
            return
        }
        state = .refused
        let response = context.channel.allocator.buffer(bytes: refusal == .total ? Self.listenerFull : Self.addressFull)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in channel.close(mode: .output, promise: nil) }
        context.eventLoop.scheduleTask(in: Self.refusalLinger) { channel.close(promise: nil) }
    }

    /// The whole answer to a refused connection.
    static func refusal(_ message: String) -> [UInt8] {
        let body = JSONWriter.bytes(of: ErrorResponse(error: ErrorDetail(code: .unavailable, message: message)))
        let head =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
            + "Content-Length: \(body.count)\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    static let listenerFull = refusal("The server has too many connections open; retry later.")
    static let addressFull = refusal("Too many connections from this address; retry later.")
}
