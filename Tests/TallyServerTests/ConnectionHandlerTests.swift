import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Synchronization
import TallyAPI
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// The connection guards on an `EmbeddedChannel` with the server's real HTTP/1 decoding between them;
/// the channel's virtual clock (`advanceTime(by:)`) makes every timeout exact.
@Suite(.timeLimit(.minutes(1))) struct ConnectionHandlerTests {
    static let header = TimeAmount.milliseconds(500)
    static let body = TimeAmount.seconds(2)

    /// A connection from `address` with the public listener's pipeline: guard, HTTP decoding, deadlines.
    static func connection(
        limiter: ConnectionLimiter, from address: String = "10.0.0.1", header: TimeAmount = header, body: TimeAmount = body
    ) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let guardHandler = ConnectionGuardHandler(limiter: limiter)
        let deadlines = RequestDeadlineHandler(headerTimeout: header, requestTimeout: body)
        try channel.pipeline.syncOperations.addHandler(guardHandler)
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try channel.pipeline.syncOperations.addHandler(deadlines)
        guardHandler.deadlines = deadlines
        let peer = try SocketAddress(ipAddress: address, port: 40_000)
        channel.remoteAddress = peer
        try channel.connect(to: peer).wait()
        return channel
    }

    static func limiter(total: Int = 100, perAddress: Int = 0, clock: any TallyClock = ManualClock(), logger: Logger? = nil)
        -> ConnectionLimiter
    {
        ConnectionLimiter(
            listener: "public", maxTotal: total, maxPerAddress: perAddress, clock: clock,
            logger: logger ?? CapturedLines().logger(level: .info))
    }

    static func send(_ text: String, to channel: EmbeddedChannel) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    /// The server's side of a response: what the responder writes after reading a request.
    static func respond(on channel: EmbeddedChannel) throws {
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "0"])))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
    }

    /// Expects `channel` open until just before `delay` from now, and closed at `delay`.
    static func expectClosed(_ channel: EmbeddedChannel, after delay: TimeAmount, sourceLocation: SourceLocation = #_sourceLocation) {
        channel.embeddedEventLoop.advanceTime(by: delay - .milliseconds(1))
        #expect(channel.isActive, "closed early", sourceLocation: sourceLocation)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive, "not closed in time", sourceLocation: sourceLocation)
    }

    // MARK: - Deadlines

    @Test func aConnectionThatSendsNothingIsClosedAtTheHeaderTimeout() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        Self.expectClosed(channel, after: Self.header)
    }

    @Test func aTricklingHeadIsClosedAtTheHeaderTimeoutFromTheConnection() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("GET /health HTTP/1.1\r\n", to: channel)
        for index in 0..<4 {  // 400 ms of header bytes, 100 ms apart: active, never complete
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
            try Self.send("X-\(index): 1\r\n", to: channel)
        }
        Self.expectClosed(channel, after: .milliseconds(100))
    }

    @Test func idleTimeBetweenRequestsIsNotCountedButTheNextHeadIs() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n", to: channel)
        while try channel.readInbound(as: HTTPRequestPart.self) != nil {}
        try Self.respond(on: channel)
        channel.embeddedEventLoop.advanceTime(by: Self.header * 20)
        #expect(channel.isActive, "idle keep-alive time is the idle timeout's business")
        try Self.send("GET /ready HTTP/1.1\r\n", to: channel)  // the next head starts
        Self.expectClosed(channel, after: Self.header)
    }

    @Test func aBodyThatStopsIsClosedAtTheRequestTimeoutFromItsHead() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("POST /v1/wallet/holds HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n{\"amount\"", to: channel)
        Self.expectClosed(channel, after: Self.body)
    }

    @Test func aDeadlineSoonerThanThePendingTimerIsStillKept() throws {
        // The timer armed for the head (10 s) must not hide a shorter body deadline (300 ms).
        let channel = try Self.connection(limiter: Self.limiter(), header: .seconds(10), body: .milliseconds(300))
        try Self.send("POST /v1/wallet/holds HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n{", to: channel)
        Self.expectClosed(channel, after: .milliseconds(300))
    }

    @Test func aRequestBeingAnsweredHasNoDeadline() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n", to: channel)
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive, "a slow handler is not cut off")
    }

    @Test func aResponseWrittenBeforeTheBodyEndsLeavesTheConnectionIdleAfterIt() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("POST /v1/wallet/holds HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n", to: channel)
        try Self.respond(on: channel)  // e.g. a 401 before reading the body
        try Self.send("{}", to: channel)
        channel.embeddedEventLoop.advanceTime(by: Self.body * 10)
        #expect(channel.isActive)
    }

    @Test func anAnswerLeftUnreadIsClosedAtTheRequestTimeoutFromWhenItStoppedBeingWritable() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("GET /v1/sync/pull HTTP/1.1\r\nHost: t\r\n\r\n", to: channel)
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "1048576"])))
        func writable(_ writable: Bool) {
            channel.isWritable = writable
            channel.pipeline.fireChannelWritabilityChanged()
        }
        channel.embeddedEventLoop.advanceTime(by: Self.body * 3)
        #expect(channel.isActive, "an answer being written while the client reads has no deadline")
        writable(false)  // the socket is full: the client stopped reading
        channel.embeddedEventLoop.advanceTime(by: Self.body - .milliseconds(100))
        writable(true)  // it read some: progress, the clock starts over at the next stall
        channel.embeddedEventLoop.advanceTime(by: Self.body * 3)
        #expect(channel.isActive)
        writable(false)
        Self.expectClosed(channel, after: Self.body)
    }

    @Test func anEventStreamThatStaysWritableIsNeverClosedByTheDeadlines() throws {
        let channel = try Self.connection(limiter: Self.limiter())
        try Self.send("GET /v1/sync/events HTTP/1.1\r\nHost: t\r\n\r\n", to: channel)
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        for _ in 0..<10 {
            channel.embeddedEventLoop.advanceTime(by: .seconds(15))
            try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(string: ": heartbeat\n\n")))
        }
        #expect(channel.isActive)
    }

    @Test func theStateMachineNamesTheDueInstant() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var deadlines = RequestDeadlines(headerTimeout: .seconds(1), requestTimeout: .seconds(5))
        #expect(deadlines.deadline == nil)
        deadlines.opened(at: start)
        #expect(deadlines.deadline == start + .seconds(1))
        deadlines.bytesArrived(at: start + .milliseconds(500))
        #expect(deadlines.deadline == start + .seconds(1), "more bytes of the same head do not move it")
        deadlines.headReceived(at: start + .milliseconds(700))
        #expect(deadlines.deadline == start + .milliseconds(5_700))
        deadlines.bytesArrived(at: start + .seconds(2))
        #expect(deadlines.deadline == start + .milliseconds(5_700), "body bytes do not start a head")
        deadlines.endReceived()
        #expect(deadlines.deadline == nil)
        deadlines.bytesArrived(at: start + .seconds(3))
        #expect(deadlines.deadline == nil, "a pipelined request while answering is left to the idle timeout")
        deadlines.responseEnded()
        deadlines.bytesArrived(at: start + .seconds(9))
        #expect(deadlines.deadline == start + .seconds(10))
        deadlines.writabilityChanged(isWritable: false, at: start + .milliseconds(9_500))
        #expect(deadlines.deadline == start + .seconds(10), "the head's deadline is sooner")
        deadlines.headReceived(at: start + .milliseconds(9_600))
        deadlines.endReceived()
        #expect(deadlines.deadline == start + .milliseconds(14_500), "unwritable since 9.5 s: the request timeout from then")
        deadlines.writabilityChanged(isWritable: false, at: start + .seconds(12))
        #expect(deadlines.deadline == start + .milliseconds(14_500), "still unwritable: the stall began at 9.5 s")
        deadlines.writabilityChanged(isWritable: true, at: start + .seconds(13))
        #expect(deadlines.deadline == nil)
    }

    // MARK: - Caps

    @Test func aConnectionBeyondTheCapIsAnswered503AndClosedAndItsBytesGoNowhere() throws {
        let limiter = Self.limiter(total: 1)
        let first = try Self.connection(limiter: limiter)
        let second = try Self.connection(limiter: limiter, from: "10.0.0.2")
        let written = try #require(try second.readOutbound(as: ByteBuffer.self))
        let text = String(buffer: written)
        #expect(text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n") && text.contains("Retry-After: 1\r\n"))
        #expect(text.hasSuffix(#"{"error":{"code":"unavailable","message":"The server has too many connections open; retry later."}}"#))
        try Self.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n", to: second)
        #expect(try second.readInbound(as: HTTPRequestPart.self) == nil, "a refused connection's request is never handled")
        second.embeddedEventLoop.advanceTime(by: ConnectionGuardHandler.refusalLinger)
        #expect(!second.isActive)
        #expect(limiter.openConnections == 1)
        _ = try first.finish()
        #expect(limiter.openConnections == 0, "closing gives the slot back")
        let third = try Self.connection(limiter: limiter, from: "10.0.0.3")
        #expect(try third.readOutbound(as: ByteBuffer.self) == nil, "admitted")
        #expect(limiter.openConnections == 1)
    }

    @Test func thePerAddressCapCountsEachAddressAlone() throws {
        let limiter = Self.limiter(total: 10, perAddress: 2)
        #expect(limiter.admit("10.0.0.1") == nil)
        #expect(limiter.admit("10.0.0.1") == nil)
        #expect(limiter.admit("10.0.0.1") == .perAddress)
        #expect(limiter.admit("10.0.0.2") == nil)
        limiter.release("10.0.0.1")
        #expect(limiter.admit("10.0.0.1") == nil)
        #expect(limiter.openConnections == 3)
        let full = Self.limiter(total: 1, perAddress: 5)
        #expect(full.admit("10.0.0.1") == nil)
        #expect(full.admit("10.0.0.9") == .total)
    }

    @Test func theSocketBudgetStopsAcceptingAtItsSizeAndSaysSoOncePerInterval() {
        let lines = CapturedLines()
        let clock = ManualClock()
        var budget = SocketBudget(listener: "public", budget: 3, clock: clock, logger: lines.logger(level: .info))
        for _ in 0..<2 { budget.connectionOpened() }
        #expect(budget.isAcceptingNewConnections())
        budget.connectionOpened()
        #expect(!budget.isAcceptingNewConnections())
        budget.connectionClosed()
        #expect(budget.isAcceptingNewConnections())
        for _ in 0..<10 {
            budget.connectionOpened()
            budget.connectionClosed()
        }
        #expect(lines.count(of: "accepting paused") == 1)
        clock.advance(by: ConnectionLimiter.logInterval)
        budget.connectionOpened()
        #expect(lines.count(of: "accepting paused") == 2)
    }

    @Test func refusalsAreLoggedAtMostOncePerIntervalWithTheirCount() {
        let lines = CapturedLines()
        let clock = ManualClock()
        let limiter = Self.limiter(total: 1, clock: clock, logger: lines.logger(level: .info))
        #expect(limiter.admit("10.0.0.1") == nil)
        for _ in 0..<500 { _ = limiter.admit("10.0.0.2") }
        #expect(lines.count(of: "connections refused") == 1, "one line for a burst, not one per connection")
        clock.advance(by: ConnectionLimiter.logInterval)
        _ = limiter.admit("10.0.0.2")
        #expect(lines.count(of: "connections refused") == 2)
        #expect(lines.text.contains("refused=500"), "the second line counts the refusals it stands for")
        #expect(!lines.text.contains("10.0.0.2"), "client addresses are not logged")
    }
}

/// Log lines written through the server's log handler, kept in memory.
final class CapturedLines: TextOutputStream, Sendable {
    private let storage = Mutex("")

    func write(_ string: String) { storage.withLock { $0 += string } }

    /// Everything written.
    var text: String { storage.withLock { $0 } }

    /// Lines containing `fragment`.
    func count(of fragment: String) -> Int { text.split(separator: "\n").filter { $0.contains(fragment) }.count }

    /// A logger writing here through `tally serve`'s handler, every line at once.
    func logger(level: Logger.Level) -> Logger {
        let sink = LogSink(batching: false) { [self] bytes in write(String(decoding: bytes, as: UTF8.self)) }
        var logger = Logger(label: "tally.test") { LazyMetadataLogHandler(label: $0, sink: sink) }
        logger.logLevel = level
        return logger
    }
}
