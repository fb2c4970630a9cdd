import TallyAPI

/// A type a request body decodes into, with the top-level fields that must be written as JSON integers.
///
/// `JSONDecoder` reads `5.0`, `1e3` and `5E0` into an `Int` as 5; ``JSONScanner`` refuses those literals for
/// the fields named here, so a field is an integer on the wire exactly when it is one in Swift (other numbers,
/// such as the floating-point values of future documents, keep their fractions and exponents).
/// Every request type states its list, so a new one cannot forget to.
protocol JSONRequestBody: Decodable {
    /// Top-level keys whose values must be integers (no fraction or exponent) within 64 bits.
    static var integerFields: Set<String> { get }
}

extension GuestSignInRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension RefreshRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension CredentialsRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ChangePasswordRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension AppleIDNotificationRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension AppleSignInRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension RedeemPurchaseRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension AppStoreNotificationRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ForgotPasswordRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ResetPasswordRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension VerifyEmailRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension UpdateMeRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension CreateHoldRequest: JSONRequestBody {
    static let integerFields: Set<String> = ["amount", "ttlSeconds"]
}

extension CaptureHoldRequest: JSONRequestBody {
    static let integerFields: Set<String> = ["amount"]
}

extension GrantRequest: JSONRequestBody {
    static let integerFields: Set<String> = ["amount"]
}

extension PremiumRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}
