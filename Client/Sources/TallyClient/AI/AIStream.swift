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

/// A streamed answer of the AI gateway, made by ``AIClient/stream(_:estimate:intent:)``: the answer's events as the
/// model writes them, chunk by chunk (on Linux too), ending with the ``AIStreamEvent/charge``.
///
/// Nothing is sent until the sequence is iterated. An iteration of the same request and intent that starts while
/// an earlier one still streams (a double-tapped Send, a second screen showing the same question) joins it: one
/// request, one model call, one charge; it reads the answer from its start and ends as the first does. Otherwise
/// each iteration is one call (and one charge); pass another `intent` to ask the same thing twice at once. When a
/// call starts, the cached wallet shows the estimate held; the charge event's wallet then replaces it.
///
/// - A refusal before the answer throws a ``ClientError`` from the first `next()` (402 ``ClientError/Code/insufficientTokens``
///   with the server's wallet, confirmed in the cache; 429 ``ClientError/Code/rateLimited`` when the user has too many
///   calls in flight, after the retries the configuration allows; a 404 or 502 as ``ClientError/Code/server``).
/// - A failure after the answer began yields the charge event (what was generated is charged), then throws
///   ``ClientError/Code/server`` with the gateway's code (`upstream_failed`) and the wallet after the charge.
/// - A connection lost mid-answer throws ``ClientError/Code/offline`` (or ``ClientError/Code/timedOut`` after a
///   silence longer than ``Timeouts/ai``); the server charges what was generated, and the observed wallet is refetched.
/// - Cancelling the task that iterates, or leaving the loop, stops that iteration (it throws `CancellationError`);
///   when every iteration of the call has stopped, the request is cancelled: the connection closes, the server stops
///   the model and charges what was generated, and the observed wallet is refetched.
///
/// A stream is never sent again by itself once it may have reached the server (the gateway does not replay
/// streams): only a request refused before the server acted (no route, 429) is retried.
public struct AIStream: AsyncSequence, Sendable {
    /// One event of the answer.
    public typealias Element = AIStreamEvent

    let client: Client
    let request: ChatCompletionRequest
    let estimate: Int64?
    let intent: String?

    /// Starts the call (or joins the same one in flight) when first asked for an event.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    /// Reads the answer's events as the connection delivers them.
    public struct AsyncIterator: AsyncIteratorProtocol {
        private let stream: AIStream
        private var reader: AIStreamCall.Reader?
        private var index = 0
        private var ended = false

        init(stream: AIStream) { self.stream = stream }

        /// The next event; nil once the answer and its charge have come. Throws as ``AIStream`` describes.
        public mutating func next() async throws -> AIStreamEvent? {
            if ended { return nil }
            do {
                if reader == nil { reader = try stream.read() }
                guard let event = try await reader?.event(at: index) else {
                    end()
                    return nil
                }
                index += 1
                return event
            } catch {
                end()
                throw error
            }
        }

        /// Lets go of the call (the last reader to leave cancels it).
        private mutating func end() {
            ended = true
            reader = nil
        }
    }

    /// A reader of this request's call: the one streaming now for the same request and intent, else a new one.
    func read() throws -> AIStreamCall.Reader {
        var streamed = request
        streamed.stream = true
        let (request, body) = (streamed, try TallyJSON.encoder().encode(streamed))
        let key = IdempotencyKey.derive(method: "POST", path: AIGatewayProtocol.chatCompletionsPath, body: body, intent: intent ?? "")
        let (client, estimate) = (self.client, self.estimate)
        return client.aiStreams.read(key) { call in
            await Self.perform(call, client: client, request: request, body: body, estimate: estimate)
        }
    }

    /// Performs one call: shows the hold, opens the request, hands each event to `call`'s readers, and ends it.
    private static func perform(_ call: AIStreamCall, client: Client, request: ChatCompletionRequest, body: Data, estimate: Int64?) async {
        let hold = AIWalletHold.begin(client: client, estimate: await client.ai.resolvedEstimate(estimate, for: request))
        call.adopt(hold)
        let response: StreamingResponse
        do {
            response = try await AIStreamOpener(client: client).open(body: body)
        } catch {
            hold.settle(.failed(error))
            return call.end(error)
        }
        // The gateway relays events of at most ``AIGatewayProtocol/maxUpstreamEventBytes``, re-framed (a space after
        // each `data:`): twice that is room enough.
        var parser = EventStreamParser(limit: 2 * AIGatewayProtocol.maxUpstreamEventBytes)
        var interpreter = AIStreamInterpreter()
        do {
            for try await chunk in response.body {
                for event in try parser.feed(chunk) {
                    guard let event = interpreter.read(event) else { continue }
                    if let charge = event.charge { hold.settle(.charged(charge)) }
                    call.append(event)
                }
            }
        } catch {
            hold.settle(.unknown)
            if Task.isCancelled { return call.end(CancellationError()) }
            if let error = error as? TransportError { return call.end(ClientError(error == .timedOut ? .timedOut : .offline)) }
            if let error = error as? EventStreamParser.TooLarge {
                return call.end(ClientError(.invalidResponse, message: "the gateway's stream: \(error)"))
            }
            return call.end(error)
        }
        // The body ended: the answer is over, failed, or was cut (the hold, if no charge came, settles unknown).
        if interpreter.charge == nil { hold.settle(.unknown) }
        switch interpreter.ending {
        case .complete: call.end(nil)
        case _ where Task.isCancelled: call.end(CancellationError())
        case .failed(let error): call.end(error)
        case .cut: call.end(ClientError(.offline, message: "the connection dropped before the answer was complete"))
        }
    }
}
