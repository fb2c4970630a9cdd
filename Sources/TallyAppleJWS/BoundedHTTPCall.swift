import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One call to an Apple server API, bounded in time (connecting included) and in the size of the answer read. A failure
/// is described without quoting a body, a header or the request (which carries a bearer token).
public enum BoundedHTTPCall {
    /// An answer, whatever its status.
    public struct Answer: Sendable {
        /// The status.
        public var status: HTTPResponseStatus
        /// The headers.
        public var headers: HTTPHeaders
        /// The body, at most the bytes asked for.
        public var body: Data
    }

    /// No answer: the request could not be made, timed out, was cancelled, or its answer was larger than allowed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What happened, safe to log: `timed out`, `connection refused`, `cancelled`, `the answer is too large`, or
        /// `the request failed (<type>)`.
        public let reason: String
        /// The reason.
        public var description: String { reason }
    }

    /// `request` through `httpClient`, within `timeout`, its answer read up to `maximumBytes`.
    public static func execute(
        _ request: HTTPClientRequest, on httpClient: HTTPClient, timeout: TimeAmount, maximumBytes: Int
    ) async throws(Failure) -> Answer {
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: maximumBytes)
            return Answer(status: response.status, headers: response.headers, body: Data(body.readableBytesView))
        } catch {
            throw Failure(reason: describe(error))
        }
    }

    /// Words for `error` that say what happened without quoting it.
    static func describe(_ error: any Error) -> String {
        if error is CancellationError { return "cancelled" }
        if error is NIOTooManyBytesError { return "the answer is too large" }
        let text = String(describing: error)
        if text.contains("deadlineExceeded") || text.localizedCaseInsensitiveContains("timeout") { return "timed out" }
        if text.localizedCaseInsensitiveContains("refused") { return "connection refused" }
        if text.contains("responseTooLarge") || text.localizedCaseInsensitiveContains("tooManyBytes") { return "the answer is too large" }
        return "the request failed (\(type(of: error)))"
    }
}
