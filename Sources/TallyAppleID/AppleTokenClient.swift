import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import TallyAppleJWS

/// Apple's token endpoints for Sign in with Apple, as the app's server calls them: the authorization code exchanged
/// for a refresh token (kept to revoke at account deletion), and that refresh token revoked. Each call signs a fresh
/// short-lived ``AppleClientSecret`` with the `.p8` key parsed once at init.
///
/// Nothing secret is logged or put in an error: not the key, the secret, the code or any token (``AppleTokenResponse``
/// prints redacted).
public struct AppleTokenClient: Sendable, CustomStringConvertible {
    /// Where and as whom the client calls.
    public struct Configuration: Sendable, Hashable {
        /// The app's team id (the client secret's `iss`).
        public var teamId: String
        /// The id of the Sign in with Apple key (the client secret's `kid`).
        public var keyId: String
        /// The client id: the app's bundle id (or Services ID) the code was issued to.
        public var clientId: String
        /// The code exchange's URL.
        public var tokenURL = "https://appleid.apple.com/auth/token"
        /// The revocation's URL.
        public var revokeURL = "https://appleid.apple.com/auth/revoke"
        /// The most one call may take, connecting included.
        public var timeout: TimeAmount = .seconds(10)
        /// How long each call's client secret is valid (it is made anew for every call).
        public var clientSecretLifetime: TimeInterval = 300

        /// Apple's endpoints for `clientId` of `teamId`, signing with the key `keyId`.
        public init(teamId: String, keyId: String, clientId: String) {
            self.teamId = teamId
            self.keyId = keyId
            self.clientId = clientId
        }
    }

    /// The configuration.
    public let configuration: Configuration
    private let signer: ES256BearerSigner
    private let httpClient: HTTPClient
    private let logger: Logger

    /// A client for `configuration`, signing with the `.p8` key in `privateKeyPEM` (from the environment; it is parsed
    /// here and never kept as text). Throws ``AppleIDConfigurationError`` for a key that is not P-256 PEM, empty ids or
    /// a secret lifetime beyond six months.
    public init(
        configuration: Configuration, privateKeyPEM: String, httpClient: HTTPClient = .shared, logger: Logger = Logger(label: "tally.apple-id")
    ) throws(AppleIDConfigurationError) {
        signer = try AppleClientSecret.signer(keyId: configuration.keyId, pem: privateKeyPEM)
        self.configuration = configuration
        self.httpClient = httpClient
        self.logger = logger
        _ = try clientSecret(now: Date())
    }

    /// What the client is, without its key.
    public var description: String {
        "AppleTokenClient(clientId: \(configuration.clientId), teamId: \(configuration.teamId), keyId: \(configuration.keyId))"
    }

    /// A client secret valid from `now` for the configured lifetime.
    public func clientSecret(now: Date) throws(AppleIDConfigurationError) -> String {
        try AppleClientSecret.make(
            teamId: configuration.teamId, clientId: configuration.clientId, signer: signer, now: now,
            lifetime: configuration.clientSecretLifetime)
    }

    /// Exchanges the authorization code the app got with its identity token (`grant_type=authorization_code`) for
    /// Apple's tokens; the answer's refresh token is what ``revoke(refreshToken:now:)`` takes at account deletion.
    /// `redirectURI` is for codes from the web flow only. Refusals: ``AppleTokenError`` with Apple's code
    /// (`invalid_grant` for a used, expired or foreign code; `invalid_client` for a secret Apple does not accept).
    public func exchange(authorizationCode: String, redirectURI: String? = nil, now: Date) async throws(AppleTokenError) -> AppleTokenResponse {
        var form = [("client_id", configuration.clientId), ("client_secret", try secret(now)), ("code", authorizationCode)]
        form.append(("grant_type", "authorization_code"))
        if let redirectURI { form.append(("redirect_uri", redirectURI)) }
        let body = try await post(configuration.tokenURL, form, "token")
        do {
            return try JSONDecoder().decode(AppleTokenResponse.self, from: body)
        } catch {
            throw AppleTokenError(.malformedResponse, status: 200, "the token answer is not the JSON Apple sends")
        }
    }

    /// Revokes `refreshToken` (`token_type_hint=refresh_token`): the user's Sign in with Apple link to the app ends,
    /// as Apple requires when the account is deleted.
    public func revoke(refreshToken: String, now: Date) async throws(AppleTokenError) {
        let form = [
            ("client_id", configuration.clientId), ("client_secret", try secret(now)), ("token", refreshToken),
            ("token_type_hint", "refresh_token"),
        ]
        _ = try await post(configuration.revokeURL, form, "revoke")
    }

