import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import TallyAppleJWS

/// Apple's App Store Server API, as the app's server calls it: Send Consumption Information, Get Transaction History,
/// Get Notification History, Look Up Order ID and Get Refund History, each against the environment the transaction
/// lives in. Requests carry an ``AppStoreServerAPIToken`` (one token reused until five minutes before it expires);
/// a 429, a 5xx or no answer is retried with backoff on the injected clock (`sleep`), at most
/// ``Configuration/maxAttempts`` times in all.
///
/// Nothing secret is logged or put in an error: not the key, not the token.
public final class AppStoreServerAPIClient: Sendable {
    /// Where the client calls and how patiently.
    public struct Configuration: Sendable, Hashable {
        /// Production's base URL.
        public var productionURL = "https://api.storekit.itunes.apple.com"
        /// Sandbox's base URL.
        public var sandboxURL = "https://api.storekit-sandbox.itunes.apple.com"
        /// The most one request may take, connecting included.
        public var timeout: TimeAmount = .seconds(15)
        /// Attempts per call, the first included.
        public var maxAttempts = 4
        /// How long each token is valid (at most 60 minutes).
        public var tokenLifetime: TimeInterval = 1_200

        /// Apple's URLs.
        public init() {}

        /// The base URL of `environment`.
        public func url(of environment: AppStoreEnvironment) -> String {
            environment == .production ? productionURL : sandboxURL
        }
    }

    /// The configuration.
    public let configuration: Configuration
    private let signer: AppStoreServerAPIToken
    private let httpClient: HTTPClient
    private let now: @Sendable () -> Date
    private let sleep: @Sendable (TimeInterval) async throws -> Void
    private let logger: Logger
    private let bearerCache = BearerTokenCache()

    /// A client signing with `signer`, reading time from `now` and waiting between attempts with `sleep`.
    public init(
        signer: AppStoreServerAPIToken, configuration: Configuration = Configuration(), httpClient: HTTPClient = .shared,
        now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (TimeInterval) async throws -> Void,
        logger: Logger = Logger(label: "tally.appstore-api")
    ) {
        self.signer = signer
        self.configuration = configuration
        self.httpClient = httpClient
        self.now = now
        self.sleep = sleep
        self.logger = logger
    }

    // MARK: Calls

    /// Send Consumption Information (v2) for `transactionId`: Apple answers 202 and nothing else.
    public func sendConsumptionInformation(
        _ information: ConsumptionInformation, transactionId: String, environment: AppStoreEnvironment
    ) async throws(AppStoreServerAPIError) {
        let body = try Self.encoded(information)
        _ = try await call(.PUT, "/inApps/v2/transactions/consumption/\(Self.segment(transactionId))", environment, body: body, "consumption")
    }

    /// One page of the customer's transactions (Get Transaction History v2), from `revision` (nil: the first page),
    /// oldest first.
    public func transactionHistory(
        transactionId: String, revision: String? = nil, environment: AppStoreEnvironment
    ) async throws(AppStoreServerAPIError) -> TransactionHistoryPage {
        var query = [("sort", "ASCENDING")]
        if let revision { query.append(("revision", revision)) }
        return try await decoded(.GET, "/inApps/v2/history/\(Self.segment(transactionId))", environment, query: query, "history")
    }

    /// One page of the customer's refunded transactions (Get Refund History v2), from `revision`.
    public func refundHistory(
        transactionId: String, revision: String? = nil, environment: AppStoreEnvironment
    ) async throws(AppStoreServerAPIError) -> TransactionHistoryPage {
        let query = revision.map { [("revision", $0)] } ?? []
        return try await decoded(.GET, "/inApps/v2/refund/lookup/\(Self.segment(transactionId))", environment, query: query, "refunds")
    }

    /// One page of the notifications Apple sent (Get Notification History), from `paginationToken`.
    public func notificationHistory(
        _ query: NotificationHistoryQuery, paginationToken: String? = nil, environment: AppStoreEnvironment
    ) async throws(AppStoreServerAPIError) -> NotificationHistoryPage {
        let parameters = paginationToken.map { [("paginationToken", $0)] } ?? []
        return try await decoded(
            .POST, "/inApps/v1/notifications/history", environment, query: parameters, body: try Self.encoded(query), "notification history")
    }

    /// The transactions of the order a customer's receipt email names (Look Up Order ID).
    public func lookUpOrder(_ orderId: String, environment: AppStoreEnvironment) async throws(AppStoreServerAPIError) -> OrderLookup {
        try await decoded(.GET, "/inApps/v1/lookup/\(Self.segment(orderId))", environment, "order lookup")
    }

    // MARK: Requests

    private func decoded<Answer: Decodable>(
        _ method: HTTPMethod, _ path: String, _ environment: AppStoreEnvironment, query: [(String, String)] = [], body: Data? = nil,
        _ what: String
    ) async throws(AppStoreServerAPIError) -> Answer {
        let data = try await call(method, path, environment, query: query, body: body, what)
        do {
            return try JSONDecoder().decode(Answer.self, from: data)
        } catch {
            throw AppStoreServerAPIError(.malformedResponse, status: 200, "Apple's \(what) answer is not the JSON Apple documents")
        }
    }

