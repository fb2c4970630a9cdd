/// A machine-readable error code, the `code` of every `{"error":{"code","message"}}` body.
///
/// A struct rather than an enum so that new codes never break clients that switch over the known ones.
public struct ErrorCode: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    /// The code as it appears on the wire.
    public let rawValue: String
    /// Wraps a wire code.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The wire code.
    public var description: String { rawValue }

    /// Decodes a code from its string; unknown codes are kept, not rejected.
    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the code as its string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension ErrorCode {
    /// The body is not valid JSON, or a field has the wrong type or is missing.
    public static let invalidJSON = ErrorCode(rawValue: "invalid_json")
    /// A field is present but its value is out of range or malformed.
    public static let invalidField = ErrorCode(rawValue: "invalid_field")
    /// A query parameter is malformed.
    public static let invalidQuery = ErrorCode(rawValue: "invalid_query")
    /// The pagination cursor was not issued by this server.
    public static let invalidCursor = ErrorCode(rawValue: "invalid_cursor")
    /// The request body exceeds the size limit.
    public static let bodyTooLarge = ErrorCode(rawValue: "body_too_large")
    /// The request body's `Content-Type` is not one the endpoint takes (a merge patch needs `application/merge-patch+json`).
    public static let unsupportedMediaType = ErrorCode(rawValue: "unsupported_media_type")
    /// No access token, or one that is malformed, expired or revoked.
    public static let unauthorized = ErrorCode(rawValue: "unauthorized")
    /// The admin key is missing or wrong.
    public static let forbidden = ErrorCode(rawValue: "forbidden")
    /// An App Attest attestation or assertion was refused (the message names the rule it broke); nothing was stored.
    public static let installationRejected = ErrorCode(rawValue: "installation_rejected")
    /// The server enforces App Attest and this request spends something free (a free use, a sign-up grant, a guest
    /// merge) without an `X-Tally-Assertion` from an attested key: paid actions and purchases still work.
    public static let attestationRequired = ErrorCode(rawValue: "attestation_required")
    /// Email and password do not match an account.
    public static let invalidCredentials = ErrorCode(rawValue: "invalid_credentials")
    /// The refresh token is unknown, expired or revoked.
    public static let invalidRefreshToken = ErrorCode(rawValue: "invalid_refresh_token")
    /// A refresh token was presented twice; its whole family is now revoked.
    public static let refreshTokenReused = ErrorCode(rawValue: "refresh_token_reused")
    /// The email is already linked to another account.
    public static let credentialInUse = ErrorCode(rawValue: "credential_in_use")
    /// The account already has an email and password.
    public static let alreadyLinked = ErrorCode(rawValue: "already_linked")
    /// The account has no email and password yet (a guest): link one first (`POST /v1/auth/link`).
    public static let notLinked = ErrorCode(rawValue: "not_linked")
    /// A password reset or email verification code is wrong, expired, used, superseded by a newer one, or spent
    /// its attempts: ask for a new one.
    public static let invalidCode = ErrorCode(rawValue: "invalid_code")
    /// The account's email is already verified: no code is sent.
    public static let alreadyVerified = ErrorCode(rawValue: "already_verified")
    /// The server sends no mail (no `mail:` hook configured) or its mail queue is full: no code is sent.
    public static let mailUnavailable = ErrorCode(rawValue: "mail_unavailable")
    /// The resource does not exist (or belongs to someone else).
    public static let notFound = ErrorCode(rawValue: "not_found")
    /// The HTTP method is not supported on this path.
    public static let methodNotAllowed = ErrorCode(rawValue: "method_not_allowed")
    /// The wallet's available balance is below the amount asked for.
    public static let insufficientTokens = ErrorCode(rawValue: "insufficient_tokens")
    /// A quota-only action has no free uses left today.
    public static let quotaExhausted = ErrorCode(rawValue: "quota_exhausted")
    /// The hold was already captured, released or expired.
    public static let holdNotOpen = ErrorCode(rawValue: "hold_not_open")
    /// The `Idempotency-Key` header is required on this endpoint.
    public static let idempotencyKeyRequired = ErrorCode(rawValue: "idempotency_key_required")
    /// The `Idempotency-Key` was used before with a different request.
    public static let idempotencyMismatch = ErrorCode(rawValue: "idempotency_mismatch")
    /// A request with the same `Idempotency-Key` is still being processed.
    public static let idempotencyKeyInUse = ErrorCode(rawValue: "idempotency_key_in_use")
    /// Too many requests; see `Retry-After`.
    public static let rateLimited = ErrorCode(rawValue: "rate_limited")
    /// The AI gateway offers no model of this name (`ai.models` in the server's configuration).
    public static let unknownModel = ErrorCode(rawValue: "unknown_model")
    /// The AI gateway's upstream (the model provider) failed or could not be reached; nothing was charged.
    public static let upstreamFailed = ErrorCode(rawValue: "upstream_failed")
    /// The AI gateway's upstream answered (not streamed) beyond what the gateway returns (16 MiB): what it generated
    /// was charged (`Tally-Charge`), the answer is not returned. Stream such calls.
    public static let answerTooLarge = ErrorCode(rawValue: "answer_too_large")
    /// An image part was sent to a model that takes none (its `images` rule is not configured).
    public static let imagesNotSupported = ErrorCode(rawValue: "images_not_supported")
    /// More image parts than the model's `maxPerRequest`.
    public static let tooManyImages = ErrorCode(rawValue: "too_many_images")
    /// An image larger, decoded, than the model's `maxBytes`.
    public static let imageTooLarge = ErrorCode(rawValue: "image_too_large")
    /// An image part that is not a PNG, JPEG, WebP or GIF of its declared type, with a complete header, in base64.
    public static let invalidImage = ErrorCode(rawValue: "invalid_image")
    /// An image URL that is neither a `data:` URL nor `https` on one of the model's `allowedURLHosts`.
    public static let imageURLNotAllowed = ErrorCode(rawValue: "image_url_not_allowed")
    /// An audio part or field: audio is billed by its length, which a hold cannot bound.
    public static let audioNotSupported = ErrorCode(rawValue: "audio_not_supported")
    /// The server is reading as many large bodies as it holds at once (`ai.requestBytesInFlight`): retry after
    /// `Retry-After` seconds. Nothing was read, held or charged.
    public static let busy = ErrorCode(rawValue: "busy")
    /// The database is unreachable.
    public static let unavailable = ErrorCode(rawValue: "unavailable")
    /// A fault inside the server; details are in its logs, never in the response.
    public static let internalError = ErrorCode(rawValue: "internal")
}

