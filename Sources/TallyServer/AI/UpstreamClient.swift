import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// The AI gateway's connection to its upstream: one `HTTPClient` (a connection pool, TLS for a hosted provider)
/// that posts Chat Completions with the server's key. A service: it lives until the application shuts down.
final class UpstreamClient: Service, Sendable {
    let upstream: AIUpstream
    private let client: HTTPClient
    /// The most one read of an answer may wait for its next bytes.
    static let idleTimeoutSeconds: Int64 = 60

    init(upstream: AIUpstream) {
        self.upstream = upstream
        var configuration = HTTPClient.Configuration(
            timeout: .init(connect: .seconds(10), read: .seconds(Self.idleTimeoutSeconds)))
        // Streams are long-lived and many: a generous pool per host, kept open between calls.
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 4_096)
        configuration.decompression = .disabled
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Posts `body` (a Chat Completions request) to `<baseURL>/chat/completions`; the answer's head within the
    /// upstream's timeout. Cancelling the calling task closes the connection (the provider stops generating).
    func post(_ body: [UInt8]) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: upstream.baseURL + "/chat/completions")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json, text/event-stream")
        if let key = upstream.apiKey { request.headers.add(name: "Authorization", value: "Bearer " + key) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let seconds = upstream.timeout.components.seconds
        return try await client.execute(request, timeout: .seconds(seconds))
    }

    /// Waits for the application's graceful shutdown, then closes the pool.
    func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}
