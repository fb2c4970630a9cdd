import Foundation
import TallyAPI

/// Opens one streamed call of the AI gateway through the client's streaming transport (the event stream's,
/// which delivers a body in pieces on Linux too): the session's bearer token, one refresh on 401, and retries
/// with the client's policy only for what the server refused before acting (no route, 429), since the gateway
/// does not replay streams: a stream that may have reached it is never sent twice.
struct AIStreamOpener {
    /// The route template metrics record.
    static let operation = "POST /v1/ai/chat/completions"
    /// The most of an error body read to report it.

    let client: Client

    /// Sends `body` (a Chat Completions request with `stream` set) and returns once the 200's head has come, its
    /// events still streaming; throws a ``ClientError`` for any other answer, or when no answer came.
    func open(body: Data) async throws -> StreamingResponse {
        let configuration = client.configuration
        let transport = client.streams.transport(configuration)
        let tokens = client.userTokens()  // the user it was asked for, never the next one
        var attempt = 0
        var refreshed = false
        while true {
            attempt += 1
            try Task.checkCancellation()
            let token = try await tokens.accessToken()
            let request = TransportRequest(
                method: "POST", path: AIGatewayProtocol.chatCompletionsPath,
                headers: ["Authorization": "Bearer \(token)", "Accept": "text/event-stream", "Content-Type": "application/json"],
                body: body, timeout: configuration.timeouts.ai)
            let started = DispatchTime.now().uptimeNanoseconds
            let failure: AttemptFailure
            let refusal: ClientError
            do {
                let response = try await transport.open(request)
                client.metrics.recordRequest(
                    operation: Self.operation, status: response.status, duration: RequestExecutor.seconds(since: started))
                if response.status == 200 { return response }
                if response.status == 401, !refreshed {
                    refreshed = true
                    try await tokens.refresh(after: token)
                    attempt -= 1
                    continue
                }
                (failure, refusal) = try await response.refusal()
            } catch let error as TransportError {
                client.metrics.recordRequest(operation: Self.operation, status: nil, duration: RequestExecutor.seconds(since: started))
                // A transport may report its cancelled request as a lost connection: the caller left, it is not offline.
                try Task.checkCancellation()
                failure = .transport(error)
                refusal = ClientError(error == .timedOut ? .timedOut : .offline)
            }
            let retry = configuration.retry
            guard let delay = retry.delay(afterAttempt: attempt, failure: failure, safeToRetry: false, unitRandom: configuration.random())
            else { throw refusal }
            client.metrics.recordRetry(operation: Self.operation)
            try await configuration.clock.sleep(for: delay)
        }
    }

}
