import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TallyAppleJWS

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
        let answer: BoundedHTTPCall.Answer
        do {
            answer = try await BoundedHTTPCall.execute(request, on: httpClient, timeout: timeout, maximumBytes: maximumBytes)
        } catch {
            throw AppleKeyFetchError(error.reason)
        }
        guard answer.status == .ok else { throw AppleKeyFetchError("the key set was answered with status \(answer.status.code)") }
        guard let set = try? JSONDecoder().decode(AppleJSONWebKeySet.self, from: answer.body) else {
            throw AppleKeyFetchError("the answer is not a JSON Web Key Set")
        }
        return set
    }
}
