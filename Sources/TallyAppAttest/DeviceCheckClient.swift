import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import TallyAppleJWS

/// Apple's DeviceCheck per-device data, as the app's server calls it ("Accessing and modifying per-device data"): two
/// bits Apple keeps per device for the team, across reinstalls, read with `POST /v1/query_two_bits` and written with
/// `POST /v1/update_two_bits`, each naming the device by a token the app got from `DCDevice.generateToken()`.
///
/// Requests carry `Authorization: Bearer <JWT>`: ES256 with the team's DeviceCheck key, header `{"alg":"ES256",
/// "kid":keyId}`, claims `{"iss":teamId,"iat":seconds}`; one token is reused until it is 30 minutes old (Apple refuses
/// one older than an hour). Calls are not retried: a caller decides what an ``DeviceCheckError/Code/unavailable``
/// costs it. Neither the bearer token nor a device token is logged or put in an error.
public struct DeviceCheckClient: Sendable {
    /// Production's base URL.
    public static let productionURL = "https://api.devicecheck.apple.com"
    /// The development environment's base URL (apps signed with a development profile).
    public static let developmentURL = "https://api.development.devicecheck.apple.com"
    /// How long one bearer token is reused.
    public static let tokenReuse: TimeInterval = 1_800

    /// The team's DeviceCheck key and where to call.
    public struct Configuration: Sendable, CustomStringConvertible {
        /// The DeviceCheck key's 10-character id (the token header's `kid`).
        public var keyId: String
        /// The team id (the token's `iss`).
        public var teamId: String
        /// The key (the `.p8` file, P-256).
        public var privateKey: P256.Signing.PrivateKey
        /// ``DeviceCheckClient/productionURL``, ``DeviceCheckClient/developmentURL`` or a stand-in's.
        public var baseURL: String
        /// The most one request may take, connecting included.
        public var timeout: TimeAmount

        /// A configuration with `privateKey`.
        public init(
            keyId: String, teamId: String, privateKey: P256.Signing.PrivateKey, baseURL: String = DeviceCheckClient.productionURL,
            timeout: TimeAmount = .seconds(10)
        ) {
            self.keyId = keyId
            self.teamId = teamId
            self.privateKey = privateKey
            self.baseURL = baseURL
            self.timeout = timeout
        }

        /// A configuration with the key in `privateKeyPEM` (the `.p8` file: PKCS#8, or SEC1, PEM). Throws
        /// ``DeviceCheckError/Code/unauthorized`` for a key that is not P-256 PEM or an empty id.
        public init(
            keyId: String, teamId: String, privateKeyPEM: String, baseURL: String = DeviceCheckClient.productionURL,
            timeout: TimeAmount = .seconds(10)
        ) throws(DeviceCheckError) {
            guard !keyId.isEmpty, !teamId.isEmpty else {
                throw DeviceCheckError(.unauthorized, status: nil, "the DeviceCheck key id and the team id must both be set")
            }
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM) else {
                throw DeviceCheckError(.unauthorized, status: nil, "the DeviceCheck key is not a P-256 private key in PEM (the .p8 file)")
            }
            self.init(keyId: keyId, teamId: teamId, privateKey: key, baseURL: baseURL, timeout: timeout)
        }