    /// The body of a 2xx answer to one call, after the retries a 429, a 5xx or no answer get.
    private func call(
        _ method: HTTPMethod, _ path: String, _ environment: AppStoreEnvironment, query: [(String, String)] = [], body: Data? = nil,
        _ what: String
    ) async throws(AppStoreServerAPIError) -> Data {
        var attempt = 0
        while true {
            attempt += 1
            let failure: AppStoreServerAPIError
            do {
                return try await once(method, path, environment, query: query, body: body, what)
            } catch {
                failure = error
            }
            guard failure.isRetryable, attempt < configuration.maxAttempts else { throw failure }
            let delay = Self.retryDelay(afterAttempt: attempt, retryAfter: failure.retryAfter)
            logger.info(
                "appstore-api: \(what) will be retried", metadata: ["appstore.status": "\(failure.status ?? 0)", "appstore.delay": "\(delay)"])
            do {
                try await sleep(delay)
            } catch {
                throw AppStoreServerAPIError(.unavailable, status: failure.status, "cancelled while waiting to retry \(what)")
            }
        }
    }

    /// The wait after failed attempt `attempt`: 1 s, 2 s, 4 s … at most 30 s, or the server's `Retry-After` (at most
    /// 60 s) when longer.
    public static func retryDelay(afterAttempt attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        let backoff = min(30, pow(2, Double(max(0, min(attempt - 1, 10)))))
        return max(backoff, min(60, retryAfter ?? 0))
    }

    private func once(
        _ method: HTTPMethod, _ path: String, _ environment: AppStoreEnvironment, query: [(String, String)], body: Data?, _ what: String
    ) async throws(AppStoreServerAPIError) -> Data {
        var url = configuration.url(of: environment) + path
        if !query.isEmpty { url += "?" + query.map { "\(Self.segment($0.0))=\(Self.segment($0.1))" }.joined(separator: "&") }
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(try bearer())")
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let answer: BoundedHTTPCall.Answer
        do {
            answer = try await BoundedHTTPCall.execute(request, on: httpClient, timeout: configuration.timeout, maximumBytes: 4 << 20)
        } catch {
            throw AppStoreServerAPIError(.unavailable, status: nil, "Apple's \(what) endpoint could not be reached: \(error.reason)")
        }
        let status = answer.status
        logger.debug("appstore-api: \(what) answered", metadata: ["appstore.status": "\(status.code)"])
        if (200..<300).contains(status.code) { return answer.body }
        let retryAfter = answer.headers.first(name: "Retry-After").flatMap(TimeInterval.init)
        let detail = try? JSONDecoder().decode(ErrorAnswer.self, from: answer.body)
        let code: AppStoreServerAPIError.Code =
            switch status.code {
            case 401: .unauthorized
            case 404: .notFound
            case 429, 500...599: .unavailable
            default: .rejected
            }
        if code == .unauthorized {
            bearerCache.clear()  // a key rotated or a clock off: the next call signs anew
            logger.error("appstore-api: Apple refused the In-App Purchase key (401): check keyId, issuerId and the key")
        }
        throw AppStoreServerAPIError(
            code, status: Int(status.code), errorCode: detail?.errorCode, retryAfter: retryAfter,
            "Apple answered \(what) with status \(status.code)\(detail?.errorMessage.map { ": \($0)" } ?? "")")
    }

    /// The token to send now: the cached one until five minutes before it expires (one signed after now is not reused).
    private func bearer() throws(AppStoreServerAPIError) -> String {
        let now = now()
        return try bearerCache.token(at: now, reuse: configuration.tokenLifetime - 300) { () throws(AppStoreServerAPIError) in
            try sign(at: now)
        }
    }

    /// A new token, valid from `now` for ``Configuration/tokenLifetime``.
    private func sign(at now: Date) throws(AppStoreServerAPIError) -> String {
        do {
            return try signer.token(now: now, lifetime: configuration.tokenLifetime)
        } catch {
            throw AppStoreServerAPIError(.unauthorized, status: nil, "the App Store Server API token could not be made: \(error.message)")
        }
    }

    private struct ErrorAnswer: Decodable {
        var errorCode: Int?
        var errorMessage: String?
    }

    private static func encoded(_ value: some Encodable) throws(AppStoreServerAPIError) -> Data {
        do {
            return try JSONEncoder().encode(value)
        } catch {
            throw AppStoreServerAPIError(.rejected, status: nil, "the request could not be encoded")
        }
    }

    /// `text` percent-encoded for a path segment or a query value (RFC 3986's unreserved characters kept).
    static func segment(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

/// A call to the App Store Server API that did not succeed.
public struct AppStoreServerAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a caller acts on it.
    public enum Code: String, Sendable, Hashable {
        /// Apple refused the token (401): the key, its id or the issuer id is wrong, or the clock is off.
        case unauthorized
        /// No such transaction or order (404).
        case notFound
        /// Apple refused the request as made (another 4xx; ``AppStoreServerAPIError/errorCode`` says why).
        case rejected
        /// No answer, 429 or 5xx: worth trying again later.
        case unavailable
        /// A 2xx whose body is not what Apple documents.
        case malformedResponse
    }

    /// What went wrong.
    public var code: Code
    /// The HTTP status, if Apple answered.
    public var status: Int?
    /// Apple's `errorCode`, if it sent one (4000006 invalid transaction id, …).
    public var errorCode: Int?
    /// Apple's `Retry-After`, in seconds, if it sent one.
    public var retryAfter: TimeInterval?
    /// What happened, without any secret.
    public var message: String

    /// An error.
    public init(_ code: Code, status: Int?, errorCode: Int? = nil, retryAfter: TimeInterval? = nil, _ message: String) {
        self.code = code
        self.status = status
        self.errorCode = errorCode
        self.retryAfter = retryAfter
        self.message = message
    }

    /// Whether trying again may help.
    public var isRetryable: Bool { code == .unavailable }

    /// The code and message.
    public var description: String { "\(code.rawValue): \(message)" }
}