extension ErrorCode {
    /// The App Store transaction is another account's (409): a consumable is credited once, to one account; a
    /// subscription stays with the account its `appAccountToken` names.
    public static let purchaseClaimed = ErrorCode(rawValue: "purchase_claimed")
    /// A guest submitted a subscription bought by an account one can sign in to (409): it stays with that account; sign
    /// in to it (the transaction is not finished, so it is redeemed again after the sign-in).
    public static let signInRequired = ErrorCode(rawValue: "sign_in_required")
    /// A Sandbox purchase would credit the account more Sandbox tokens than the server allows
    /// (`appStore.sandbox.tokensPerAccount`) (403): nothing was credited.
    public static let sandboxLimit = ErrorCode(rawValue: "sandbox_limit")
    /// The product is not one the server's configuration sells (422): nothing was credited.
    public static let unknownProduct = ErrorCode(rawValue: "unknown_product")
    /// A signed payload's signature does not verify with its leaf certificate, or it is not a JWS (400).
    public static let invalidSignature = ErrorCode(rawValue: "invalid_signature")
    /// A signed payload's certificate chain does not lead to a configured root, lacks Apple's marks, or was not
    /// valid at the payload's `signedDate` (400).
    public static let untrustedChain = ErrorCode(rawValue: "untrusted_chain")
    /// A signed payload is signed with another algorithm than ES256 (400).
    public static let unsupportedAlgorithm = ErrorCode(rawValue: "unsupported_algorithm")
    /// A signed payload is for another app (400).
    public static let wrongBundle = ErrorCode(rawValue: "wrong_bundle")
    /// A signed payload is from an environment the server does not accept (400).
    public static let wrongEnvironment = ErrorCode(rawValue: "wrong_environment")
    /// A Production notification names another app id than the server's `appAppleId` (400).
    public static let wrongApp = ErrorCode(rawValue: "wrong_app")
}

extension ErrorCode {
    /// Signing in to an existing account from a guest without `merge: true` (409): the answer's `guest` says what the
    /// guest would bring; ask the user, then sign in again with `merge: true`.
    public static let accountExists = ErrorCode(rawValue: "account_exists")
    /// A Sign in with Apple identity token was not issued by Apple (401).
    public static let wrongIssuer = ErrorCode(rawValue: "wrong_issuer")
    /// A Sign in with Apple identity token is for another app (401).
    public static let wrongAudience = ErrorCode(rawValue: "wrong_audience")
    /// A Sign in with Apple identity token has expired, or is not valid yet (401).
    public static let tokenExpired = ErrorCode(rawValue: "expired")
    /// A Sign in with Apple identity token does not carry the SHA-256 of the nonce sent (401): a replayed token.
    public static let wrongNonce = ErrorCode(rawValue: "wrong_nonce")
    /// A Sign in with Apple identity token names a key Apple does not publish (401).
    public static let unknownKey = ErrorCode(rawValue: "unknown_key")
    /// A Sign in with Apple identity token that signed in before (401): each signs in once (an `account_exists` answer
    /// does not count, and the guest it merged may retry that merge with it). Sign in with Apple again for a new one.
    public static let tokenUsed = ErrorCode(rawValue: "token_used")
    /// A Sign in with Apple authorization code that Apple issued with another identity token than the one sent (401):
    /// nothing was stored. Send the code and the token of the same sign-in.
    public static let authorizationCodeMismatch = ErrorCode(rawValue: "authorization_code_mismatch")
    /// The guest was merged into another account already (409).
    public static let alreadyMerged = ErrorCode(rawValue: "already_merged")
    /// Only a guest merges, into another account that is not a guest (409).
    public static let mergeRefused = ErrorCode(rawValue: "merge_refused")
    /// The guest owes tokens (a refund) that the account cannot pay (409): nothing was merged.
    public static let guestInDebt = ErrorCode(rawValue: "guest_in_debt")
}
