import Foundation
import HTTPTypes
import Hummingbird
import TallyAPI
import TallyStore

/// An error meant for the client: a status, a code and a message, rendered as `{"error":{"code","message"}}`.
public struct APIError: Error, HTTPResponseError, CustomStringConvertible {
    /// HTTP status.
    public var status: HTTPResponse.Status
    /// The body.
    public var body: ErrorResponse
    /// Extra headers such as `Retry-After`.
    public var headers: HTTPFields

    /// Creates an error whose status follows from its code.
    public init(_ code: ErrorCode, _ message: String, status: HTTPResponse.Status? = nil, headers: HTTPFields = [:]) {
        self.status = status ?? Self.status(for: code)
        self.body = ErrorResponse(error: ErrorDetail(code: code, message: message))
        self.headers = headers
    }

    /// The code and status only.
    public var description: String { "APIError(\(status.code) \(body.error.code))" }

    /// The error as its HTTP status and `{"error":{"code","message"}}` body.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = JSONResponse.make(status: status, body: body)
        response.headers.append(contentsOf: headers)
        return response
    }

    static func status(for code: ErrorCode) -> HTTPResponse.Status {
        switch code {
        case .unauthorized, .invalidCredentials, .invalidRefreshToken, .refreshTokenReused: return .unauthorized
        case .forbidden, .installationRejected, .attestationRequired, .sandboxLimit: return .forbidden
        case .notFound, .unknownCollection, .unknownModel: return .notFound
        case .upstreamFailed: return .badGateway
        case .clientIdInUse: return .forbidden
        case .versionConflict: return .preconditionFailed
        case .resyncRequired: return .gone
        case .purchaseClaimed, .signInRequired, .accountExists, .alreadyMerged, .guestInDebt, .mergeRefused: return .conflict
        case .wrongIssuer, .wrongAudience, .tokenExpired, .wrongNonce, .unknownKey, .tokenUsed, .authorizationCodeMismatch:
            return .unauthorized
        case .unknownProduct: return .unprocessableContent
        case .documentTooLarge: return .contentTooLarge
        case .collectionFull, .storageFull: return .conflict
        case .unsupportedMediaType: return .unsupportedMediaType
        case .methodNotAllowed: return .methodNotAllowed
        case .insufficientTokens, .quotaExhausted: return HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required")
        case .credentialInUse, .alreadyLinked, .holdNotOpen, .idempotencyKeyInUse, .notLinked, .alreadyVerified: return .conflict
        case .mailUnavailable: return .serviceUnavailable
        case .idempotencyMismatch: return .unprocessableContent
        case .bodyTooLarge: return .contentTooLarge
        case .rateLimited: return .tooManyRequests
        case .unavailable, .busy: return .serviceUnavailable
        case .internalError: return .internalServerError
        default: return .badRequest
        }
    }
}

extension APIError {
    /// The client-facing form of a store failure.
    init(_ error: StoreError, views: QuotaViews? = nil) {
        switch error.code {
        case .userNotFound: self.init(.notFound, "No such user.")
        case .holdNotFound: self.init(.notFound, "No such hold.")
        case .holdNotOpen: self.init(.holdNotOpen, "The hold was already captured, released or expired.")
        case .insufficientTokens: self.init(.insufficientTokens, "Not enough tokens available.")
        case .quotaExhausted: self.init(.quotaExhausted, "No free uses left today.")
        case .credentialInUse: self.init(.credentialInUse, "This email belongs to another account.")
        case .alreadyLinked: self.init(.alreadyLinked, "This account already has an email.")
        case .invalidRefreshToken: self.init(.invalidRefreshToken, "The refresh token is invalid, expired or revoked.")
        case .refreshTokenReused:
            self.init(.refreshTokenReused, "The refresh token was already used; the session is revoked. Sign in again.")
        case .idempotencyMismatch:
            self.init(.idempotencyMismatch, "This Idempotency-Key was used with a different request.")
        case .idempotencyKeyInUse:
            self.init(.idempotencyKeyInUse, "A request with this Idempotency-Key is still in progress; retry later.")
        case .invalidInput: self.init(.invalidField, "A value is out of range.")
        case .versionConflict:
            self.init(.versionConflict, "The document is not at the version the precondition names; 'current' is the document as it is.")
            body.error.current = error.current.map(Document.init)
        case .documentNotFound: self.init(.notFound, "No such document.")
        case .documentTooLarge: self.init(.documentTooLarge, "The document's data is larger than the collection's maxDocumentBytes.")
        case .collectionFull:
            self.init(.collectionFull, "The collection already holds its maxDocuments live documents of this user; delete some first.")
        case .invalidDocument:
            self.init(.invalidDocument, "The document's data must be a JSON object, with the collection's rangeKey (if any) as a string field.")
        case .clientIdInUse: self.init(.clientIdInUse, "This clientId belongs to another user; generate a new one.")
        case .storageFull:
            self.init(
                .storageFull,
                "This user's synced storage is full (documents and tombstones, bytes, or sync client ids); delete documents "
                    + "to free bytes; tombstones and idle client ids are purged after the tombstone retention.")
        case .purchaseClaimed: self.init(.purchaseClaimed, "This App Store transaction was redeemed by another account.")
        case .signInRequired:
            self.init(
                .signInRequired,
                "This subscription belongs to the account that bought it; sign in to that account to use it (a guest cannot restore it).")
        case .sandboxLimit:
            self.init(
                .sandboxLimit,
                "This account has been credited the most Sandbox tokens the server allows (appStore.sandbox.tokensPerAccount); "
                    + "nothing was credited.")
        case .resyncRequired:
            self.init(.resyncRequired, "The cursor is older than the tombstones the server keeps; pull again without a cursor.")
        case .rateLimited:
            let seconds = Int(saturating: error.retryAfter ?? 60, rounding: .up)
            self.init(.rateLimited, "Too many new accounts from this address; retry later.", headers: [.retryAfter: "\(seconds)"])
        default: self.init(.unavailable, "The database is unavailable; retry later.", headers: [.retryAfter: "1"])
        }
        if let state = error.state, let views {
            body.wallet = Wallet(state.wallet)
            body.quotas = views.quotas(for: state)
        }
    }
}

extension HTTPField.Name {
    /// `Retry-After`.
    static let retryAfter = HTTPField.Name("Retry-After")!
    /// `Idempotency-Key`.
    static let idempotencyKey = HTTPField.Name(TallyHeader.idempotencyKey)!
    /// `Idempotent-Replayed`.
    static let idempotentReplayed = HTTPField.Name(TallyHeader.idempotentReplayed)!
}
