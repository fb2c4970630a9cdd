import Foundation
import TallyAPI

/// What the server's event stream (`GET /v1/sync/events`) tells the client (``LiveEvents``).
enum ServerEvent: Sendable, Hashable {
    /// A stream opened: what changes from now on is announced. Pull now; the pull covers what came before.
    case connected
    /// The user's documents changed up to `cursor`: pull from your own cursor (the event is a hint, not data).
    case changed(cursor: String)
    /// The wallet and quotas as the server read them when it sent the event.
    case wallet(SyncWalletEvent)
    /// The stream ended or could not be opened, and is being reopened with backoff: live events are not
    /// arriving (a status badge shows offline). Told once per outage.
    case disconnected
}

/// The one live connection of a signed-in client to `GET /v1/sync/events`: opens it with the session's access
/// token, hands each event on, and reopens it with backoff whenever it ends or fails, resuming with
/// `Last-Event-ID` from the last `changed` event seen.
///
/// ``LiveEvents`` runs ``run(onEvent:)`` in a task of its own and cancels that task to stop it.
struct ServerEventStream: Sendable {
    /// The path of the event stream.
    static let path = "/v1/sync/events"
    /// Reopen forever: full jitter under a ceiling of 1 s doubling to 60 s, and any Retry-After honoured.
    static let reconnect = RetryPolicy(maxAttempts: .max, baseDelay: 1, multiplier: 2, maxDelay: 60, maxRetryAfter: .infinity)
    /// The longest silence before a connection counts as dropped: three of the server's 15 s heartbeats.
    static let idleTimeout: TimeInterval = 45

    let transport: any EventStreamTransport
    let clock: any TallyClock
    let retry: RetryPolicy
    let offlineRetry: RetryPolicy
    let random: @Sendable () -> Double
    let lastEventId: String
    let token: @Sendable (_ refused: String?) async throws -> String
    let reachability: Reachability?

    /// A stream that waits on `clock` between attempts (`retry.delay` after a refusal worth retrying,
    /// `offlineRetry.delay` — `retry` when nil — after no answer, with a draw of `random`, and at least the server's
    /// `retry:`), a wait that a sign of `reachability` (``LiveEvents`` passes the client's) ends at once when
    /// ``SyncSchedule/ends(_:on:)`` says so; resumes from `lastEventId` (the pull cursor, if there is one), and gets
    /// its access token from `token`: called with nil for each connection, and with the token the server refused
    /// (401) so the session refreshes it once before the next.
    init(
        transport: any EventStreamTransport, clock: any TallyClock, retry: RetryPolicy = Self.reconnect, offlineRetry: RetryPolicy? = nil,
        random: @escaping @Sendable () -> Double, lastEventId: String? = nil, reachability: Reachability? = nil,
        token: @escaping @Sendable (_ refused: String?) async throws -> String
    ) {
        self.transport = transport
        self.clock = clock
        self.retry = retry
        self.offlineRetry = offlineRetry ?? retry
        self.random = random
        self.lastEventId = lastEventId ?? ""
        self.reachability = reachability
        self.token = token
    }

    /// Keeps the stream open until the calling task is cancelled (then throws `CancellationError`, with the
    /// request cancelled), handing each event to `onEvent` in order. Throws a ``ClientError`` when retrying
    /// cannot help: the server refused the stream with a status other than 401, 408, 429 or 5xx (403, 404), a
    /// second 401 after a refresh, or a `token` that throws `unauthorized` (signed out).
    func run(onEvent: @Sendable (ServerEvent) async -> Void) async throws {
        var lastEventId = lastEventId
        var serverDelay: TimeInterval = 0
        var failures = 0
        var refused: String?
        var online: Bool?
        while true {
            try Task.checkCancellation()
            var parser = EventStreamParser(lastEventId: lastEventId)
            // The signs after this count for the wait that follows a failure (after a live connection: its end).
            var sentAt = reachability?.generation ?? 0
            let failure: AttemptFailure
            var refusal: ClientError?
            do {
                let token = try await self.token(refused)
                let response = try await transport.open(request(token: token, lastEventId: lastEventId))
                if response.status == 401, refused == nil {
                    refused = token
                    continue
                }
                refused = nil
                if response.status == 200 {
                    online = true
                    await onEvent(.connected)
                    for try await chunk in response.body {
                        // An event beyond the parser's bound is a broken stream: dropped, as a lost connection is.
                        guard let events = try? parser.feed(chunk) else { break }
                        for event in events {
                            guard let event = Self.decode(event) else { continue }
                            failures = 0  // a connection that delivers starts the backoff over, however it ends
                            await onEvent(event)
                        }
                    }
                    failure = .transport(.connectionLost)
                    sentAt = reachability?.generation ?? 0
                } else {
                    (failure, refusal) = try await response.refusal()
                }
            } catch let error as TransportError {
                failure = .transport(error)
            } catch let error as ClientError where [.offline, .timedOut, .rateLimited, .server].contains(error.code) {
                failure = .transport(.offline)  // the token's refresh could not reach the server
            } catch is CancellationError where !Task.isCancelled {
                // A request ended as cancelled though this task was not: a lost connection, never the end of the stream.
                failure = .transport(.connectionLost)
            }
            lastEventId = parser.lastEventId
            serverDelay = parser.reconnectionDelay ?? serverDelay
            // A transport may report its cancelled request as a lost connection: the caller left, it is not offline.
            try Task.checkCancellation()
            if online != false {
                online = false
                await onEvent(.disconnected)
            }
            failures += 1
            let kind: SyncWait
            switch SyncSchedule.failure(failure) {
            case .unreachable: kind = .unreachable
            case .busy(let retryAfter): kind = retryAfter == nil ? .busy : .serverAsked
            case .refused: kind = .serverAsked  // 403, 404: the policy stops (a test's may go on, on the clock only)
            }
            let policy = kind == .unreachable ? offlineRetry : retry
            guard let delay = policy.delay(afterAttempt: failures, failure: failure, safeToRetry: true, unitRandom: random()) else {
                throw refusal ?? ClientError(.offline)
            }
            if let reachability {
                _ = try await reachability.wait(max(delay, serverDelay), kind, after: sentAt)
            } else {
                try await clock.sleep(for: max(delay, serverDelay))
            }
        }
    }

    private func request(token: String, lastEventId: String) -> TransportRequest {
        var headers = ["Authorization": "Bearer \(token)", "Accept": "text/event-stream"]
        if !lastEventId.isEmpty { headers["Last-Event-ID"] = lastEventId }
        return TransportRequest(method: "GET", path: Self.path, headers: headers, timeout: Self.idleTimeout)
    }

    /// The events the engine acts on; anything else (an unknown name, data that does not decode) is skipped:
    /// events are hints, and the next pull or connection catches up.
    private static func decode(_ event: ServerSentEvent) -> ServerEvent? {
        let data = Data(event.data.utf8)
        switch event.name {
        case "changed": return (try? TallyJSON.decoder().decode(SyncChangedEvent.self, from: data)).map { .changed(cursor: $0.cursor) }
        case "wallet": return (try? TallyJSON.decoder().decode(SyncWalletEvent.self, from: data)).map { .wallet($0) }
        default: return nil
        }
    }

}
