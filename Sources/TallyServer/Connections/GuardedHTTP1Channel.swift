import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1.1 child channel with Tally's connection guards around it: a
/// ``ConnectionGuardHandler`` in front of the HTTP decoder (connection caps, first-byte times), a
/// ``RequestDeadlineHandler`` after it (header and body timeouts), and Hummingbird's own idle timeout.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let http1: HTTP1Channel
    let limiter: ConnectionLimiter

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let guardHandler = ConnectionGuardHandler(limiter: limiter)
        do {
            try channel.pipeline.syncOperations.addHandler(guardHandler)
            if let options = channel.syncOptions {
                try options.setOption(ChannelOptions.recvAllocator, value: Self.readSizes)
                try options.setOption(ChannelOptions.maxMessagesPerRead, value: 1)
            }
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        // Hummingbird runs `setup` on the channel's event loop.
        return http1.setup(channel: channel, logger: logger).assumeIsolated().flatMapThrowing { value in
            guardHandler.deadlines = try channel.pipeline.syncOperations.handler(type: RequestDeadlineHandler.self)
            return value
        }.nonisolated()
    }

    /// Reads that grow with what a connection sends, up to 256 KiB: an upload of megabytes (a chat body with images)
    /// then takes a quarter of the reads, wake-ups and window updates of NIO's default 64 KiB ceiling, and a burst of
    /// 8 MiB images answers sooner. A request of a few hundred bytes still reads into a small buffer. One read a
    /// connection before the event loop turns (`maxMessagesPerRead` 1, NIO's default 4), so a turn copies at most
    /// 256 KiB an uploading connection and a small request sharing the loop is not kept waiting: a bystander's p99
    /// during such a burst is 30-34 ms with 256 KiB, 42-45 with 384 KiB, 44-71 with 512 KiB, over 50 with 1 MiB or
    /// 4 reads a turn (benchmarks/bench-ai-reads-2026-11-28-458cc07.md, bench-ai-in-place-2026-11-29-8a55053.md).
    static let readSizes = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 256 * 1024)

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with `settings`' timeouts, counting connections in `limiter`.
    static func guardedHTTP1(_ settings: ConnectionSettings, limiter: ConnectionLimiter) -> HTTPServerBuilder {
        let header = TimeAmount(settings.headerTimeout)
        let request = TimeAmount(settings.requestTimeout)
        let configuration = HTTP1Channel.Configuration(
            additionalChannelHandlers: [RequestDeadlineHandler(headerTimeout: header, requestTimeout: request)],
            idleTimeout: TimeAmount(settings.idleTimeout))
        return HTTPServerBuilder { responder in
            GuardedHTTP1Channel(http1: HTTP1Channel(responder: responder, configuration: configuration), limiter: limiter)
        }
    }
}
