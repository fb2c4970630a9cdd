import Foundation
import Hummingbird
import NIOCore
import TallyAPI

/// An App Store Server API error, answered as Apple does: the status and `{"errorCode": …, "errorMessage": …}`.
///
/// Apple documents some errors without publishing their codes (`ConsumptionPercentageOutOfRangeError`,
/// `InvalidRefundPreferenceError` and the consumption percentage's other rules): those are answered with
/// `GeneralBadRequestError`'s code, 4000000, and a message naming Apple's error.
struct DevAppleAPIError: Error, Sendable {
    /// The HTTP status.
    let status: Int
    /// Apple's error code.
    let errorCode: Int64
    /// Apple's message.
    let errorMessage: String

    /// The answer.
    var response: Response { DevAppStoreAPI.json(Body(errorCode: errorCode, errorMessage: errorMessage), status: .init(code: status)) }

    /// The body Apple answers.
    struct Body: Encodable {
        var errorCode: Int64
        var errorMessage: String
    }

    /// A 400 with `code`.
    static func invalid(_ code: Int64, _ message: String) -> Self { Self(status: 400, errorCode: code, errorMessage: message) }
    /// `GeneralBadRequestError` (400, 4000000).
    static func generalBadRequest(_ message: String) -> Self { invalid(4000000, message) }
    /// `InvalidTransactionIdError` (400, 4000006).
    static let invalidTransactionId = invalid(4000006, "Invalid transaction id.")
    /// `TransactionIdNotFoundError` (404, 4040010).
    static let transactionIdNotFound = Self(status: 404, errorCode: 4040010, errorMessage: "Transaction id not found.")

    /// The code a fault of `status` answers by default: `RateLimitExceededError` for 429, `GeneralInternalError` for
    /// 5xx, `GeneralBadRequestError` for 400; none (an empty body) for others.
    static func defaultCode(status: Int) -> Int64? {
        switch status {
        case 429: 4290000
        case 500...599: 5000000
        case 400: 4000000
        default: nil
        }
    }
}

/// A JSON value, its type told apart strictly (`1` is no boolean, `true` no number).
enum DevJSONValue: Decodable, Sendable {
    /// `true` or `false`.
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// `null`.
    case null
    /// An array or an object.
    case other

    /// Decodes whichever the value is.
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .other
        }
    }
}

/// A JSON object body, its members' types checked one by one (so each wrong member gets Apple's own error).
struct DevJSONObject: Sendable {
    /// Its members.
    let members: [String: DevJSONValue]

    /// The object in `data`; an empty body is `{}`, anything but an object Apple's general bad request.
    init(_ data: Data) throws {
        guard !data.isEmpty else {
            members = [:]
            return
        }
        guard let members = try? JSONDecoder().decode([String: DevJSONValue].self, from: data) else {
            throw DevAppleAPIError.generalBadRequest("Invalid request.")
        }
        self.members = members
    }

    /// The member `key`, if present.
    subscript(key: String) -> DevJSONValue? { members[key] }

    /// The string member `key`; nil when absent or null, `invalid` when not a non-empty string.
    func optionalString(_ key: String, or invalid: DevAppleAPIError) throws -> String? {
        switch members[key] {
        case nil, .null?: return nil
        case .string(let value)? where !value.isEmpty: return value
        default: throw invalid
        }
    }
}

