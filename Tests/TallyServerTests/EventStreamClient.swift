import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TallyAPI
import Testing

/// A Server-Sent Events client for `GET /v1/sync/events` (and AI streams): one HTTP/1.1 connection whose response
/// body is parsed, as it arrives, into events, comments and `retry` fields by TallyAPI's `EventStreamParser`.
final class EventStreamClient: Sendable {
    /// One thing the stream sent.
    enum Item: Sendable, Equatable, CustomStringConvertible {
        case event(name: String, id: String?, data: String)
        case comment(String)
        case retry(Int)
        /// The response ended (or the connection closed).
        case end

        var description: String {
            switch self {
            case .event(let name, let id, let data): "event \(name) id=\(id ?? "-") \(data)"
            case .comment(let text): ": \(text)"
            case .retry(let millis): "retry \(millis)"
            case .end: "end"
            }
        }
    }

    /// The response head.
    struct Head: Sendable {
        let status: Int
        let headers: [(String, String)]
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    private struct State {
        var head: Head?
        var headWaiter: CheckedContinuation<Head, any Error>?
        var items: [Item] = []
        var itemWaiter: CheckedContinuation<Item, any Error>?
        var body: [UInt8] = []
        var parser = EventStreamParser()
        var ended = false
    }

    /// The state the client and its channel handler share.
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    private let channel: any Channel
    private let shared: Shared

    private init(channel: any Channel, shared: Shared) {
        self.channel = channel
        self.shared = shared
    }

    /// Opens `path` on 127.0.0.1:`port` with `token` and `headers` (a POST when there is a JSON `body`, as a
    /// streamed chat completion is asked for); returns once the response head arrived.
    static func open(
        port: Int, token: String?, path: String = "/v1/sync/events", headers: [(String, String)] = [], json body: [UInt8]? = nil
    ) async throws -> (EventStreamClient, Head) {
        let client = try await connect(port: port)
        var head = HTTPRequestHead(version: .http1_1, method: body == nil ? .GET : .POST, uri: path)
        head.headers.add(name: "Host", value: "127.0.0.1")
        head.headers.add(name: "Accept", value: "text/event-stream")
        if let token { head.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: "\(body.count)")
        }
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        client.channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body { client.channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
        try await client.channel.writeAndFlush(HTTPClientRequestPart.end(nil))
        return (client, try await client.head(within: .seconds(20)))
    }

    private static func connect(port: Int) async throws -> EventStreamClient {
        let shared = Shared()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(Handler(shared: shared))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return EventStreamClient(channel: channel, shared: shared)
    }

    /// The next item, waiting at most `limit` (real time: a guard against a hang, not a pause).
    func next(within limit: Duration = .seconds(20)) async throws -> Item {
        try await withThrowingTaskGroup(of: Item.self) { group in
            group.addTask { try await self.take() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw HarnessError("no event within \(limit)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Reads the stream's opening: a comment of 2 KiB, spaces only, which must be the first bytes of the body (what
    /// keeps Apple's URLSession from holding back the stream's head and first events).
    func expectOpening(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let item = try await next()
        guard case .comment(let text) = item, text.allSatisfy({ $0 == " " }) else {
            throw HarnessError("the stream did not open with its comment: \(item)")
        }
        let opening = ":" + String(repeating: " ", count: 2045) + "\n\n"
        #expect(body.hasPrefix(opening), "the body's first 2 KiB are not the opening comment", sourceLocation: sourceLocation)
    }

    /// The next event (skipping `retry` and heartbeat comments), within `limit` in all.
    func nextEvent(within limit: Duration = .seconds(20)) async throws -> Item {
        let deadline = ContinuousClock.now + limit
        while true {
            let item = try await next(within: max(deadline - ContinuousClock.now, .zero))
            switch item {
            case .retry, .comment: continue
            default: return item
            }
        }
    }

    /// The body received so far, as text.
    var body: String { String(decoding: shared.state.withLock { $0.body }, as: UTF8.self) }

    /// Closes the connection from this side.
    func close() async { try? await channel.close() }

    private func head(within limit: Duration) async throws -> Head {
        try await withThrowingTaskGroup(of: Head.self) { group in
            group.addTask {
                try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        let head = self.shared.state.withLock { state -> Result<Head, any Error>? in
                            if let head = state.head { return .success(head) }
                            if Task.isCancelled { return .failure(CancellationError()) }
                            state.headWaiter = continuation
                            return nil
                        }
                        if let head { continuation.resume(with: head) }
                    }
                } onCancel: {
                    self.shared.state.withLock { state in defer { state.headWaiter = nil }; return state.headWaiter }?
                        .resume(throwing: CancellationError())
                }
            }
            group.addTask {
                try await Task.sleep(for: limit)
                throw HarnessError("no response head within \(limit)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    private func take() async throws -> Item {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Checked under the lock: a cancellation before the waiter is stored must not leave it waiting.
                let item = shared.state.withLock { state -> Result<Item, any Error>? in
                    if !state.items.isEmpty { return .success(state.items.removeFirst()) }
                    if state.ended { return .success(.end) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.itemWaiter = continuation
                    return nil
                }
                if let item { continuation.resume(with: item) }
            }
        } onCancel: {
            shared.state.withLock { state in defer { state.itemWaiter = nil }; return state.itemWaiter }?.resume(throwing: CancellationError())
        }
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPClientResponsePart
        let shared: Shared
        init(shared: Shared) { self.shared = shared }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                let parsed = Head(status: Int(head.status.code), headers: head.headers.map { ($0.name, $0.value) })
                shared.state.withLock { state in defer { state.headWaiter = nil }; state.head = parsed; return state.headWaiter }?
                    .resume(returning: parsed)
            case .body(let buffer):
                feed(Array(buffer.readableBytesView), context: context)
            case .end:
                finish()
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            shared.state.withLock { state in defer { state.headWaiter = nil }; return state.headWaiter }?
                .resume(throwing: HarnessError("the connection closed before a response head"))
            finish()
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

        /// Parses the bytes into items (TallyAPI's `EventStreamParser`, the one the SDK and the relay use), handing
        /// each to a waiter or the queue; a line beyond the parser's bound closes the connection.
        private func feed(_ bytes: [UInt8], context: ChannelHandlerContext) {
            let (waiter, item, tooLarge) = shared.state.withLock { state -> (CheckedContinuation<Item, any Error>?, Item?, Bool) in
                state.body += bytes
                var tooLarge = false
                do {
                    try state.parser.feed(bytes) { item in
                        switch item {
                        case .event(let event):
                            state.items.append(.event(name: event.type, id: event.id, data: String(decoding: event.data, as: UTF8.self)))
                        case .comment(let text): state.items.append(.comment(text))
                        case .retry(let millis): state.items.append(.retry(millis))
                        }
                    }
                } catch {
                    tooLarge = true
                }
                guard let waiter = state.itemWaiter, !state.items.isEmpty else { return (nil, nil, tooLarge) }
                state.itemWaiter = nil
                return (waiter, state.items.removeFirst(), tooLarge)
            }
            if let waiter, let item { waiter.resume(returning: item) }
            if tooLarge { context.close(promise: nil) }
        }

        private func finish() {
            let waiter = shared.state.withLock { state -> CheckedContinuation<Item, any Error>? in
                state.ended = true
                guard state.items.isEmpty else { return nil }
                defer { state.itemWaiter = nil }
                return state.itemWaiter
            }
            waiter?.resume(returning: .end)
        }
    }
}
