import Foundation
import TallyTestKit
import Testing

@testable import TallyClient

/// ``ServerEventStream`` over a scripted transport and a ``ManualClock``: how it treats a request that ends as cancelled
/// when the stream itself was not.
@Suite("Server event stream, scripted", .timeLimit(.minutes(1)))
struct ServerEventStreamUnitTests {
    /// Answers every open with a 200 whose body the test ends, handing the test each body's continuation.
    final class ScriptedStreams: EventStreamTransport {
        let bodies: AsyncStream<AsyncThrowingStream<Data, any Error>.Continuation>
        private let opened: AsyncStream<AsyncThrowingStream<Data, any Error>.Continuation>.Continuation

        init() { (bodies, opened) = AsyncStream.makeStream() }

        func open(_ request: TransportRequest) async throws -> StreamingResponse {
            let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
            opened.yield(continuation)
            return StreamingResponse(status: 200, headers: ["Content-Type": "text/event-stream"], body: body)
        }
    }

    @Test("A body that ends as cancelled while the stream's task is not is a lost connection: the stream opens again")
    func cancelledRequestReconnects() async throws {
        let (transport, clock) = (ScriptedStreams(), ManualClock())
        let stream = ServerEventStream(transport: transport, clock: clock, random: { 0.5 }) { _ in "token" }
        let (events, sink) = AsyncStream.makeStream(of: ServerEvent.self)
        let running = Task {
            defer { sink.finish() }
            try await stream.run { sink.yield($0) }
        }
        defer { running.cancel() }
        var bodies = transport.bodies.makeAsyncIterator()
        var received = events.makeAsyncIterator()

        let first = try #require(await bodies.next())
        #expect(await received.next() == .connected)
        first.finish(throwing: CancellationError())  // URLSession's "cancelled", no cancel of ours
        try #require(await received.next() == .disconnected, "the stream ended")
        try await clock.waitForSleepers(1)
        clock.advance(by: 60)
        _ = try #require(await bodies.next(), "the stream ended instead of opening again")
        #expect(await received.next() == .connected)
    }
}
