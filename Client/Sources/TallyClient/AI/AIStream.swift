import Foundation
import TallyAPI

/// One event of a streamed answer (``AIStream``): text as the model writes it, then what the call cost.
///
/// Each chunk of the answer is one event with its ``content``; the chunk that ends the answer has a
/// ``finishReason``; the last event has the ``charge`` (and no text). A struct rather than an enum, so that
/// what later versions add never breaks an app's code.
public struct AIStreamEvent: Sendable, Hashable {
    /// The text this chunk adds to the answer (empty in events that carry none, such as the charge).
    public var content: String
    /// Why the answer ended (`stop`, `length`, …), in the chunk that ends it.
    public var finishReason: String?
    /// The provider's token counts, in their own event, when the request asked for them
    /// (`streamOptions: ChatStreamOptions(includeUsage: true)`).
    public var usage: ChatUsage?
    /// What the call was charged and the wallet after it, in the last event (the cached wallet already shows it).
    public var charge: AICharge?

    /// Creates an event (an app's tests can make the events the SDK yields).
    public init(content: String = "", finishReason: String? = nil, usage: ChatUsage? = nil, charge: AICharge? = nil) {
        self.content = content
        self.finishReason = finishReason
        self.usage = usage
        self.charge = charge
    }
}

/// A streamed answer of the AI gateway, made by ``AIClient/stream(_:estimate:)``: the answer's events as the
/// model writes them, chunk by chunk (on Linux too), ending with the ``AIStreamEvent/charge``.
///
/// Nothing is sent until the sequence is iterated, and each iteration is one call (and one charge). When it
/// starts, the cached wallet shows the estimate held; the charge event's wallet then replaces it.
///
/// - A refusal before the answer throws a ``ClientError`` from the first `next()` (402 ``ClientError/Code/insufficientTokens``
///   with the server's wallet, confirmed in the cache; 429 ``ClientError/Code/rateLimited`` when the user has too many
///   calls in flight, after the retries the configuration allows; a 404 or 502 as ``ClientError/Code/server``).
/// - A failure after the answer began yields the charge event (what was generated is charged), then throws
///   ``ClientError/Code/server`` with the gateway's code (`upstream_failed`) and the wallet after the charge.
/// - A connection lost mid-answer throws ``ClientError/Code/offline`` (or ``ClientError/Code/timedOut`` after a
///   silence longer than ``Timeouts/ai``); the server charges what was generated, and the observed wallet is refetched.
/// - Cancelling the task that iterates, or leaving the loop, cancels the request: the connection closes, the
///   server stops the model and charges what was generated; the observed wallet is refetched.
///
/// A stream is never sent again by itself once it may have reached the server (the gateway does not replay
/// streams): only a request refused before the server acted (no route, 429) is retried.
public struct AIStream: AsyncSequence, Sendable {
    /// One event of the answer.
    public typealias Element = AIStreamEvent

    let client: Client
    let request: ChatCompletionRequest
    let estimate: Int64?

    /// Starts the call when first asked for an event.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    /// Reads the answer's events as the connection delivers them.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private enum Phase {
            case idle, streaming, ended
        }

        private let stream: AIStream
        private var phase = Phase.idle
        private var hold: AIWalletHold?
        private var body: AsyncThrowingStream<Data, any Error>.AsyncIterator?
        /// The gateway relays events of at most ``AIGatewayProtocol/maxUpstreamEventBytes``, re-framed (a space after
        /// each `data:`): twice that is room enough.
        private var parser = EventStreamParser(limit: 2 * AIGatewayProtocol.maxUpstreamEventBytes)
        private var interpreter = AIStreamInterpreter()
        private var pending: [ServerSentEvent] = []

        init(stream: AIStream) { self.stream = stream }

        /// The next event; nil once the answer and its charge have come. Throws as ``AIStream`` describes.
        public mutating func next() async throws -> AIStreamEvent? {
            switch phase {
            case .ended: return nil
            case .idle: try await open()
            case .streaming: break
            }
            do {
                while true {
                    while !pending.isEmpty {
                        guard let event = interpreter.read(pending.removeFirst()) else { continue }
                        if let charge = event.charge { hold?.settle(.charged(charge)) }
                        return event
                    }
                    guard let chunk = try await body?.next() else { return try finish() }
                    pending = try parser.feed(chunk)
                }
            } catch {
                end()
                hold?.settle(.unknown)
                if Task.isCancelled { throw CancellationError() }
                if let error = error as? TransportError { throw ClientError(error == .timedOut ? .timedOut : .offline) }
                if let error = error as? EventStreamParser.TooLarge { throw ClientError(.invalidResponse, message: "the gateway's stream: \(error)") }
                throw error
            }
        }

        /// Shows the hold and opens the request; a refusal settles the hold and is thrown.
        private mutating func open() async throws {
            phase = .ended  // until the head has come
            let estimate = await stream.client.ai.resolvedEstimate(stream.estimate, for: stream.request)
            let hold = AIWalletHold.begin(client: stream.client, estimate: estimate)
            self.hold = hold
            do {
                var request = stream.request
                request.stream = true
                let response = try await AIStreamOpener(client: stream.client).open(body: try TallyJSON.encoder().encode(request))
                body = response.body.makeAsyncIterator()
                phase = .streaming
            } catch {
                hold.settle(.failed(error))
                throw error
            }
        }

        /// The body ended: the answer is over, failed, or was cut (the hold, if no charge came, settles unknown).
        private mutating func finish() throws -> AIStreamEvent? {
            end()
            let ending = interpreter.ending
            if interpreter.charge == nil { hold?.settle(.unknown) }
            switch ending {
            case .complete: return nil
            case _ where Task.isCancelled: throw CancellationError()
            case .failed(let error): throw error
            case .cut: throw ClientError(.offline, message: "the connection dropped before the answer was complete")
            }
        }

        /// Lets go of the connection (dropping the body cancels its request).
        private mutating func end() {
            phase = .ended
            body = nil
            pending = []
        }
    }
}
