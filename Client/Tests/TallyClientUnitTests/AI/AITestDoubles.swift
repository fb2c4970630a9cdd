import Foundation
import Synchronization
import TallyAPI
import TallyClient
import TallyTestKit

/// A stand-in for the server's AI gateway, for the SDK's AI tests without a server: answers the guest sign-in,
/// refreshes, the wallet, and hands `POST /v1/ai/chat/completions` and `GET /v1/ai/daily/…` to the test's
/// handlers. Records every request.
final class AIStubServer: HTTPTransport {
    typealias Handler = @Sendable (TransportRequest) async throws -> TransportResponse

    private struct State {
        var wallet = Wallet(balance: 100, held: 0, version: 1)
        var requests: [TransportRequest] = []
        var chat: Handler?
        var daily: Handler?
        var tokens = 0
    }

    private let state = Mutex(State())

    /// The wallet `GET /v1/wallet` answers.
    var wallet: Wallet {
        get { state.withLock { $0.wallet } }
        set { state.withLock { $0.wallet = newValue } }
    }

    /// Every request seen, in order.
    var requests: [TransportRequest] { state.withLock { $0.requests } }

    /// The requests whose path starts with `prefix`.
    func requests(to prefix: String) -> [TransportRequest] { requests.filter { $0.path.hasPrefix(prefix) } }

    /// Answers chat completions with `handler`.
    func onChat(_ handler: @escaping Handler) { state.withLock { $0.chat = handler } }

    /// Answers daily generations with `handler`.
    func onDaily(_ handler: @escaping Handler) { state.withLock { $0.daily = handler } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (chat, daily, wallet, token) = state.withLock { state in
            state.requests.append(request)
            state.tokens += 1
            return (state.chat, state.daily, state.wallet, state.tokens)
        }
        switch request.path {
        case "/v1/auth/guest", "/v1/auth/refresh":
            return try Self.json(SessionTokens(userId: "u1", isGuest: true, accessToken: "access-\(token)", refreshToken: "refresh-\(token)", expiresIn: 900))
        case "/v1/wallet":
            return try Self.json(wallet)
        case AIGatewayProtocol.chatCompletionsPath:
            guard let chat else { return Self.error(404, .notFound) }
            return try await chat(request)
        case let path where path.hasPrefix("/v1/ai/daily/"):
            guard let daily else { return Self.error(404, .notFound) }
            return try await daily(request)
        default:
            return Self.error(404, .notFound)
        }
    }

    /// A 200 with `value` as JSON.
    static func json(_ value: some Encodable, headers: [String: String] = [:]) throws -> TransportResponse {
        TransportResponse(status: 200, headers: headers.merging(["Content-Type": "application/json"]) { a, _ in a }, body: try TallyJSON.encoder().encode(value))
    }

    /// The server's error body, with the wallet and quotas of a refusal.
    static func error(_ status: Int, _ code: ErrorCode, wallet: Wallet? = nil, retryAfter: Int? = nil) -> TransportResponse {
        let body = ErrorResponse(error: ErrorDetail(code: code, message: "stub \(status)"), wallet: wallet, quotas: [])
        var headers = ["Content-Type": "application/json"]
        if let retryAfter { headers["Retry-After"] = String(retryAfter) }
        return TransportResponse(status: status, headers: headers, body: (try? TallyJSON.encoder().encode(body)) ?? Data())
    }
}

/// A stand-in streaming transport: each open takes the next scripted answer; a 200's body is fed by the test
/// (``AIStubStreams/Connection``), and its end (a reader that stops, a cancelled task) is recorded.
final class AIStubStreams: EventStreamTransport {
    /// One open's answer.
    enum Answer: Sendable {
        /// A 200 whose body the test feeds through the connection it is handed.
        case stream
        /// This status with the server's error body.
        case status(TransportResponse)
        /// No answer.
        case fail(TransportError)
    }

    /// A 200's body as the test feeds it.
    struct Connection: Sendable {
        let continuation: AsyncThrowingStream<Data, any Error>.Continuation

        /// Sends `text` as the next piece of the body.
        func send(_ text: String) { continuation.yield(Data(text.utf8)) }
        /// Sends one `data:` event.
        func data(_ text: String) { send("data: \(text)\n\n") }
        /// Ends the body (the server closed the response), or drops it with `error`.
        func end(_ error: TransportError? = nil) {
            if let error { continuation.finish(throwing: error) } else { continuation.finish() }
        }
    }

    private struct State {
        var answers: [Answer] = []
        var requests: [TransportRequest] = []
        var terminations: [String] = []
        var terminationWaiters: [(count: Int, continuation: CheckedContinuation<[String], Never>)] = []
    }

