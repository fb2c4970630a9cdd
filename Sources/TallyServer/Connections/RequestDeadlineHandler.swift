import HTTPTypes
import NIOCore
import NIOHTTPTypes
import TallyAPI

/// When a connection's current request must have arrived by, or its answer must move on by: a pure state
/// machine fed with the connection's events and their times.
///
/// - A request head must be complete ``headerTimeout`` after the connection opened, or after the first
///   byte of a request on a kept-alive connection (idle time between requests is not counted here:
///   Hummingbird's idle timeout closes connections idle for longer than it).
/// - A request body must be complete ``requestTimeout`` after its head.
/// - While a request is being answered there is no deadline of the request: handlers are not interrupted.
/// - Whatever else goes on, an answer the client does not read must not hold the server's memory: when the
///   connection stops being writable (more is waiting to be sent than its high-water mark, the socket full), it
///   must become writable again within ``requestTimeout``.
struct RequestDeadlines {
    /// How long a request head may take.
    let headerTimeout: TimeAmount
    /// How long a request body may take after its head.
    let requestTimeout: TimeAmount

    /// When the head being read started (connection open or its first byte); nil when none is.
    private var headSince: NIODeadline?
    /// When the head of the request whose body is being read arrived; nil when no body is being read.
    private var bodySince: NIODeadline?
    /// Requests whose head arrived and whose response is not complete yet.
    private var answering = 0
    /// When the connection stopped being writable; nil while it is writable.
    private var stalledSince: NIODeadline?

    init(headerTimeout: TimeAmount, requestTimeout: TimeAmount) {
        self.headerTimeout = headerTimeout
        self.requestTimeout = requestTimeout
    }

    /// The connection opened: its first request head is due.
    mutating func opened(at now: NIODeadline) {
        headSince = now
    }

    /// Bytes arrived. Starts the head's clock when nothing else was going on; bytes that arrive while a
    /// request is read or answered are its body, or a pipelined request covered by the idle timeout.
    mutating func bytesArrived(at now: NIODeadline) {
        if headSince == nil, bodySince == nil, answering == 0 { headSince = now }
    }

    /// A request head was parsed.
    mutating func headReceived(at now: NIODeadline) {
        headSince = nil
        bodySince = now
        answering += 1
    }

    /// The request's body is complete.
    mutating func endReceived() {
        bodySince = nil
    }

    /// A response is completely written.
    mutating func responseEnded() {
        answering = max(0, answering - 1)
    }

    /// The connection became writable (what waited was sent down to its low-water mark), or stopped being.
    mutating func writabilityChanged(isWritable: Bool, at now: NIODeadline) {
        stalledSince = isWritable ? nil : stalledSince ?? now
    }

    /// The instant by which the current head or body must be complete, or the connection writable again; nil
    /// when nothing is due.
    var deadline: NIODeadline? {
        let request = bodySince.map { $0 + requestTimeout } ?? headSince.map { $0 + headerTimeout }
        guard let stalledSince else { return request }
        return min(request ?? .distantFuture, stalledSince + requestTimeout)
    }
}

/// Closes a connection whose request head or body does not arrive in time, or whose answer the client does
/// not read for the request timeout (``RequestDeadlines``).
///
/// Sits after HTTP decoding (one of Hummingbird's `additionalChannelHandlers`); the connection's
/// ``ConnectionGuardHandler`` tells it when raw bytes arrive. At most one timer is pending per connection:
/// when it fires early (the deadline moved on) it is set again for the new deadline, so a busy keep-alive
/// connection costs a timer per timeout period, not one per request.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var deadlines: RequestDeadlines
    private var timer: Scheduled<Void>?
    /// When `timer` fires.
    private var timerDeadline: NIODeadline?
    private var context: ChannelHandlerContext?
    private var isOpen = false

    init(headerTimeout: TimeAmount, requestTimeout: TimeAmount) {
        deadlines = RequestDeadlines(headerTimeout: headerTimeout, requestTimeout: requestTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { opened(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        opened(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        deadlines.writabilityChanged(isWritable: context.channel.isWritable, at: context.eventLoop.now)
        armTimer(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Raw bytes arrived (from the ``ConnectionGuardHandler`` in front of the HTTP decoder).
    func bytesArrived() {
        guard let context else { return }
        deadlines.bytesArrived(at: context.eventLoop.now)
        armTimer(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            deadlines.headReceived(at: context.eventLoop.now)
            armTimer(context: context)
        case .body: break
        case .end: deadlines.endReceived()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { deadlines.responseEnded() }
        context.write(data, promise: promise)
    }

    private func opened(context: ChannelHandlerContext) {
        guard !isOpen else { return }
        isOpen = true
        deadlines.opened(at: context.eventLoop.now)
        armTimer(context: context)
    }

    /// Makes sure a timer fires no later than the current deadline: keeps a pending one that does,
    /// replaces one that would fire too late.
    private func armTimer(context: ChannelHandlerContext) {
        guard let deadline = deadlines.deadline else { return }
        if let timerDeadline, timerDeadline <= deadline { return }
        cancelTimer()
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerDeadline = nil
            guard let due = deadlines.deadline else { return }
            if context.eventLoop.now >= due {
                context.close(promise: nil)
            } else {
                armTimer(context: context)
            }
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }
}
