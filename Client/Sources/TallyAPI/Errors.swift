/// The `error` object of an error response.
public struct ErrorDetail: Codable, Hashable, Sendable {
    /// Machine-readable code to switch on.
    public var code: ErrorCode
    /// Human-readable explanation, safe to log; never contains secrets.
    public var message: String
    /// On `version_conflict`: the document as it is now (`nil` when it does not exist; the server then sends `null`).
    public var current: Document?

    /// Creates an error detail.
    public init(code: ErrorCode, message: String, current: Document? = nil) {
        self.code = code
        self.message = message
        self.current = current
    }
}

/// Every error response: `{"error":{"code","message"}}`, plus the authoritative
/// wallet and quotas when a metered call was refused (402), so a client can reconcile at once.
public struct ErrorResponse: Codable, Hashable, Sendable {
    /// What went wrong.
    public var error: ErrorDetail
    /// The caller's wallet after the refusal, on 402 responses.
    public var wallet: Wallet?
    /// The caller's quotas after the refusal, on 402 responses.
    public var quotas: [Quota]?
    /// What the calling guest would bring into the account, on 409 `account_exists` responses.
    public var guest: GuestProgress?

    /// Creates an error response.
    public init(error: ErrorDetail, wallet: Wallet? = nil, quotas: [Quota]? = nil, guest: GuestProgress? = nil) {
        self.error = error
        self.wallet = wallet
        self.quotas = quotas
        self.guest = guest
    }
}
