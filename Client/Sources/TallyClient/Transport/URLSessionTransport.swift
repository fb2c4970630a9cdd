import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests with URLSession (FoundationNetworking on Linux). No HTTP cache: the SDK revalidates with ETags itself.
///
/// `TransportRequest.timeout` is a deadline for the whole attempt, enforced here: URLSession's own
/// `timeoutInterval` is an idle timeout on Apple platforms and whole seconds only on Linux.
public final class URLSessionTransport: HTTPTransport {
    private let baseURL: String
    private let session: URLSession

    /// Creates a transport sending paths relative to `baseURL`, with its own ephemeral, cookie-less, cache-less session.
    public init(baseURL: URL) {
        self.baseURL = Self.base(baseURL)
        session = URLSession(configuration: Self.configuration())
    }

    /// Ephemeral, cookie-less, cache-less: what both of the SDK's URLSession transports use.
    static func configuration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        return configuration
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends one attempt; cancelling the calling task throws `CancellationError` at once (and cancels the request, see
    /// ``URLTaskAttempt``), and so does the deadline with ``TransportError/timedOut``, whether or not URLSession answers.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let urlRequest = try makeURLRequest(request)
        let attempt = URLTaskAttempt<(Data, URLResponse)>(delegateQueue: session.delegateQueue)
        let (data, response) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        attempt.answered(.failure(Self.map(error)))
                    } else if let response {
                        attempt.answered(.success((data ?? Data(), response)))
                    } else {
                        attempt.answered(.failure(TransportError.connectionLost))
                    }
                }
                attempt.start(task, resuming: continuation, deadline: request.timeout)
            }
        } onCancel: {
            attempt.cancel()
        }
        guard let http = response as? HTTPURLResponse else { throw TransportError.connectionLost }
        return TransportResponse(status: http.statusCode, headers: Self.headers(of: http), body: data)
    }

    private func makeURLRequest(_ request: TransportRequest) throws -> URLRequest {
        // A backstop only, never shorter than the deadline (Linux truncates it to whole seconds).
        try Self.urlRequest(request, baseURL: baseURL, timeoutInterval: max(1, request.timeout.rounded(.down) + 1))
    }

    /// `baseURL` without trailing slashes, for appending request paths.
    static func base(_ baseURL: URL) -> String {
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// `request` as a URLRequest against `baseURL`, with URLSession's own timeout set to `timeoutInterval`.
    static func urlRequest(_ request: TransportRequest, baseURL: String, timeoutInterval: TimeInterval) throws -> URLRequest {
        guard let url = URL(string: baseURL + request.path) else { throw TransportError.offline }
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.timeoutInterval = timeoutInterval
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        return urlRequest
    }

    /// The response's header fields as strings.
    static func headers(of response: HTTPURLResponse) -> [String: String] {
        var headers: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            guard let name = name as? String else { continue }
            headers[name] = value as? String ?? "\(value)"
        }
        return headers
    }

    /// URLSession's errors as the SDK's: no route → offline, timeout → timedOut, cancelled → CancellationError,
    /// anything else → connectionLost (the server may have acted).
    static func map(_ error: any Error) -> any Error {
        if error is CancellationError { return error }
        let nsError = error as NSError
        guard nsError.domain == NSURLErrorDomain else { return Task.isCancelled ? CancellationError() : TransportError.connectionLost }
        switch URLError.Code(rawValue: nsError.code) {
        case .cancelled: return CancellationError()
        case .timedOut: return TransportError.timedOut
        case .cannotConnectToHost, .notConnectedToInternet, .cannotFindHost, .dnsLookupFailed: return TransportError.offline
        default: return Task.isCancelled ? CancellationError() : TransportError.connectionLost
        }
    }
}
