import Foundation

/// One HTTP request as the SDK sends it: a path relative to the server's base URL.
public struct TransportRequest: Sendable, Hashable {
    /// `GET`, `POST`, `PATCH`, `DELETE`.
    public var method: String
    /// Path and query, for example `/v1/wallet`.
    public var path: String
    /// Header fields; names are matched case-insensitively by the server.
    public var headers: [String: String]
    /// The body, if any (JSON).
    public var body: Data?
    /// Seconds this attempt may take before it fails with ``TransportError/timedOut``.
    public var timeout: TimeInterval

    /// Creates a request.
    public init(method: String, path: String, headers: [String: String] = [:], body: Data? = nil, timeout: TimeInterval) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// One HTTP response: status, header fields (names lower-cased) and body.
public struct TransportResponse: Sendable, Hashable {
    /// The HTTP status code.
    public var status: Int
    /// Header fields with lower-cased names.
    public var headers: [String: String]
    /// The body bytes.
    public var body: Data

    /// Creates a response; header names are lower-cased.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }

    /// The value of a header field, by case-insensitive name.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Why a request produced no HTTP response.
public enum TransportError: Error, Sendable, Hashable {
    /// No network route (airplane mode, server not listening).
    case offline
    /// The attempt exceeded its timeout.
    case timedOut
    /// The connection dropped before the whole response arrived: the server may or may not have acted.
    case connectionLost
}

/// Sends requests to a Tally server. URLSession in production; tests wrap it to inject faults.
public protocol HTTPTransport: Sendable {
    /// Sends one attempt of `request`. Cancelling the calling task cancels the request.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}