    private let state = Mutex(State())
    private let opened: AsyncStream<Connection>.Continuation
    /// The connections of the 200s, as they open.
    let connections: AsyncStream<Connection>

    init() { (connections, opened) = AsyncStream.makeStream(of: Connection.self) }

    /// Scripts the next opens' answers, in order (a 200 stream when none is left).
    func enqueue(_ answers: [Answer]) { state.withLock { $0.answers += answers } }

    /// Every request opened, in order.
    var requests: [TransportRequest] { state.withLock { $0.requests } }

    /// How each 200's body ended for its reader: `finished` (read to its end) or `cancelled` (the reader left,
    /// which cancels a real request), in order.
    var terminations: [String] { state.withLock { $0.terminations } }

    /// The terminations once there are at least `count` (a shared call is cancelled by a task of its own, just after
    /// its last reader left).
    func waitForTerminations(_ count: Int) async -> [String] {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> [String]? in
                if state.terminations.count >= count { return state.terminations }
                state.terminationWaiters.append((count, continuation))
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    func open(_ request: TransportRequest) async throws -> StreamingResponse {
        // The client's live event stream (every signed-in client opens one) is not the gateway's: it stays open,
        // silent, and is neither counted nor handed to the test.
        if request.path == "/v1/sync/events" {
            let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
            continuation.onTermination = { _ in }
            return StreamingResponse(status: 200, headers: ["Content-Type": "text/event-stream"], body: body)
        }
        let answer = state.withLock { state in
            state.requests.append(request)
            return state.answers.isEmpty ? .stream : state.answers.removeFirst()
        }
        switch answer {
        case .fail(let error):
            throw error
        case .status(let response):
            let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
            continuation.yield(response.body)
            continuation.finish()
            return StreamingResponse(status: response.status, headers: response.headers, body: body)
        case .stream:
            let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
            continuation.onTermination = { [self] termination in
                let how = if case .cancelled = termination { "cancelled" } else { "finished" }
                let (ready, terminations) = state.withLock { state in
                    state.terminations.append(how)
                    let ready = state.terminationWaiters.filter { $0.count <= state.terminations.count }
                    state.terminationWaiters.removeAll { $0.count <= state.terminations.count }
                    return (ready, state.terminations)
                }
                for waiter in ready { waiter.continuation.resume(returning: terminations) }
            }
            opened.yield(Connection(continuation: continuation))
            return StreamingResponse(status: 200, headers: ["Content-Type": "text/event-stream"], body: body)
        }
    }
}

/// The SDK's AI tests' shared setup: a signed-in client of the stubs, with its wallet loaded.
enum AIStubs {
    static func client(
        clock: ManualClock = ManualClock(), retry: RetryPolicy = RetryPolicy(), cacheStore: (any CacheStore)? = nil
    ) async throws -> (Client, AIStubServer, AIStubStreams) {
        let server = AIStubServer()
        let streams = AIStubStreams()
        var configuration = ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: MemorySecureStore(), cacheStore: cacheStore)
        configuration.transport = server
        configuration.eventStreamTransport = streams
        configuration.clock = clock
        configuration.retry = retry
        configuration.random = { 0 }
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil
        let client = Client(configuration: configuration)
        _ = try await client.signInAsGuest()
        _ = try await client.fetch(client.walletQuery)
        return (client, server, streams)
    }

    /// A chunk of a streamed answer with `content`, as the gateway relays it.
    static func chunk(_ content: String?, finish: String? = nil) -> String {
        let chunk = ChatCompletionChunk(
            id: "chatcmpl-1", created: 1_800_000_000, model: "chat",
            choices: [.init(index: 0, delta: .init(role: content == nil ? "assistant" : nil, content: content), finishReason: finish)])
        return String(decoding: try! JSONEncoder().encode(chunk), as: UTF8.self)
    }

    /// The `tally.charge` event of a call that charged `charged` of `held`, leaving `wallet`.
    static func chargeEvent(_ charge: AICharge) -> String {
        "event: \(AIGatewayProtocol.chargeEvent)\ndata: \(json(charge))\n\n"
    }

    /// `value` as compact JSON text.
    static func json(_ value: some Encodable) -> String { String(decoding: try! TallyJSON.encoder().encode(value), as: UTF8.self) }

    /// A whole answer saying `text`.
    static func completion(_ text: String) -> ChatCompletion {
        ChatCompletion(
            id: "chatcmpl-1", created: 1_800_000_000, model: "chat",
            choices: [.init(index: 0, message: ChatMessage(role: "assistant", content: text), finishReason: "stop")],
            usage: ChatUsage(promptTokens: 12, completionTokens: 3))
    }

    /// A user's question.
    static func ask(_ text: String) -> [ChatMessage] { [ChatMessage(role: "user", content: text)] }
}
