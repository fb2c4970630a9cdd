import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import TallyClient

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
        let bootstrap = LoadConnection.bootstrap(group: group) { EventStreamHandler(opened: opened, onEvent: onEvent) }
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
            do {
                for event in try parser.feed(buffer.readableBytesView) { onEvent(event) }
            } catch {
                context.close(promise: nil)  // an event beyond the parser's bound: the stream is broken
            }
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
