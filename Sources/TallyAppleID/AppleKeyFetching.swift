import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Where ``AppleKeyCache`` gets Apple's key set from: ``AppleKeyFetcher`` over HTTPS in a server, anything in a test.
public protocol AppleKeyFetching: Sendable {
    /// Apple's current key set. Throws on any failure (the cache answers ``AppleIDVerificationError/Code/keysUnavailable``).
    func fetchKeys() async throws -> AppleJSONWebKeySet
}

/// Why a key set could not be fetched (its message is safe to log: a status, a timeout, never a body).
public struct AppleKeyFetchError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    /// A fetch failure.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// Fetches the key set with a `GET` over AsyncHTTPClient, bounded in time and size.
public struct AppleKeyFetcher: AppleKeyFetching {
    /// Apple's key set.
    public static let appleKeysURL = "https://appleid.apple.com/auth/keys"

    /// The URL fetched.
    public let url: String
    /// The most one fetch may take, connecting included.
    public let timeout: TimeAmount
    /// The largest answer read (Apple's set is about 1.5 KB).
    public let maximumBytes: Int
    private let httpClient: HTTPClient

    /// A fetcher of `url` (Apple's by default) through `httpClient`.
    public init(
        url: String = AppleKeyFetcher.appleKeysURL, timeout: TimeAmount = .seconds(5), maximumBytes: Int = 256 * 1024,
        httpClient: HTTPClient = .shared
    ) {
        self.url = url
        self.timeout = timeout
        self.maximumBytes = maximumBytes
        self.httpClient = httpClient
    }

    /// `GET url`: a 200 whose body is a key set, else ``AppleKeyFetchError``.
    public func fetchKeys() async throws -> AppleJSONWebKeySet {
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/json")
        let body: ByteBuffer
        let status: HTTPResponseStatus
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            status = response.status
            body = try await response.body.collect(upTo: maximumBytes)
        } catch {
            throw AppleKeyFetchError(AppleHTTPFailure.describe(error))
        }
        guard status == .ok else { throw AppleKeyFetchError("the key set was answered with status \(status.code)") }
        guard let set = try? JSONDecoder().decode(AppleJSONWebKeySet.self, from: Data(body.readableBytesView)) else {
            throw AppleKeyFetchError("the answer is not a JSON Web Key Set")
        }
        return set
    }
}

/// Words for a failed request that say what happened without quoting a body or a header.
enum AppleHTTPFailure {
    static func describe(_ error: any Error) -> String {
        if error is CancellationError { return "cancelled" }
        let text = String(describing: error)
        if text.contains("deadlineExceeded") || text.contains("Timeout") || text.contains("timeout") { return "timed out" }
        if text.localizedCaseInsensitiveContains("refused") { return "connection refused" }
        if text.contains("responseTooLarge") || text.contains("tooManyBytes") { return "the answer is too large" }
        return "the request failed (\(type(of: error)))"
    }
}
