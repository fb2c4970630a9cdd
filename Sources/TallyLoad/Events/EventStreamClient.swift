import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One server-sent event as a client reads it.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `event:` field (`message` when absent).
    public var name: String
    /// The `data:` lines, joined with newlines.
    public var data: String

    /// Creates an event.
    public init(name: String, data: String) {
        self.name = name
        self.data = data
    }
}

/// Splits a `text/event-stream` body into events (the WHATWG rules that matter here: `event:` and `data:`
/// fields, comments ignored, a blank line dispatches). Fed bytes in whatever pieces the network delivers.
public struct EventStreamParser: Sendable {
    private var line: [UInt8] = []
    private var name = ""
    private var data: [String] = []

    /// A parser at the start of a stream.
    public init() {}

    /// The events completed by `bytes`.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if let event = endLine() { events.append(event) }
            } else if byte != UInt8(ascii: "\r") {
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer { (name, data) = ("", []) }
            guard !data.isEmpty || !name.isEmpty else { return nil }
            return ServerSentEvent(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n"))
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            (field, value) = (Substring(text), "")
        }
        switch field {
        case "event": name = String(value)
        case "data": data.append(String(value))
        default: break
        }
        return nil
    }
}

/// A `GET` that stays open and hands each server-sent event to `onEvent` on the connection's event loop.
public final class EventStreamClient: Sendable {
    private let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Opens `path` on `host:port` with `headers`; returns once the response head is 200, else throws.
    public static func open(
        host: String, port: Int, path: String, headers: [(String, String)], group: any EventLoopGroup,
        onEvent: @escaping @Sendable (ServerSentEvent) -> Void
    ) async throws -> EventStreamClient {
        let opened = group.next().makePromise(of: Void.self)
        let bootstrap = ClientBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(EventStreamHandler(opened: opened, onEvent: onEvent))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port).get()
        } catch {
            opened.fail(LoadTransportError.connectFailed)
            throw LoadTransportError.connectFailed
        }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
        head.headers.add(name: "Host", value: host)
        head.headers.add(name: "Accept", value: "text/event-stream")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        do {
            try await opened.futureResult.get()
        } catch {
            try? await channel.close()
            throw error
        }
        return EventStreamClient(channel: channel)
    }

    /// Whether the server still holds the stream open.
    public var isOpen: Bool { channel.isActive }

    /// Closes the stream.
    public func close() async { try? await channel.close() }
}

/// Reads the response head (200 opens the stream) and parses the body into events.
private final class EventStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let opened: EventLoopPromise<Void>
    private let onEvent: @Sendable (ServerSentEvent) -> Void
    private var parser = EventStreamParser()

    init(opened: EventLoopPromise<Void>, onEvent: @escaping @Sendable (ServerSentEvent) -> Void) {
        self.opened = opened
        self.onEvent = onEvent
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if head.status == .ok {
                opened.succeed()
            } else {
                opened.fail(EventStreamError.status(Int(head.status.code)))
                context.close(promise: nil)
            }
        case .body(let buffer):
            for event in parser.feed(buffer.readableBytesView) { onEvent(event) }
        case .end:
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        opened.fail(LoadTransportError.connectionLost)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        opened.fail(LoadTransportError.connectionLost)
        context.close(promise: nil)
    }
}

/// Why an event stream did not open.
public enum EventStreamError: Error, Sendable, Hashable {
    /// The server answered with this status instead of 200.
    case status(Int)
}
