import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response whose body is still arriving: the status and header fields, then the body in the pieces the
/// network delivers.
public struct StreamingResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Header fields with lower-cased names.
    public var headers: [String: String]
    /// The body as it arrives: ends when the server ends the response, throws ``TransportError/connectionLost``
    /// when the connection drops (``TransportError/timedOut`` after a silence longer than the request's
    /// timeout). Stopping the iteration, or dropping the stream, cancels the request.
    public var body: AsyncThrowingStream<Data, any Error>

    /// Creates a response; header names are lower-cased.
    public init(status: Int, headers: [String: String] = [:], body: AsyncThrowingStream<Data, any Error>) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }

    /// The value of a header field, by case-insensitive name.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Opens long-lived responses (the server's event stream). ``URLSessionEventStreamTransport`` in production;
/// tests wrap it to inject faults.
public protocol EventStreamTransport: Sendable {
    /// Sends `request` and returns when the response's head has arrived, its body still streaming. The request's
    /// `timeout` is the longest silence allowed, before the head and between pieces of the body. Cancelling the
    /// calling task before the head arrives cancels the request.
    func open(_ request: TransportRequest) async throws -> StreamingResponse
}

/// Streams response bodies with a `URLSessionDataDelegate`, which gets them in pieces on Linux too
/// (swift-corelibs-foundation has no `URLSession.bytes`). One session and one delegate per transport.
public final class URLSessionEventStreamTransport: EventStreamTransport {
    private let baseURL: String
    private let session: URLSession
    private let delegate = EventStreamSessionDelegate()

    /// Creates a transport opening paths relative to `baseURL`, with its own ephemeral, cookie-less, cache-less session.
    public init(baseURL: URL) {
        self.baseURL = URLSessionTransport.base(baseURL)
        session = URLSession(configuration: URLSessionTransport.configuration(), delegate: delegate, delegateQueue: nil)
    }

    // The session holds its delegate until invalidated; every open stream holds the transport (see `open`), so none is
    // open now: a stream ended by its reader has its cancel queued (`cancelLater`), and nothing is cancelled here
    // (`invalidateAndCancel` would cancel from outside the delegate queue, see ``cancelLater(_:on:)``).
    deinit { session.finishTasksAndInvalidate() }

    /// Opens one streaming request; cancelling the calling task before the head arrives throws `CancellationError` at
    /// once, and a head that does not come within the request's timeout throws ``TransportError/timedOut``.
    public func open(_ request: TransportRequest) async throws -> StreamingResponse {
        // Whole seconds, at least one: Linux truncates URLSession's timeout.
        let urlRequest = try URLSessionTransport.urlRequest(request, baseURL: baseURL, timeoutInterval: max(1, request.timeout.rounded(.up)))
        let task = session.dataTask(with: urlRequest)
        let (body, continuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
        // Ending the iteration cancels the request (from the delegate queue: this runs in the reader's cancellation
        // handler, see ``cancelLater(_:on:)``); a body that finished because the task did cancels nothing. The capture
        // keeps this transport (its session) alive as long as the body.
        continuation.onTermination = { [self] termination in
            if case .cancelled = termination { cancelLater(task, on: session.delegateQueue) }
        }
        let head = URLTaskAttempt<HTTPURLResponse>(delegateQueue: session.delegateQueue)
        let response = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<HTTPURLResponse, any Error>) in
                delegate.add(task.taskIdentifier, head: head, body: continuation)
                head.start(task, resuming: waiter, deadline: request.timeout)
            }
        } onCancel: {
            head.cancel()
        }
        return StreamingResponse(status: response.statusCode, headers: URLSessionTransport.headers(of: response), body: body)
    }
}

/// Routes URLSession's callbacks, which come in order on the session's serial delegate queue, to each task's
/// waiting opener (the head) and body stream.
private final class EventStreamSessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct Stream {
        /// Nil once the head came.
        var head: URLTaskAttempt<HTTPURLResponse>?
        let body: AsyncThrowingStream<Data, any Error>.Continuation
    }

    private let streams = Locked<[Int: Stream]>([:])

    func add(_ task: Int, head: URLTaskAttempt<HTTPURLResponse>, body: AsyncThrowingStream<Data, any Error>.Continuation) {
        streams.withLock { $0[task] = Stream(head: head, body: body) }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let head = streams.withLock { streams in
            defer { streams[dataTask.taskIdentifier]?.head = nil }
            return streams[dataTask.taskIdentifier]?.head
        }
        guard let http = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            return
        }
        head?.answered(.success(http))
        completionHandler(.allow)
    }

    /// The body's first byte opens the stream too, when its head was not answered (a platform that hands data first):
    /// the server starts every stream with a 2 KiB comment so that CFNetwork's content sniffing, which holds a `text/*`
    /// response back until about 512 bytes came, never holds the head.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let http = dataTask.response as? HTTPURLResponse
        let (head, body) = streams.withLock { streams -> (URLTaskAttempt<HTTPURLResponse>?, AsyncThrowingStream<Data, any Error>.Continuation?) in
            let stream = streams[dataTask.taskIdentifier]
            if http != nil { streams[dataTask.taskIdentifier]?.head = nil }
            return (stream?.head, stream?.body)
        }
        if let head, let http { head.answered(.success(http)) }
        body?.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let stream = streams.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let failure = error.map(URLSessionTransport.map) ?? (stream.head == nil ? nil : TransportError.connectionLost)
        stream.head?.answered(.failure(failure ?? TransportError.connectionLost))
        if let failure { stream.body.finish(throwing: failure) } else { stream.body.finish() }
    }
}

extension StreamingResponse {
    /// The most of an error body read.
    static let errorBodyLimit = 65_536

    /// A status other than 200 as the retry policy sees it, and as the error reporting it, with the server's error
    /// body (a 402 carries the wallet and quotas): what the event stream and the AI stream do with a refusal.
    func refusal() async throws -> (AttemptFailure, ClientError) {
        var data = Data()
        for try await chunk in body {
            data += chunk
            if data.count >= Self.errorBodyLimit { break }
        }
        let detail = try? TallyJSON.decoder().decode(ErrorResponse.self, from: data)
        let retryAfter = header("Retry-After").flatMap(TimeInterval.init)
        let failure = AttemptFailure.status(status, code: detail?.error.code.rawValue, retryAfter: retryAfter)
        return (failure, RequestExecutor.error(status: status, detail: detail, retryAfter: retryAfter))
    }
}