        /// The ids and the URL; never the key.
        public var description: String { "keyId \(keyId), teamId \(teamId), baseURL \(baseURL)" }
    }

    /// The configuration.
    public let configuration: Configuration
    private let httpClient: HTTPClient
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let bearer: BearerTokenCache

    /// A client calling with `httpClient`, reading time from `now`.
    public init(
        configuration: Configuration, httpClient: HTTPClient = .shared, now: @escaping @Sendable () -> Date,
        logger: Logger = Logger(label: "tally.devicecheck")
    ) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.now = now
        self.logger = logger
        bearer = BearerTokenCache()
    }

    // MARK: Calls

    /// The device's two bits; nil when they were never set for this team (Apple's "Failed to find bit state").
    public func queryTwoBits(deviceToken: String) async throws(DeviceCheckError) -> DeviceBits? {
        let answer = try await call("query_two_bits", deviceToken: deviceToken, bits: [:])
        let text = String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if !text.hasPrefix("{"), text.localizedCaseInsensitiveContains("bit state") { return nil }
        do {
            let bits = try JSONDecoder().decode(BitsAnswer.self, from: answer)
            return DeviceBits(bit0: bits.bit0, bit1: bits.bit1, lastUpdate: bits.last_update_time)
        } catch {
            throw DeviceCheckError(.malformedResponse, status: 200, "Apple's query_two_bits answer is not the JSON Apple documents")
        }
    }

    /// Sets the bits given (nil: left as they are). With neither given there is nothing to change and Apple is not called.
    public func updateTwoBits(deviceToken: String, bit0: Bool?, bit1: Bool?) async throws(DeviceCheckError) {
        var bits: [String: Bool] = [:]
        if let bit0 { bits["bit0"] = bit0 }
        if let bit1 { bits["bit1"] = bit1 }
        guard !bits.isEmpty else { return }
        _ = try await call("update_two_bits", deviceToken: deviceToken, bits: bits)
    }

    /// Checks that `deviceToken` is a genuine device's (`POST /v1/validate_device_token`), touching no bit.
    public func validateDeviceToken(_ deviceToken: String) async throws(DeviceCheckError) {
        _ = try await call("validate_device_token", deviceToken: deviceToken, bits: [:])
    }

    // MARK: Requests

    private struct BitsAnswer: Decodable {
        var bit0: Bool
        var bit1: Bool
        var last_update_time: String?
    }

    /// The body of Apple's 200 to `POST /v1/<endpoint>`.
    private func call(_ endpoint: String, deviceToken: String, bits: [String: Bool]) async throws(DeviceCheckError) -> Data {
        guard !deviceToken.isEmpty else { throw DeviceCheckError(.invalidDeviceToken, status: nil, "the device token is empty") }
        let now = now()
        var request = HTTPClientRequest(url: configuration.baseURL + "/v1/" + endpoint)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(try token(at: now))")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try Self.body(deviceToken: deviceToken, at: now, bits: bits)))
        let answer: BoundedHTTPCall.Answer
        do {
            answer = try await BoundedHTTPCall.execute(request, on: httpClient, timeout: configuration.timeout, maximumBytes: 64 << 10)
        } catch {
            throw DeviceCheckError(.unavailable, status: nil, "Apple's \(endpoint) could not be reached: \(error.reason)")
        }
        logger.debug("devicecheck: \(endpoint) answered", metadata: ["devicecheck.status": "\(answer.status.code)"])
        if answer.status == .ok { return answer.body }
        throw failure(endpoint, status: Int(answer.status.code), answer: answer.body)
    }

    /// The error for a status other than 200.
    private func failure(_ endpoint: String, status: Int, answer: Data) -> DeviceCheckError {
        let text = String(decoding: answer.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let code: DeviceCheckError.Code =
            switch status {
            case 400 where text.localizedCaseInsensitiveContains("device token"): .invalidDeviceToken
            case 400 where text.localizedCaseInsensitiveContains("authorization"), 401, 403: .unauthorized
            case 429, 500...599: .unavailable
            default: .rejected
            }
        if code == .unauthorized {
            bearer.clear()  // a key rotated or a clock off: the next call signs anew
            logger.error("devicecheck: Apple refused the DeviceCheck key (\(status)): check the key id, the team id and the key")
        }
        // Apple's bodies are fixed sentences; anything else (a proxy's page, an echo) is not repeated.
        let known = Self.appleMessages.first { text.caseInsensitiveCompare($0) == .orderedSame }
        return DeviceCheckError(code, status: status, "Apple answered \(endpoint) with status \(status)\(known.map { ": \($0)" } ?? "")")
    }

    /// The sentences Apple answers errors with.
    private static let appleMessages = [
        "Missing or incorrectly formatted device token payload", "Missing or incorrectly formatted time stamp",
        "Missing or incorrectly formatted payload", "Missing or badly formatted authorization token", "Unable to verify authorization token",
    ]

    /// `{"device_token", "transaction_id", "timestamp"}` and the bits.
    private static func body(deviceToken: String, at now: Date, bits: [String: Bool]) throws(DeviceCheckError) -> Data {
        var object: [String: Any] = [
            "device_token": deviceToken, "transaction_id": UUID().uuidString.lowercased(),
            "timestamp": Int64((now.timeIntervalSince1970 * 1000).rounded(.down)),
        ]
        for (name, value) in bits { object[name] = value }
        do {
            return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        } catch {
            throw DeviceCheckError(.rejected, status: nil, "the request could not be encoded")
        }
    }

    // MARK: Bearer token

    /// The token to send at `now`: the cached one while it is younger than ``tokenReuse``, else a compact JWS (ES256) of
    /// `{"iss": teamId, "iat": now}` with header `{"alg": "ES256", "kid": keyId}`.
    private func token(at now: Date) throws(DeviceCheckError) -> String {
        try bearer.token(at: now, reuse: Self.tokenReuse) { () throws(DeviceCheckError) -> String in
            let signer = ES256BearerSigner(keyId: configuration.keyId, key: configuration.privateKey)
            guard let iat = ES256BearerSigner.numericDate(now), let token = signer.sign(BearerClaims(iss: configuration.teamId, iat: iat))
            else { throw DeviceCheckError(.unauthorized, status: nil, "the DeviceCheck key could not sign") }
            return token
        }
    }
}

/// A device's two DeviceCheck bits.
public struct DeviceBits: Sendable, Hashable {
    /// The first bit.
    public var bit0: Bool
    /// The second bit.
    public var bit1: Bool
    /// The month they last changed, `YYYY-MM` (Apple's `last_update_time`), if Apple said.
    public var lastUpdate: String?

    /// Bits as Apple answers them.
    public init(bit0: Bool, bit1: Bool, lastUpdate: String?) {
        self.bit0 = bit0
        self.bit1 = bit1
        self.lastUpdate = lastUpdate
    }
}

/// A DeviceCheck call that did not succeed. Its message never holds the bearer token or a device token.
public struct DeviceCheckError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a caller acts on it.
    public enum Code: String, Sendable, Hashable {
        /// Apple refused the device token (400 about the device token; or it was empty): treat the device as unverified.
        case invalidDeviceToken
        /// Apple refused the server's credentials (401, 403, 400 about the authorization token), or the key cannot sign:
        /// the DeviceCheck key, its id or the team id is wrong, or the clock is off. An operator's problem, not the device's.
        case unauthorized
        /// Apple refused the request as made (another 4xx): a defect of this client.
        case rejected
        /// No answer in time, no connection, 429 or 5xx: worth trying again later.
        case unavailable
        /// A 200 whose body is not what Apple documents.
        case malformedResponse
    }

    /// What went wrong.
    public var code: Code
    /// The HTTP status, if Apple answered.
    public var status: Int?
    /// What happened, without any secret.
    public var message: String

    /// An error.
    public init(_ code: Code, status: Int?, _ message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    /// Whether trying again may help.
    public var isRetryable: Bool { code == .unavailable }

    /// The code and message.
    public var description: String { "\(code.rawValue): \(message)" }
}
