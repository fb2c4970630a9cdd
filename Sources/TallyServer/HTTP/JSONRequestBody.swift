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

    /// The value of a body in the one exact form a hot route's clients send, read without `JSONDecoder`; `nil` for any
    /// other form, which `JSONDecoder` reads. Called only on a body ``JSONScanner`` accepted.
    static func decodeDirectly(_ bytes: UnsafeRawBufferPointer) -> Self?
}

extension JSONRequestBody {
    /// No direct form: `JSONDecoder` reads every body.
    static func decodeDirectly(_ bytes: UnsafeRawBufferPointer) -> Self? { nil }
}

/// The string `value` of a body written exactly `{"<key>":"<value>"}`, with no space and nothing in the value but
/// printable ASCII other than `"` and `\` (so no escape to undo): what an SDK sends for a one-field request such as a
/// signed payload (base64url and dots). `nil` for any other body.
func singleStringField(_ key: StaticString, in bytes: UnsafeRawBufferPointer) -> String? {
    let prefixLength = key.utf8CodeUnitCount + 5  // {"  key  ":"
    guard bytes.count > prefixLength + 2, bytes[0] == UInt8(ascii: "{"), bytes[1] == UInt8(ascii: "\""),
        bytes[bytes.count - 2] == UInt8(ascii: "\""), bytes[bytes.count - 1] == UInt8(ascii: "}")
    else { return nil }
    let keyBytes = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    guard bytes[2..<(2 + keyBytes.count)].elementsEqual(keyBytes),
        bytes[(2 + keyBytes.count)..<prefixLength].elementsEqual("\":\"".utf8)
    else { return nil }
    let value = UnsafeRawBufferPointer(rebasing: bytes[prefixLength..<(bytes.count - 2)])
    for byte in value where byte < 0x20 || byte > 0x7E || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return nil }
    return String(decoding: value, as: UTF8.self)
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

    static func decodeDirectly(_ bytes: UnsafeRawBufferPointer) -> RedeemPurchaseRequest? {
        singleStringField("signedTransaction", in: bytes).map(RedeemPurchaseRequest.init(signedTransaction:))
    }
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