/// Send Consumption Information's body checked as Apple documents `ConsumptionRequest`.
enum DevConsumptionValidation {
    /// The request in `data`, or the error Apple answers for its first wrong member. `subscription`: the transaction is
    /// an auto-renewable subscription's (which takes no `consumptionPercentage`).
    static func validate(_ data: Data, subscription: Bool) throws -> DevConsumptionRequest {
        let body = try DevJSONObject(data)
        guard case .bool(true)? = body["customerConsented"] else {
            throw DevAppleAPIError.invalid(4000035, "Invalid customer consented: it must be true.")
        }
        guard case .string(let deliveryStatus)? = body["deliveryStatus"], DevConsumptionRequest.deliveryStatuses.contains(deliveryStatus) else {
            throw DevAppleAPIError.invalid(4000036, "Invalid delivery status.")
        }
        guard case .bool(let sampleContentProvided)? = body["sampleContentProvided"] else {
            throw DevAppleAPIError.invalid(4000041, "Invalid sample content provided.")
        }
        var consumptionPercentage: Int?
        switch body["consumptionPercentage"] {
        case nil, .null?: break
        case .number(let value)? where value == value.rounded() && (0...100_000).contains(value): consumptionPercentage = Int(value)
        default: throw DevAppleAPIError.generalBadRequest("ConsumptionPercentageOutOfRangeError: consumptionPercentage is milliunits, 0 to 100000.")
        }
        var refundPreference: String?
        switch body["refundPreference"] {
        case nil, .null?: break
        case .string(let value)? where DevConsumptionRequest.refundPreferences.contains(value): refundPreference = value
        default: throw DevAppleAPIError.generalBadRequest("InvalidRefundPreferenceError: refundPreference is DECLINE, GRANT_FULL or GRANT_PRORATED.")
        }
        if subscription, consumptionPercentage != nil {
            throw DevAppleAPIError.generalBadRequest(
                "ConsumptionPercentageAutoRenewableSubscriptionError: an auto-renewable subscription takes no consumptionPercentage.")
        }
        if deliveryStatus != "DELIVERED", (consumptionPercentage ?? 0) != 0 {
            throw DevAppleAPIError.generalBadRequest(
                "UndeliveredConsumptionPercentageNonZeroError: consumptionPercentage must be 0 for an undelivered purchase.")
        }
        if refundPreference == "GRANT_PRORATED", !subscription, (consumptionPercentage ?? 0) == 0 {
            throw DevAppleAPIError.generalBadRequest("ConsumptionPercentageOutOfRangeError: GRANT_PRORATED needs a consumptionPercentage above 0.")
        }
        return DevConsumptionRequest(
            customerConsented: true, consumptionPercentage: consumptionPercentage, deliveryStatus: deliveryStatus,
            sampleContentProvided: sampleContentProvided, refundPreference: refundPreference)
    }
}

/// The App Store Server API's authentication: a request under `/inApps/` without a bearer token the store's key
/// accepts (``DevServerAPIKey/refusal(of:bundleId:now:)``) is answered as Apple answers it — 401, `text/plain`
/// `Unauthenticated` and a request id (Apple documents no JSON body for it) — with the reason in the header
/// `X-Dev-AppStore-Reason`, and recorded (``DevServerAPIRecords/rejections``).
struct DevServerAPIAuthentication: RouterMiddleware {
    typealias Context = BasicRequestContext
    /// The store whose key and bundle id a token must name.
    let store: DevAppStore

    /// Serves `request` when its token is good; answers 401 otherwise.
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let now = store.now
        guard
            let reason = store.serverAPIKey.refusal(
                of: request.headers[.authorization], bundleId: store.configuration.bundleId, now: now)
        else { return try await next(request, context) }
        store.serverAPIRecords.record(DevServerAPIRejection(at: now, method: request.method.rawValue, path: request.uri.path, reason: reason))
        var headers: HTTPFields = [.contentType: "text/plain"]
        if let name = HTTPFields.Element.Name("X-Dev-AppStore-Reason") { headers[name] = reason }
        let body = "Unauthenticated\n\nRequest ID: \(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(26)).0\n"
        return Response(status: .unauthorized, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}

/// Answers a request with the first pending fault its path matches (``DevServerAPIRecords/takeFault(for:)``), before
/// anything else (its token is not checked); `/faults` itself is never faulted. Added to the router before any route.
struct DevFaultMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    /// Where the pending faults are.
    let records: DevServerAPIRecords

    /// Answers `request` with a fault when one matches its path; serves it otherwise.
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard path != "/faults", let fault = records.takeFault(for: path) else { return try await next(request, context) }
        var response: Response
        if let errorCode = fault.errorCode {
            response = DevAppleAPIError(status: fault.status, errorCode: errorCode, errorMessage: "Fault injected by tally dev-appstore.").response
        } else {
            response = Response(status: .init(code: fault.status))
        }
        if let retryAfter = fault.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }
}