    private func secret(_ now: Date) throws(AppleTokenError) -> String {
        do {
            return try clientSecret(now: now)
        } catch {
            throw AppleTokenError(.invalidClient, status: nil, "the client secret could not be made: \(error.message)")
        }
    }

    private struct ErrorAnswer: Decodable {
        var error: String
    }

    /// POSTs `form` to `url`; the body of a 200, else the error.
    private func post(_ url: String, _ form: [(String, String)], _ what: String) async throws(AppleTokenError) -> Data {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: Self.formEncoded(form)))
        let answer: BoundedHTTPCall.Answer
        do {
            answer = try await BoundedHTTPCall.execute(request, on: httpClient, timeout: configuration.timeout, maximumBytes: 1 << 20)
        } catch {
            logger.warning("apple-id: the \(what) request failed", metadata: ["apple.error": "\(error.reason)"])
            throw AppleTokenError(.unavailable, status: nil, "Apple's \(what) endpoint could not be reached: \(error.reason)")
        }
        let status = answer.status.code
        logger.debug("apple-id: \(what) answered", metadata: ["apple.status": "\(status)"])
        if status == 200 { return answer.body }
        if (400..<500).contains(status), let refusal = try? JSONDecoder().decode(ErrorAnswer.self, from: answer.body) {
            throw AppleTokenError(AppleTokenError.Code(rawValue: refusal.error), status: Int(status), "Apple refused the \(what) request")
        }
        throw AppleTokenError(.unavailable, status: Int(status), "Apple's \(what) endpoint answered status \(status)")
    }

    /// `application/x-www-form-urlencoded`: every byte but the unreserved ones (RFC 3986) percent-encoded.
    static func formEncoded(_ form: [(String, String)]) -> String {
        let unreserved = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8))
        func encode(_ text: String) -> String {
            var out = ""
            for byte in text.utf8 {
                if unreserved.contains(byte) {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
                }
            }
            return out
        }
        return form.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&")
    }
}

/// Apple's answer to a code exchange. Printing it shows the token type and lifetime only.
public struct AppleTokenResponse: Decodable, Hashable, Sendable, CustomStringConvertible {
    /// An access token (Apple's; unused by Tally).
    public var accessToken: String
    /// `Bearer`.
    public var tokenType: String
    /// The access token's lifetime in seconds.
    public var expiresIn: Int
    /// The refresh token: keep it (secret) to revoke at account deletion.
    public var refreshToken: String?
    /// An identity token for the user (verify it like any other before believing it).
    public var idToken: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
    }

    /// An answer.
    public init(accessToken: String, tokenType: String, expiresIn: Int, refreshToken: String?, idToken: String?) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    /// The type and lifetime; the tokens redacted.
    public var description: String {
        "AppleTokenResponse(tokenType: \(tokenType), expiresIn: \(expiresIn), refreshToken: \(refreshToken == nil ? "none" : "redacted"))"
    }
}

/// Why a call to Apple's token endpoints failed, with a stable ``code``: Apple's own OAuth error for a refusal, or
/// ``Code/unavailable`` when Apple could not be reached or answered a 5xx (try again later; answer 503).
public struct AppleTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The failure's name: Apple's `error` string, or one of Tally's.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code.
        public let rawValue: String
        /// Wraps a code, known or not.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw string.
        public var description: String { rawValue }

        /// Apple: the code is used, expired, revoked or another client's (the user must sign in again).
        public static let invalidGrant = Self(rawValue: "invalid_grant")
        /// Apple: the client id or client secret is not accepted (a configuration error), or no secret could be made.
        public static let invalidClient = Self(rawValue: "invalid_client")
        /// Apple: a parameter is missing or wrong.
        public static let invalidRequest = Self(rawValue: "invalid_request")
        /// Apple: the grant type is not one it supports.
        public static let unsupportedGrantType = Self(rawValue: "unsupported_grant_type")
        /// Tally: no answer (network, timeout) or a status Apple does not refuse with (5xx).
        public static let unavailable = Self(rawValue: "unavailable")
        /// Tally: a 200 whose body is not what Apple sends.
        public static let malformedResponse = Self(rawValue: "malformed_response")
    }

    /// The failure's name.
    public let code: Code
    /// The HTTP status answered, if there was an answer.
    public let status: Int?
    /// What failed, in words (never a token, the code or the key).
    public let message: String

    /// A failure.
    public init(_ code: Code, status: Int?, _ message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    /// `<code>: <message>`.
    public var description: String { "\(code.rawValue): \(message)" }
}
