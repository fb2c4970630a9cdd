import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization

/// The AI gateway's connection to its upstream: one `HTTPClient` (a connection pool, TLS for a hosted provider)
/// that posts Chat Completions with the server's key. A service: it lives until the application shuts down.
final class UpstreamClient: Service, Sendable {
    let upstream: AIUpstream
    /// Made on the first call (a server that never calls its upstream, or routes built and never served, open
    /// nothing), shut down with the application.
    private let client = Mutex<(client: HTTPClient?, closed: Bool)>((nil, false))
    /// The most one read of an answer may wait for its next bytes.
    static let idleTimeoutSeconds: Int64 = 60

    init(upstream: AIUpstream) {
        self.upstream = upstream
    }

    /// The pool, made on first use; `nil` once the application shut it down.
    private func pool() throws -> HTTPClient {
        try client.withLock { state in
            if let made = state.client { return made }
            guard !state.closed else { throw HTTPClientError.alreadyShutdown }
            var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(10), read: .seconds(Self.idleTimeoutSeconds)))
            // Streams are long-lived and many: a generous pool per host, kept open between calls.
            configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 4_096)
            configuration.decompression = .disabled
            let made = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            state.client = made
            return made
        }
    }

    /// Posts `body` (a Chat Completions request) to `<baseURL>/chat/completions`; the answer's head within the
    /// upstream's timeout. Cancelling the calling task closes the connection (the provider stops generating).
    func post(_ body: UpstreamBody) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: upstream.baseURL + "/chat/completions")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json, text/event-stream")
        if let key = upstream.apiKey { request.headers.add(name: "Authorization", value: "Bearer " + key) }
        request.body = body.parts.count == 1 ? .bytes(body.parts[0]) : .stream(body, length: .known(Int64(body.count)))
        return try await pool().execute(request, timeout: .seconds(upstream.timeout.components.seconds))
    }

    /// Waits for the application's graceful shutdown, then closes the pool.
    func run() async throws {
        try? await gracefulShutdown()
        let made = client.withLock { state in
            state.closed = true
            defer { state.client = nil }
            return state.client
        }
        try await made?.shutdown()
    }

    deinit {
        // Routes built but never served as a service (an embedding app's tests): close without waiting.
        client.withLock { $0.client }?.shutdown { _ in }
    }
}

/// A Chat Completions body in parts sent one after the other: a client's `messages` (megabytes of base64) as its
/// request buffer holds them, between the gateway's own fields, copied by no one but the kernel. A small body is one
/// buffer.
struct UpstreamBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    /// The parts, in order.
    let parts: [ByteBuffer]
    /// The body's length in bytes.
    let count: Int

    /// `parts`, joined into one buffer when they are small together.
    init(parts: [ByteBuffer]) {
        count = parts.reduce(0) { $0 + $1.readableBytes }
        self.parts = count > Self.joinedBytes && parts.count > 1 ? parts : [Self.join(parts, count: count)]
    }

    /// Bodies up to this size are sent as one buffer.
    static let joinedBytes = 64 * 1024

    /// The whole body in one buffer (tests).
    var joined: ByteBuffer { Self.join(parts, count: count) }

    private static func join(_ parts: [ByteBuffer], count: Int) -> ByteBuffer {
        var joined = ByteBufferAllocator().buffer(capacity: count)
        for var part in parts { joined.writeBuffer(&part) }
        return joined
    }

    func makeAsyncIterator() -> Iterator { Iterator(parts: parts[...]) }

    /// Hands out the parts.
    struct Iterator: AsyncIteratorProtocol {
        var parts: ArraySlice<ByteBuffer>

        mutating func next() async -> ByteBuffer? { parts.popFirst() }
    }
}
